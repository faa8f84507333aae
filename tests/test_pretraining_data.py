"""create_pretraining_data: the original's records for the same corpus, flags and seed."""

import collections
import json
import random
import types

import pytest
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.data import example_codec
from bert_tf.errors import UserInputError
from bert_tf.tasks.pretraining import corpus, data_flags
from bert_tf.tasks.pretraining import instances as pretraining_instances
from bert_tf.tasks.pretraining import records as pretraining_data
from helpers import FIXTURES, VOCAB_UNCASED, run_script

DATA = FIXTURES / "pretraining_data"
CORPUS = str(DATA / "corpus.txt")


def _parsed(path):
  return [example_codec.parse_example(r.numpy()) for r in tf.data.TFRecordDataset(str(path))]


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case=True)


def _generate(tokenizer, output_files, **overrides):
  options = dict(max_seq_length=128, dupe_factor=2, short_seq_prob=0.1, masked_lm_prob=0.15,
                 max_predictions_per_seq=20, rng=pretraining_data.new_rng(12345))
  options.update(overrides)
  instances = pretraining_data.create_training_instances([CORPUS], tokenizer, **options)
  pretraining_data.write_instance_to_example_files(
      instances, tokenizer, options["max_seq_length"], options["max_predictions_per_seq"],
      [str(f) for f in output_files])
  return instances


def test_records_equal_the_originals(tokenizer, tmp_path):
  out = tmp_path / "a.tfrecord"
  _generate(tokenizer, [out])
  ours, original = _parsed(out), _parsed(DATA / "a_seq128.tfrecord")
  assert len(original) == 354
  assert ours == original
  first5 = json.loads((DATA / "a_seq128_first5.json").read_text())
  assert first5["total_records"] == len(ours)
  for record, want in zip(ours, first5["first5"]):
    for key in ("input_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"):
      assert record[key] == list(want[key]) if isinstance(want[key], list) else [want[key]]


def test_round_robin_over_output_files(tokenizer, tmp_path):
  files = [tmp_path / "x.tfrecord", tmp_path / "y.tfrecord", tmp_path / "z.tfrecord"]
  _generate(tokenizer, files)
  parts = [_parsed(f) for f in files]
  original = _parsed(DATA / "a_seq128.tfrecord")
  assert [len(p) for p in parts] == [118, 118, 118]
  assert parts[1] == original[1::3] and parts[2] == original[2::3]
  assert not list(tmp_path.glob("*.partial"))


def test_encoding_parses_like_a_protobuf_built_example():
  serialized = example_codec.encode_example([
      ("ids", example_codec.int64_feature([0, 1, 127, 128, 300000, 2 ** 40, -3])),
      ("w", example_codec.float_feature([1.0, 0.0, -2.5])),
      ("empty", example_codec.int64_feature([]))])
  want = tf.train.Example(features=tf.train.Features(feature={
      "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[0, 1, 127, 128, 300000,
                                                                   2 ** 40, -3])),
      "w": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 0.0, -2.5])),
      "empty": tf.train.Feature(int64_list=tf.train.Int64List(value=[]))}))
  assert tf.train.Example.FromString(serialized) == want


def test_whole_word_masking_masks_whole_words_and_stays_within_budget(tokenizer):
  instances = pretraining_data.create_training_instances(
      [CORPUS], tokenizer, 64, 1, 0.1, 0.15, 10, pretraining_data.new_rng(7),
      do_whole_word_mask=True)
  assert instances
  for inst in instances:
    assert len(inst.masked_lm_positions) <= 10
    assert inst.masked_lm_positions == sorted(inst.masked_lm_positions)
    masked = set(inst.masked_lm_positions)
    for p in masked:  # a masked "##" piece implies the piece before it is masked too
      if inst.masked_lm_labels[inst.masked_lm_positions.index(p)].startswith("##"):
        previous = p - 1  # the original groups across [SEP]: b may start with "##"
        while previous > 0 and inst.tokens[previous] in ("[CLS]", "[SEP]"):
          previous -= 1
        assert previous == 0 or previous in masked  # at the start it opens its own group
    assert inst.tokens[0] == "[CLS]" and inst.tokens.count("[SEP]") == 2
    assert len(inst.tokens) <= 64 and len(inst.tokens) == len(inst.segment_ids)


