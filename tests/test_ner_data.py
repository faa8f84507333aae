"""CoNLL-2003 reading, IOB1/IOB2 handling, and entity-level scores worked by hand as conlleval."""

import random

import pytest

from bert_tf.errors import UserInputError
from bert_tf.tasks.ner import data, postprocess

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O
. . O O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP I-LOC
1996-08-22 CD I-NP O
"""


def test_reads_documents_sentences_words_and_last_column_tags(tmp_path):
  path = tmp_path / "eng.train"
  path.write_text(CONLL)
  documents = data.read_conll(str(path))
  assert [len(d.sentences) for d in documents] == [2, 1]
  first = documents[0].sentences[0]
  assert first.words == ["EU", "rejects", "German", "call", "."]
  assert first.tags == ["I-ORG", "O", "I-MISC", "O", "O"]
  assert documents[0].words[-2:] == ["Peter", "Blackburn"]
  assert first.line == 3 and documents[1].sentences[0].line == 14


def test_two_column_and_word_only_files(tmp_path):
  two = tmp_path / "two.txt"
  two.write_text("Paris B-LOC\nis O\n\nnice O\n")
  assert [s.tags for s in data.read_conll(str(two))[0].sentences] == [["B-LOC", "O"], ["O"]]
  words = tmp_path / "words.txt"
  words.write_text("Paris\nis\n")
  assert data.read_conll(str(words))[0].sentences[0].tags is None


@pytest.mark.parametrize("text, words", [
    ("a B-PER\nb\n", r"line 2 has 1 column\(s\), the lines before it 2"),
    ("a X-PER\n", "tag 'X-PER' is not O, B-TYPE or I-TYPE"),
    ("-DOCSTART- -X- O\n\n", "holds no words"),
])
def test_malformed_files_name_the_line(tmp_path, text, words):
  path = tmp_path / "bad.txt"
  path.write_text(text)
  with pytest.raises(UserInputError, match=words):
    data.read_conll(str(path))


def test_split_files_accept_the_original_names(tmp_path):
  (tmp_path / "eng.testa").write_text("a O\n")
  assert data.split_file(str(tmp_path), "dev").endswith("eng.testa")
  with pytest.raises(UserInputError, match=r"No test file .* test.txt, eng.testb"):
    data.split_file(str(tmp_path), "test")


def test_scheme_detection_and_conversion():
  iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]
  iob2 = ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG"]
  doc = lambda tags: [data.Document([data.Sentence(["w"] * len(tags), tags)])]
  assert data.detect_scheme(doc(iob1)) == "iob1" and data.detect_scheme(doc(iob2)) == "iob2"
  assert data.to_iob2(iob1) == iob2 and data.to_iob2(iob2) == iob2
  assert data.from_iob2(iob2, "iob1") == iob1 and data.from_iob2(iob2, "iob2") == iob2


def test_iob1_round_trip_on_random_chunkings():
  rng = random.Random(3)
  for _ in range(200):
    tags = []
    for _ in range(rng.randint(1, 8)):
      if rng.random() < 0.4:
        tags.append("O")
        continue
      type_ = rng.choice(["PER", "LOC"])
      length = rng.randint(1, 3)
      # IOB1: I- everywhere, B- on the first word of a chunk right after one of its type.
      first = "B-" if tags and tags[-1] != "O" and tags[-1][2:] == type_ else "I-"
      tags += [first + type_] + ["I-" + type_] * (length - 1)
    assert data.from_iob2(data.to_iob2(tags), "iob1") == tags


def test_label_list_is_iob2_with_o_first():
  documents = [data.Document([data.Sentence(["a", "b"], ["I-PER", "I-MISC"])])]
  assert data.label_list(documents) == ["O", "B-MISC", "I-MISC", "B-PER", "I-PER"]


# conlleval cases worked by hand: (gold, predicted) sentences -> overall and per-type counts.

def _scores(*sentences):
  return postprocess.conlleval([(g.split(), p.split()) for g, p in sentences])


def test_perfect_prediction():
  s = _scores(("B-PER I-PER O B-LOC", "B-PER I-PER O B-LOC"))
  assert s["precision"] == s["recall"] == s["f1"] == 1.0


def test_a_chunk_may_start_with_i_and_iob1_equals_iob2():
  """I- after O opens a chunk (IOB1), so gold IOB1 against predicted IOB2 of the same chunks."""
  s = _scores(("I-PER I-PER O I-LOC B-LOC", "B-PER I-PER O B-LOC B-LOC"))
  assert s["precision"] == s["recall"] == 1.0
  assert postprocess.chunk_counts([("I-LOC B-LOC".split(), "B-LOC B-LOC".split())])[""] == (
      2, 2, 2)


def test_a_type_change_inside_a_chunk_splits_it():
  """Predicted PER, LOC, PER (three chunks) against one gold PER chunk: nothing correct."""
  counts = postprocess.chunk_counts([("B-PER I-PER I-PER".split(), "B-PER I-LOC I-PER".split())])
  assert counts[""] == (0, 1, 3) and counts["PER"] == (0, 1, 2) and counts["LOC"] == (0, 0, 1)


def test_a_chunk_must_end_where_gold_ends():
  s = _scores(("B-ORG O", "B-ORG I-ORG"))
  assert s["precision"] == s["recall"] == 0.0


def test_sentence_breaks_end_chunks():
  """A chunk running to a sentence's end is scored there, not joined with the next sentence."""
  counts = postprocess.chunk_counts([(["I-PER"], ["I-PER"]), (["I-PER"], ["O"])])
  assert counts[""] == (1, 2, 1)


def test_overall_and_per_type_figures():
  s = _scores(("B-PER O B-LOC", "B-PER O O"), ("B-MISC I-MISC", "B-MISC O"))
  assert s["precision"] == pytest.approx(1 / 2) and s["recall"] == pytest.approx(1 / 3)
  assert s["f1"] == pytest.approx(2 * (1 / 2) * (1 / 3) / (1 / 2 + 1 / 3))
  assert s["PER_f1"] == 1.0 and s["LOC_recall"] == 0.0 and s["LOC_precision"] == 0.0
  assert s["MISC_precision"] == 0.0 and s["MISC_recall"] == 0.0


def test_prediction_file_is_what_conlleval_reads(tmp_path):
  path = tmp_path / "pred.txt"
  postprocess.write_conll(str(path), [(["Paris", "is"], ["I-LOC", "O"], ["I-LOC", "O"]),
                                      (["x"], None, ["B-PER"])])
  assert path.read_text() == "Paris I-LOC I-LOC\nis O O\n\nx O B-PER\n\n"