def test_masking_replacement_proportions_hand_checked():
  """80% [MASK], 10% kept, 10% random vocab word, over many draws."""
  rng = random.Random(0)
  vocab = ["[PAD]", "w1", "w2", "w3"]
  tokens = ["[CLS]"] + ["tok%d" % i for i in range(200)] + ["[SEP]"]
  counts = {"mask": 0, "kept": 0, "random": 0}
  for _ in range(200):
    out, positions, labels = pretraining_instances.create_masked_lm_predictions(
        tokens, 0.15, 1000, vocab, rng)
    assert len(positions) == round(len(tokens) * 0.15)
    for p, label in zip(positions, labels):
      assert tokens[p] == label
      key = "mask" if out[p] == "[MASK]" else "kept" if out[p] == label else "random"
      counts[key] += 1
  total = sum(counts.values())
  assert abs(counts["mask"] / total - 0.8) < 0.02
  assert abs(counts["kept"] / total - 0.1) < 0.02
  assert abs(counts["random"] / total - 0.1) < 0.02


def test_streaming_mode_with_one_big_shard_equals_the_faithful_mode(tokenizer, tmp_path):
  out = tmp_path / "s.tfrecord"
  pretraining_data.write_sharded([CORPUS], [str(out)], 10_000, tokenizer, 128, 2, 0.1, 0.15, 20,
                                 pretraining_data.new_rng(12345))
  assert _parsed(out) == _parsed(DATA / "a_seq128.tfrecord")
  small = tmp_path / "small.tfrecord"
  count = pretraining_data.write_sharded([CORPUS], [str(small)], 5, tokenizer, 128, 1, 0.1, 0.15,
                                         20, pretraining_data.new_rng(1))
  records = _parsed(small)
  assert count == len(records) > 100
  assert all(len(r["input_ids"]) == 128 and len(r["masked_lm_ids"]) == 20 for r in records)


def test_non_utf8_corpus_names_the_line(tokenizer, tmp_path):
  bad = tmp_path / "bad.txt"
  bad.write_bytes(b"Good line.\n\nAnother caf\xe9.\n")
  with pytest.raises(UserInputError, match=r"bad.txt line 3 is not UTF-8"):
    pretraining_data.read_documents([str(bad)], tokenizer)


@pytest.mark.slow
def test_command_line_with_original_flags(tmp_path):
  out = tmp_path / "a.tfrecord"
  result = run_script("create_pretraining_data.py", "--input_file=%s" % CORPUS,
                      "--output_file=%s" % out, "--vocab_file=%s" % VOCAB_UNCASED,
                      "--do_lower_case=True", "--max_seq_length=128",
                      "--max_predictions_per_seq=20", "--masked_lm_prob=0.15", "--dupe_factor=2",
                      "--random_seed=12345", "--short_seq_prob=0.1", "--do_whole_word_mask=False")
  assert result.returncode == 0, result.stderr
  assert "writing: 354/354 records" in result.stderr
  assert _parsed(out) == _parsed(DATA / "a_seq128.tfrecord")
  result = run_script("create_pretraining_data.py",
                      "--input_file=%s" % (tmp_path / "nothing*.txt"), "--output_file=%s" % out,
                      "--vocab_file=%s" % VOCAB_UNCASED)
  assert result.returncode == 2 and "No file matches --input_file pattern" in result.stderr


def test_a_file_without_text_is_an_error_naming_it(tokenizer, tmp_path):
  empty = tmp_path / "empty.txt"
  empty.write_bytes(b"")
  blank = tmp_path / "blank.txt"
  blank.write_text("\n  \n\u200b\n\n", encoding="utf-8")  # a zero-width space tokenizes to nothing
  for bad in (empty, blank):
    with pytest.raises(UserInputError, match=r"Input file %s has no text to make pretraining "
                       r"examples from .* remove it from --input_file\." % bad):
      pretraining_data.read_documents([CORPUS, str(bad)], tokenizer)
    assert not pretraining_data.has_text(str(bad), tokenizer)
  assert pretraining_data.has_text(CORPUS, tokenizer)
  # Streaming mode has written records of the good file by then: they are removed too.
  out = tmp_path / "s.tfrecord"
  with pytest.raises(UserInputError, match="blank.txt has no text"):
    pretraining_data.write_sharded([CORPUS, str(blank)], [str(out)], 5, tokenizer, 128, 1, 0.1,
                                   0.15, 20, pretraining_data.new_rng(1))
  assert sorted(p.name for p in tmp_path.iterdir()) == ["blank.txt", "empty.txt"]


@pytest.mark.slow
def test_command_line_stops_on_a_file_without_text_and_writes_nothing(tmp_path):
  empty = tmp_path / "empty.txt"
  empty.write_bytes(b"\n\n")
  out = tmp_path / "out"
  out.mkdir()
  for extra in ([], ["--documents_per_shard=3"]):
    result = run_script("create_pretraining_data.py", "--input_file=%s,%s" % (CORPUS, empty),
                        "--output_file=%s" % (out / "a.tfrecord"),
                        "--vocab_file=%s" % VOCAB_UNCASED, "--dupe_factor=1", *extra)
    assert result.returncode == 2, result.stderr
    errors = [l for l in result.stderr.splitlines() if l.startswith("error: ")]
    assert errors == ["error: Input file %s has no text to make pretraining examples from (it is "
                      "empty, or every line is blank or tokenizes to nothing); remove it from "
                      "--input_file." % empty]
    assert "Traceback" not in result.stderr
    assert not list(out.iterdir())


# --- Reference: the original algorithm, one token at a time -------------------------------
# An independent transcription of Google's instance generation with its quadratic
# truncation (`del tokens[0]`), used as the expectation for the linear one.

def _original_truncate(tokens_a, tokens_b, max_num_tokens, rng):
  while len(tokens_a) + len(tokens_b) > max_num_tokens:
    longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    if rng.random() < 0.5:
      del longer[0]
    else:
      longer.pop()


def _original_masking(tokens, masked_lm_prob, max_predictions, vocab_words, rng):
  candidates = [[i] for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
  rng.shuffle(candidates)
  out = list(tokens)
  budget = min(max_predictions, max(1, int(round(len(tokens) * masked_lm_prob))))
  picked = []
  for (index,) in candidates:
    if len(picked) >= budget:
      break
    if rng.random() < 0.8:
      out[index] = "[MASK]"
    elif rng.random() < 0.5:
      pass
    else:
      out[index] = vocab_words[rng.randint(0, len(vocab_words) - 1)]
    picked.append(index)
  picked.sort()
  return out, picked, [tokens[i] for i in picked]


def _original_document_instances(documents, index, max_seq_length, short_seq_prob,
                                 masked_lm_prob, max_predictions, vocab_words, rng):
  document = documents[index]
  max_num_tokens = max_seq_length - 3
  target = max_num_tokens
  if rng.random() < short_seq_prob:
    target = rng.randint(2, max_num_tokens)
  instances, chunk, length, i = [], [], 0, 0
  while i < len(document):
    chunk.append(document[i])
    length += len(document[i])
    if i == len(document) - 1 or length >= target:
      a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
      tokens_a = [t for segment in chunk[:a_end] for t in segment]
      tokens_b = []
      if len(chunk) == 1 or rng.random() < 0.5:
        is_random_next = True
        for _ in range(10):
          other = rng.randint(0, len(documents) - 1)
          if other != index:
            break
        start = rng.randint(0, len(documents[other]) - 1)
        for segment in documents[other][start:]:
          tokens_b.extend(segment)
          if len(tokens_b) >= target - len(tokens_a):
            break
        i -= len(chunk) - a_end
      else:
        is_random_next = False
        tokens_b = [t for segment in chunk[a_end:] for t in segment]
      _original_truncate(tokens_a, tokens_b, max_num_tokens, rng)
      tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
      segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
      tokens, positions, labels = _original_masking(tokens, masked_lm_prob, max_predictions,
                                                    vocab_words, rng)
      instances.append((tokens, segment_ids, is_random_next, positions, labels))
      chunk, length = [], 0
    i += 1
  return instances


def _original_instances(documents, vocab_words, max_seq_length, dupe_factor, short_seq_prob,
                        masked_lm_prob, max_predictions, rng):
  documents = [[list(s) for s in d] for d in documents]
  rng.shuffle(documents)
  instances = []
  for _ in range(dupe_factor):
    for index in range(len(documents)):
      instances.extend(_original_document_instances(
          documents, index, max_seq_length, short_seq_prob, masked_lm_prob, max_predictions,
          vocab_words, rng))
  rng.shuffle(instances)
  return instances


def _as_tuples(instances):
  return [(i.tokens, i.segment_ids, i.is_random_next, i.masked_lm_positions, i.masked_lm_labels)
          for i in instances]


@pytest.mark.parametrize("block", [None, 2, 6])
def test_truncation_cuts_and_draws_exactly_as_the_original_loop(block, monkeypatch):
  if block:  # the draws are counted a block at a time: blocks of a few draws, many blocks
    monkeypatch.setattr(pretraining_instances, "_BLOCK", block)
  cases = random.Random(5)
  lengths = [(a, b, m) for a in (0, 1, 2, 3, 7) for b in (0, 1, 2, 3, 8) for m in (1, 2, 5)]
  lengths += [(cases.randint(0, 400), cases.randint(0, 400), cases.randint(1, 300))
              for _ in range(1000)]
  lengths += [(30_000, 3, 125), (4, 20_001, 125), (10_000, 10_001, 61), (10_001, 10_000, 509)]
  for a, b, m in lengths:
    seed = cases.randint(0, 2 ** 32)
    want_a, want_b = list(range(a)), list(range(-b, 0))
    want_rng = random.Random(seed)
    _original_truncate(want_a, want_b, m, want_rng)
    got_a, got_b = list(range(a)), list(range(-b, 0))
    got_rng = random.Random(seed)
    pretraining_instances.truncate_seq_pair(got_a, got_b, m, got_rng)
    assert (got_a, got_b) == (want_a, want_b), (a, b, m)
    assert got_rng.getstate() == want_rng.getstate(), (a, b, m)


def _documents_with_long_lines(tokenizer):
  """The fixture corpus, plus lines of hundreds to thousands of tokens: inside documents,
  as a document of their own, and one document that is a single enormous line."""
  documents = pretraining_data.read_documents([CORPUS], tokenizer)
  words = [t for d in documents for s in d for t in s]
  rng = random.Random(3)

  def line(n):
    start = rng.randint(0, len(words) - n)
    return words[start:start + n]

  documents[3].insert(2, line(900))
  documents[10].append(line(300))
  documents[20][0] = line(2500)
  documents.append([line(5000)])
  documents.append([line(40), line(1200), line(7)])
  return documents


@pytest.mark.parametrize("max_seq_length,short_seq_prob,seed", [(128, 0.1, 12345), (64, 0.5, 7),
                                                                (20, 0.2, 99)])
def test_long_lines_give_the_original_algorithms_instances(tokenizer, max_seq_length,
                                                           short_seq_prob, seed):
  documents = _documents_with_long_lines(tokenizer)
  vocab_words = list(tokenizer.vocab.keys())
  want_rng = random.Random(seed)
  want = _original_instances(documents, vocab_words, max_seq_length, 3, short_seq_prob, 0.15, 20,
                             want_rng)
  got_rng = pretraining_data.new_rng(seed)
  got = pretraining_data.create_training_instances(
      None, tokenizer, max_seq_length, 3, short_seq_prob, 0.15, 20, got_rng,
      documents=[[list(s) for s in d] for d in documents])
  assert len(got) == len(want) > 100
  assert _as_tuples(got) == want
  assert got_rng.getstate() == want_rng.getstate()


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_a_long_line_tokenized_in_pieces_equals_the_whole_line(do_lower_case, tmp_path,
                                                               monkeypatch):
  monkeypatch.setattr(corpus, "_PIECE_CHARS", 1000)  # pieces of 64K chars: same code
  tokenizer = tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case=do_lower_case)
  text = " ".join(open(CORPUS, encoding="utf-8").read().split())
  parts = [text[:5000], "中文字符" * 1000,  # ideographs without spaces: cut before one
           "ひらがなカタカナ" * 500,  # no cut point for 4000 characters
           "\tCafé\u3000ﬁne\u200bzero  x\x1cy\x1dz Ünïcödé " * 100, text[-3000:]]
  line = "".join(parts)
  pieces = list(corpus._tokenize_in_pieces(tokenizer, line))
  assert len(pieces) > 12 and sum(chars for _, chars in pieces) == len(line)
  assert max(chars for _, chars in pieces) > 4000
  assert [t for tokens, _ in pieces for t in tokens] == tokenizer.tokenize(line)
  path = tmp_path / "one_line.txt"
  path.write_text("Short line.\n" + line + "\n\nLast one.\n", encoding="utf-8")
  documents = pretraining_data.read_documents([str(path)], tokenizer,
                                              progress_description="reading")
  assert documents == [[tokenizer.tokenize("Short line."), tokenizer.tokenize(line)],
                       [tokenizer.tokenize("Last one.")]]
  assert pretraining_data.has_text(str(path), tokenizer)


def _tokens_of(tokenizer, text):
  return len(tokenizer.tokenize(text))


def test_lines_far_longer_than_an_instance_are_warned_about(tokenizer, tmp_path, caplog):
  words = " ".join(open(CORPUS, encoding="utf-8").read().split()).split(" ")
  long_line = " ".join(words[:400])
  a_bit_long = " ".join(words[400:460])  # over 61 tokens, under twice that: no warning
  assert 61 < _tokens_of(tokenizer, a_bit_long) <= 122 < _tokens_of(tokenizer, long_line)
  path = tmp_path / "corpus.txt"
  path.write_text("A sentence.\n%s\n\n%s\nEnd.\n" % (a_bit_long, long_line), encoding="utf-8")
  n = _tokens_of(tokenizer, long_line)
  with caplog.at_level("WARNING", logger="bert_tf.tasks.pretraining.corpus"):
    pretraining_data.read_documents([str(path)], tokenizer, max_seq_length=64)
  assert [r.getMessage() for r in caplog.records] == [
      "%s line 4 has %d tokens, far more than an instance can use (at most 60 at "
      "--max_seq_length=64): at least %d of them are dropped each time the line is used. The "
      "input should hold one sentence per line (are line breaks missing?)" % (path, n, n - 60)]
  caplog.clear()
  with caplog.at_level("WARNING", logger="bert_tf.tasks.pretraining.corpus"):
    pretraining_data.read_documents([str(path)], tokenizer)  # no max_seq_length: no check
    pretraining_data.read_documents([str(path)], tokenizer, max_seq_length=512)
  assert not caplog.records
  # Many such lines: ten are named, then one summary.
  many = tmp_path / "many.txt"
  many.write_text((long_line + "\n") * 13, encoding="utf-8")
  with caplog.at_level("WARNING", logger="bert_tf.tasks.pretraining.corpus"):
    pretraining_data.read_documents([str(many)], tokenizer, max_seq_length=64)
  messages = [r.getMessage() for r in caplog.records]
  assert len(messages) == 11
  assert messages[9].startswith("%s line 10 has %d tokens" % (many, n))
  assert messages[10] == ("13 lines in all are far longer than an instance can use at "
                          "--max_seq_length=64 (3 more than shown above); at least %d of their "
                          "tokens are dropped each time they are used" % (13 * (n - 60)))


def test_a_2mb_line_without_line_breaks(tokenizer, tmp_path, caplog):
  """Quadratic before (about half a minute per dupe pass); now linear."""
  words = " ".join(open(CORPUS, encoding="utf-8").read().split())
  text = (words + " ") * (2_000_000 // len(words) + 1)
  path = tmp_path / "no_breaks.txt"
  path.write_text(text[:2_000_000], encoding="utf-8")
  with caplog.at_level("WARNING", logger="bert_tf.tasks.pretraining.corpus"):
    documents = pretraining_data.read_documents([str(path)], tokenizer, max_seq_length=128)
  n = len(documents[0][0])
  assert len(documents) == 1 and len(documents[0]) == 1 and n > 400_000
  assert [r.getMessage().split(",")[0] for r in caplog.records] == [
      "%s line 1 has %d tokens" % (path, n)]
  line = documents[0][0]
  instances = pretraining_data.create_training_instances(
      None, tokenizer, 128, 3, 0.0, 0.15, 20, pretraining_data.new_rng(1), documents=documents)
  # One instance per pass: a and b are windows of the line (the "random" next is the line
  # itself, the only document), truncated together to 125 tokens.
  assert len(instances) == 3
  for instance in instances:
    assert len(instance.tokens) == 128
    original = list(instance.tokens)
    for position, label in zip(instance.masked_lm_positions, instance.masked_lm_labels):
      original[position] = label
    sep = original.index("[SEP]")
    for window in (original[1:sep], original[sep + 1:-1]):
      assert window and " %s " % " ".join(window) in " %s " % " ".join(line)


# --- Masking procedures (paper appendix C.2, Table 8) ---------------------------------------

def test_default_masking_draws_exactly_as_the_original():
  assert pretraining_instances.replacement_thresholds(0.8, 0.1) == (0.8, 0.5)
  vocab = ["[PAD]", "[MASK]", "w1", "w2", "w3", "w4"]
  cases = random.Random(11)
  for _ in range(300):
    tokens = ["[CLS]"] + ["t%d" % i for i in range(cases.randint(1, 60))] + ["[SEP]"]
    seed = cases.randint(0, 2 ** 32)
    want_rng = random.Random(seed)
    want = _original_masking(tokens, 0.15, 20, vocab, want_rng)
    for options in ({}, {"mask_token_prob": 0.8, "random_token_prob": 0.1}):
      got_rng = random.Random(seed)
      got = pretraining_instances.create_masked_lm_predictions(tokens, 0.15, 20, vocab,
                                                               got_rng, **options)
      assert got == want
      assert got_rng.getstate() == want_rng.getstate()


TABLE_8 = [(0.8, 0.1), (1.0, 0.0), (0.8, 0.0), (0.8, 0.2), (0.0, 0.8), (0.0, 1.0)]  # MASK, RND


@pytest.mark.parametrize("mask,random_token", TABLE_8)
def test_masking_shares_of_each_table_8_row(mask, random_token):
  """[MASK] / kept / random word in the shares asked for; a share of 0 never happens."""
  rng = random.Random(0)
  vocab = ["[PAD]", "w1", "w2", "w3"]  # neither [MASK] nor any token of the text
  tokens = ["[CLS]"] + ["tok%d" % i for i in range(200)] + ["[SEP]"]
  counts = {"mask": 0, "kept": 0, "random": 0}
  for _ in range(200):
    out, positions, labels = pretraining_instances.create_masked_lm_predictions(
        tokens, 0.15, 1000, vocab, rng, mask_token_prob=mask, random_token_prob=random_token)
    assert len(positions) == 30 and [tokens[p] for p in positions] == labels
    assert [p for p, t in enumerate(out) if t != tokens[p]] == [
        p for p in positions if out[p] != tokens[p]]  # only predicted positions change
    for p, label in zip(positions, labels):
      key = "mask" if out[p] == "[MASK]" else "kept" if out[p] == label else "random"
      assert key != "random" or out[p] in vocab
      counts[key] += 1
  total = sum(counts.values())
  keep = 1 - mask - random_token
  for key, share in (("mask", mask), ("kept", keep), ("random", random_token)):
    if min(abs(share), abs(1 - share)) < 1e-9:  # 0 or 1 (1 - 0.8 - 0.2 is -5.6e-17)
      assert counts[key] == round(share) * total, (key, counts)
    else:
      assert abs(counts[key] / total - share) < 0.02, (key, counts)


def test_masking_settings_in_the_records(tokenizer):
  """On the fixture corpus: 100/0/0 leaves [MASK] at every predicted position, 80/20/0 never
  a random word, 0/0/100 (almost) never [MASK] or the token itself (the random word is drawn
  from the whole vocab, [MASK] included)."""
  counts = {}
  for mask, random_token in ((1.0, 0.0), (0.8, 0.0), (0.0, 1.0)):
    instances = pretraining_data.create_training_instances(
        [CORPUS], tokenizer, 128, 1, 0.1, 0.15, 20, pretraining_data.new_rng(12345),
        mask_token_prob=mask, random_token_prob=random_token)
    kinds = collections.Counter()
    for instance in instances:
      for p, label in zip(instance.masked_lm_positions, instance.masked_lm_labels):
        token = instance.tokens[p]
        kinds["mask" if token == "[MASK]" else "kept" if token == label else "random"] += 1
    counts[mask, random_token] = kinds
  assert set(counts[1.0, 0.0]) == {"mask"} and counts[1.0, 0.0]["mask"] > 2500
  assert set(counts[0.8, 0.0]) == {"mask", "kept"}
  assert abs(counts[0.8, 0.0]["mask"] / sum(counts[0.8, 0.0].values()) - 0.8) < 0.03
  rnd = counts[0.0, 1.0]
  assert rnd["random"] > 2500 and rnd["mask"] + rnd["kept"] <= 3  # about 1 in 30,522 each


class _FlagValues:
  """The attribute and item access of absl's FlagValues, for data_flags.check."""

  def __init__(self, **overrides):
    self.__dict__.update(input_file="in.txt", output_file="out.tfrecord", vocab_file="v.txt",
                         max_seq_length=128, max_predictions_per_seq=20, dupe_factor=1,
                         masked_lm_prob=0.15, short_seq_prob=0.1, mask_token_prob=0.8,
                         random_token_prob=0.1)
    self.__dict__.update(overrides)

  def __getitem__(self, name):
    return types.SimpleNamespace(value=getattr(self, name))


def test_masking_flags_are_checked():
  for mask, random_token in TABLE_8 + [(0.7, 0.3), (0.35, 0.65), (0.1, 0.9)]:
    data_flags.check(_FlagValues(mask_token_prob=mask,
                                                 random_token_prob=random_token))
    pretraining_instances.replacement_thresholds(mask, random_token)
  for mask, random_token in ((0.9, 0.2), (1.1, 0.0), (0.5, -0.1), (float("nan"), 0.1)):
    with pytest.raises(UserInputError) as error:
      data_flags.check(_FlagValues(mask_token_prob=mask,
                                                   random_token_prob=random_token))
    assert str(error.value) == (
        "--mask_token_prob=%s and --random_token_prob=%s must each be in [0, 1] and sum to at "
        "most 1 (the rest of the predicted tokens keep their token)." % (mask, random_token))
    with pytest.raises(ValueError):
      pretraining_instances.replacement_thresholds(mask, random_token)


@pytest.mark.slow
def test_command_line_table_8_row_and_bad_shares(tokenizer, tmp_path):
  out = tmp_path / "a.tfrecord"
  common = ["--input_file=%s" % CORPUS, "--output_file=%s" % out,
            "--vocab_file=%s" % VOCAB_UNCASED, "--max_seq_length=128",
            "--max_predictions_per_seq=20", "--dupe_factor=2", "--random_seed=12345"]
  result = run_script("create_pretraining_data.py", *common, "--mask_token_prob=0.8",
                      "--random_token_prob=0.0")
  assert result.returncode == 0, result.stderr
  instances = pretraining_data.create_training_instances(
      [CORPUS], tokenizer, 128, 2, 0.1, 0.15, 20, pretraining_data.new_rng(12345),
      mask_token_prob=0.8, random_token_prob=0.0)
  want = tmp_path / "want.tfrecord"
  pretraining_data.write_instance_to_example_files(instances, tokenizer, 128, 20, [str(want)])
  records = _parsed(out)
  assert records == _parsed(want) and records != _parsed(DATA / "a_seq128.tfrecord")
  result = run_script("create_pretraining_data.py", *common, "--mask_token_prob=0.9",
                      "--random_token_prob=0.2")
  assert result.returncode == 2
  assert [l for l in result.stderr.splitlines() if l.startswith("error: ")] == [
      "error: --mask_token_prob=0.9 and --random_token_prob=0.2 must each be in [0, 1] and sum "
      "to at most 1 (the rest of the predicted tokens keep their token)."]


@pytest.mark.slow
def test_command_line_on_a_file_without_line_breaks(tmp_path):
  words = " ".join(open(CORPUS, encoding="utf-8").read().split())
  path = tmp_path / "no_breaks.txt"
  path.write_text(((words + " ") * 40)[:2_000_000], encoding="utf-8")
  out = tmp_path / "a.tfrecord"
  result = run_script("create_pretraining_data.py", "--input_file=%s" % path,
                      "--output_file=%s" % out, "--vocab_file=%s" % VOCAB_UNCASED,
                      "--dupe_factor=4")
  assert result.returncode == 0, result.stderr
  assert "%s line 1 has " % path in result.stderr
  assert "far more than an instance can use (at most 124 at --max_seq_length=128)" in (
      result.stderr)
  assert "creating instances: 4/4 documents" in result.stderr
  assert "writing: 4/4 records" in result.stderr
  assert len(_parsed(out)) == 4


def test_a_long_line_of_one_non_ascii_word(tokenizer, tmp_path):
  """Kana without spaces or punctuation is one word: the original's [UNK] (over 200
  characters). Splitting it at punctuation took time quadratic in its length (19 s for
  400K characters); now linear."""
  path = tmp_path / "kana.txt"
  path.write_text("ひらがなカタカナ" * 50_000 + "\n" + "ひらがな、カタカナ。" * 40_000 + "\n",
                  encoding="utf-8")
  documents = pretraining_data.read_documents([str(path)], tokenizer)
  assert documents[0][0] == ["[UNK]"]
  assert documents[0][1] == tokenizer.tokenize("ひらがな、カタカナ。") * 40_000
