"""run_ner.py and the NER task package: windows worked by hand, labels and schemes, the
prediction files, both approaches end to end, the feature cache, the export and the HF
conversion of a run_ner checkpoint."""

from functools import partial
import json
import os
import re

import numpy as np
import pytest

from bert_tf import tokenization
from bert_tf.tasks import ner
from helpers import PROGRAMS, ROOT, TINY, VOCAB_UNCASED, printed_json, run_script

SAMPLE = os.path.join(ROOT, "data", "conll_sample")


def small_vocab(tmp_path, tokens):
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + tokens) + "\n")
  return tokenization.FullTokenizer(str(path), do_lower_case=True)


# ------------------------------------------------------------------------------ windows

def test_first_piece_labels_and_windows_by_hand(tmp_path):
  tokenizer = small_vocab(tmp_path, ["john", "lives", "un", "##aff", "##able"])
  # Pieces: john lives un ##aff ##able; windows of 4 pieces, stride 2: [0, 4) and [2, 5).
  features = ner.convert_document(0, ["John", "lives", "unaffable"], [1, 0, 3], tokenizer,
                                  max_seq_length=6, doc_stride=2)
  assert len(features) == 2
  first, second = features
  assert first.input_ids == [2, 4, 5, 6, 7, 3]  # [CLS] john lives un ##aff [SEP]
  assert first.word_at == [-1, 0, 1, 2, -1, -1]
  assert first.label_ids == [0, 1, 0, 3, 0, 0]
  assert first.label_weights == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]
  assert second.input_ids == [2, 6, 7, 8, 3, 0]  # [CLS] un ##aff ##able [SEP] pad
  assert second.input_mask == [1, 1, 1, 1, 1, 0]
  assert second.word_at == [-1, 2, -1, -1, -1, -1]
  # "un": window 1 leaves it 2 pieces left, 1 right (1 + 0.04); window 2 none left (0.03).
  assert first.is_max_context[3] and not second.is_max_context[1]


def test_word_predictions_take_each_word_from_its_max_context_window(tmp_path):
  tokenizer = small_vocab(tmp_path, list("abcdef"))
  features = ner.convert_document(0, list("abcdef"), None, tokenizer, 6, 2)
  assert [f.word_at for f in features] == [[-1, 0, 1, 2, 3, -1], [-1, 2, 3, 4, 5, -1]]
  # Word 2 ("c"): 2 left, 1 right in window 1 (1.04) against 0 left in window 2 (0.04);
  # word 3 ("d"): 3 left, 0 right (0.04) against 1 left, 2 right (1.04).
  scores = [np.full((6, 1), 10.0 * (i + 1)) for i in range(2)]
  rows = ner.word_predictions(features, scores, {0: 6})[0]
  assert [float(r[0]) for r in rows] == [10, 10, 10, 20, 20, 20]


def test_sample_data_labels_and_scheme():
  documents = ner.read_conll(ner.split_file(SAMPLE, "train"))
  assert ner.detect_scheme(documents) == "iob1"  # like the original CoNLL-2003 files
  assert ner.label_list(documents) == ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG",
                                       "I-ORG", "B-PER", "I-PER"]
  assert sum(len(d.sentences) for d in documents) == 400
  for split, count in (("dev", 100), ("test", 100)):
    assert sum(len(d.sentences) for d in ner.read_conll(ner.split_file(SAMPLE, split))) == count


def test_sample_data_is_rewritten_byte_for_byte(tmp_path):
  result = run_script("data/make_sample_data.py", "--out_dir=%s" % tmp_path)
  assert result.returncode == 0, result.stderr
  for name in ("train.txt", "dev.txt", "test.txt"):
    with open(os.path.join(SAMPLE, name), "rb") as a, open(tmp_path / "conll_sample" / name,
                                                           "rb") as b:
      assert a.read() == b.read(), name


def test_sentence_predictions_are_written_back_in_the_files_scheme():
  sentence = ner.Sentence(["Ann", "Lee", "Bob", "in", "Rome"],
                          ["I-PER", "I-PER", "B-PER", "O", "I-LOC"])
  labels = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
  one_hot = np.eye(5)[[3, 4, 3, 0, 1]]  # B-PER I-PER B-PER O B-LOC
  (words, gold, predicted), = ner.sentence_predictions([ner.Document([sentence])],
                                                       {0: one_hot}, labels, "iob1")
  assert predicted == ["I-PER", "I-PER", "B-PER", "O", "I-LOC"] == gold
  assert ner.scores_of([(words, gold, predicted)])["f1"] == 1.0
  # In IOB2, a chunk the model opens with I- is written B- (conlleval scores both alike).
  one_hot = np.eye(5)[[4, 4, 3, 0, 2]]  # I-PER I-PER B-PER O I-LOC
  (_, _, predicted), = ner.sentence_predictions([ner.Document([sentence])], {0: one_hot},
                                                labels, "iob2")
  assert predicted == ["B-PER", "I-PER", "B-PER", "O", "B-LOC"]


# ------------------------------------------------------------------------------ runs

def slice_data(folder, documents=4):
  """The first `documents` documents of each sample file, in a folder of their own."""
  folder.mkdir()
  for name in ("train.txt", "dev.txt", "test.txt"):
    with open(os.path.join(SAMPLE, name), encoding="utf-8") as f:
      parts = f.read().split("-DOCSTART-")[1:documents + 1]
    (folder / name).write_text("".join("-DOCSTART-" + p for p in parts))
  return folder


def ner_args(data_dir, output_dir, *extra):
  return ["--data_dir=%s" % data_dir, "--vocab_file=%s" % VOCAB_UNCASED,
          "--bert_config_file=%s" % TINY.config, "--init_checkpoint=%s" % TINY.ckpt,
          "--do_lower_case=true", "--max_seq_length=32", "--doc_stride=16",
          "--train_batch_size=4", "--learning_rate=1e-3", "--output_dir=%s" % output_dir,
          *extra]


def read_results(path):
  return {k: float(v) for k, v in (line.split(" = ") for line in
                                   path.read_text().splitlines())}


def read_prediction_file(path):
  sentences, current = [], []
  for line in path.read_text().splitlines():
    if line:
      current.append(line.split(" "))
    else:
      sentences.append(current)
      current = []
  assert not current, "the file must end with a blank line"
  return sentences


def check_prediction_file(path, data_file, labels):
  """`word gold predicted` per word of the data file, its tags as gold, predictions in IOB1."""
  written = read_prediction_file(path)
  expected = [s for d in ner.read_conll(data_file) for s in d.sentences]
  assert [[w for w, _, _ in s] for s in written] == [s.words for s in expected]
  assert [[g for _, g, _ in s] for s in written] == [s.tags for s in expected]
  iob1 = {label.replace("B-", "I-") for label in labels} | set(labels)
  for sentence in written:
    predicted = [p for _, _, p in sentence]
    assert set(predicted) <= iob1
    assert ner.from_iob2(ner.to_iob2(predicted), "iob1") == predicted  # already IOB1
  return written


@pytest.mark.slow
def test_fine_tuning_end_to_end_with_resume_and_export(tmp_path, script_session):
  run_ner = partial(run_script, "run_ner.py", shared=script_session)
  data = slice_data(tmp_path / "data")
  out = tmp_path / "out"
  export_dir = tmp_path / "export"
  result = run_ner(*ner_args(data, out, "--do_train", "--do_eval", "--do_predict",
                             "--num_train_epochs=2", "--export_dir=%s" % export_dir))
  assert result.returncode == 0, result.stderr[-3000:]
  labels = json.loads((out / "ner_labels.json").read_text())
  assert labels == {"labels": ner.label_list(ner.read_conll(str(data / "train.txt"))),
                    "tag_scheme": "iob1"}
  results = read_results(out / "eval_results.txt")
  written = check_prediction_file(out / "eval_predictions.txt", str(data / "dev.txt"),
                                  labels["labels"])
  rescored = ner.conlleval([([g for _, g, _ in s], [p for _, _, p in s]) for s in written])
  for key, value in rescored.items():
    assert results[key] == pytest.approx(value), key
  assert {"eval_loss", "eval_token_accuracy", "PER_f1", "LOC_precision"} <= set(results)
  check_prediction_file(out / "test_predictions.txt", str(data / "test.txt"), labels["labels"])
  first_steps = results["global_step"]

  # Resume: more epochs continue from the saved state.
  result = run_ner(*ner_args(data, out, "--do_train", "--do_eval", "--num_train_epochs=3"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Resumed from" in result.stderr
  assert read_results(out / "eval_results.txt")["global_step"] > first_steps

  # Predict only: the labels come from --output_dir.
  (out / "test_predictions.txt").unlink()
  result = run_ner(*ner_args(data, out, "--do_predict"))
  assert result.returncode == 0, result.stderr[-3000:]
  check_prediction_file(out / "test_predictions.txt", str(data / "test.txt"), labels["labels"])

  # The export, loaded with TensorFlow and tensorflow_text only.
  texts = ["Anna Fairley visited Ashford and Bramwick on Monday .",
           "Shares of Lumoline fell , Hugo Kellson said.", "", "x " * 40 + "end"]
  got = printed_json(run_script(PROGRAMS + "serve_ner.py", json.dumps({"texts": texts}),
                                export_dir, isolated=True, cwd=tmp_path, timeout=120))
  out_ = got["out"]
  assert got["logits"] == [1, 3, len(labels["labels"])]
  assert all(shape[0] == 0 for shape in got["empty"].values())
  assert len(out_["entity_count"]) == len(texts)
  types = {label[2:] for label in labels["labels"] if label != "O"}
  for row, text in enumerate(texts):
    count = out_["entity_count"][row]
    raw = text.encode("utf-8")
    for i in range(count):
      start, end = out_["entity_starts"][row][i], out_["entity_ends"][row][i]
      assert 0 <= start < end <= len(raw)
      assert raw[start:end].decode("utf-8") == out_["entity_texts"][row][i]
      assert out_["entity_types"][row][i] in types
      assert 0.0 < out_["entity_scores"][row][i] <= 1.0
    assert all(t == "" for t in out_["entity_texts"][row][count:])
  assert out_["entity_count"][2] == 0

  # The checkpoint converts to an HF BertForTokenClassification folder.
  result = run_script("convert_checkpoint.py", "--input=%s" % out, "--to=hf",
                      "--output_dir=%s" % (tmp_path / "hf"), "--bert_config_file=%s" % TINY.config,
                      "--vocab_file=%s" % VOCAB_UNCASED, "--do_lower_case=true")
  assert result.returncode == 0, result.stderr[-3000:]
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert config["architectures"] == ["BertForTokenClassification"]
  assert len(config["id2label"]) == len(labels["labels"])


def test_export_tags_windows_like_the_python_path(tmp_path):
  """The in-graph windows and max-context rule give the tags of features.word_predictions."""
  import keras
  import tensorflow as tf

  from bert_tf import checkpoints
  from bert_tf.config import BertConfig
  from bert_tf.tasks.ner.export import export_ner
  keras.utils.set_random_seed(1)
  labels = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
  model = ner.TokenClassifierModel(BertConfig.from_json_file(TINY.config), num_labels=5)
  checkpoints.load_checkpoint(TINY.ckpt, model.encoder)
  kernel = model.ner.weights[0]
  kernel.assign(np.random.RandomState(0).normal(0, 3, kernel.shape).astype(np.float32))
  export_ner(tmp_path / "export", model, VOCAB_UNCASED, True, 16, labels, stride=4)
  serve = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
  texts = ["Anna Smith visited Paris, then Berlin.",
           "a b c d e f g h i j k l m n o p q r s t u v w x y z, said Zoe Wickham in Ashford."]
  out = serve(text=tf.constant(texts))
  tokenizer = tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case=True)
  for row, text in enumerate(texts):
    words = tokenizer.basic_tokenizer.tokenize(text)
    features = ner.convert_document(0, words, None, tokenizer, 16, 4)
    logits = model({name: tf.constant([getattr(f, field) for f in features]) for name, field in
                    (("input_word_ids", "input_ids"), ("input_mask", "input_mask"),
                     ("input_type_ids", "segment_ids"))}).numpy()
    tags = [labels[int(np.argmax(r))] for r in ner.word_predictions(features, logits,
                                                                     {0: len(words)})[0]]
    expected, previous = [], "O"
    spans = [(m.start(), m.end()) for m in re.finditer(r"\w+|[^\w\s]", text)]
    assert len(spans) == len(words)
    for (start, end), tag in zip(spans, tags):
      opens = tag != "O" and (tag.startswith("B-") or previous[2:] != tag[2:])
      if opens:
        expected.append([start, end, tag[2:]])
      elif tag != "O":
        expected[-1][1] = end
      previous = tag
    count = int(out["entity_count"][row])
    got = [[int(out["entity_starts"][row][i]), int(out["entity_ends"][row][i]),
            out["entity_types"][row][i].numpy().decode()] for i in range(count)]
    assert got == expected
    assert len(expected) > 1  # the random head tags several chunks


@pytest.mark.slow
def test_feature_based_caches_bert_features(tmp_path, script_session):
  run_ner = partial(run_script, "run_ner.py", shared=script_session)
  data = slice_data(tmp_path / "data")
  out = tmp_path / "out"
  common = ner_args(data, out, "--do_train", "--do_eval", "--approach=feature_based",
                    "--num_train_epochs=1", "--lstm_units=8")
  result = run_ner(*common, "--features=weighted_sum_all")
  assert result.returncode == 0, result.stderr[-3000:]
  assert "BERT features of train: computing layers [1, 2]" in result.stderr
  assert "cache hit" not in result.stderr
  results = read_results(out / "eval_results.txt")
  assert {"f1", "precision", "recall", "eval_loss", "eval_token_accuracy"} <= set(results)
  check_prediction_file(out / "eval_predictions.txt", str(data / "dev.txt"),
                        json.loads((out / "feature_based_weighted_sum_all.json").read_text())
                        ["labels"])
  # Another mode reading a cached layer computes nothing.
  result = run_ner(*common, "--features=last_hidden")
  assert result.returncode == 0, result.stderr[-3000:]
  assert re.search(r"BERT features of train: cache hit \(layers \[2\]", result.stderr)
  assert re.search(r"BERT features of eval: cache hit \(layers \[2\]", result.stderr)
  assert "computing layers" not in result.stderr
  # Evaluation alone reads the saved BiLSTM; --tag_scheme=iob2 writes IOB2 predictions.
  result = run_ner(*ner_args(data, out, "--do_eval", "--approach=feature_based",
                             "--features=last_hidden", "--lstm_units=8", "--tag_scheme=iob2"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Training the BiLSTM" not in result.stderr
  for sentence in read_prediction_file(out / "eval_predictions.txt"):
    predicted = [p for _, _, p in sentence]
    assert ner.to_iob2(predicted) == predicted  # every chunk opens with B-

  # The cached arrays are those a fresh forward pass gives.
  from bert_tf import checkpoints
  from bert_tf.config import BertConfig
  from bert_tf.modeling import BertModel
  from bert_tf.tasks.ner import feature_cache
  encoder = BertModel(BertConfig.from_json_file(TINY.config))
  checkpoints.load_checkpoint(TINY.ckpt, encoder)
  tokenizer = tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case=True)
  fresh = feature_cache.compute_word_features(
      encoder, ner.read_conll(str(data / "train.txt")), tokenizer, 32, 16, [0, 1, 2])
  (cached_train,) = [p for p in (out / "bert_features").glob("*/train_layer2.npy")]
  np.testing.assert_allclose(np.load(cached_train), fresh[2], atol=1e-5)
  assert not list(cached_train.parent.glob("train_layer0.npy"))  # only layers some mode read
  assert fresh[0].shape == (sum(len(d.words) for d in ner.read_conll(str(data / "train.txt"))),
                            32)


_BAD_INPUTS = [
    ("missing_test", ["--do_predict", "--labels=O,B-PER,I-PER"], r"No test file in --data_dir"),
    ("features", ["--do_train", "--features=last_hidden"],
     r"--features=last_hidden is for --approach=feature_based"),
    ("labels", ["--do_eval", "--labels=O,B-PER,I-PER"],
     r"dev.txt line \d+: tag I-\w+ .* is not among the labels O,B-PER,I-PER"),
    ("bad_labels", ["--do_train", "--labels=PER,LOC"], r"--labels must list distinct IOB2 labels"),
    ("no_labels", ["--do_predict"], r"No --labels and no ner_labels.json in --output_dir"),
]


@pytest.fixture(scope="module")
def bad_input_runs(tmp_path_factory, script_session):
  """run_ner given each case of _BAD_INPUTS, in a folder of its own (data, output), one command
  line after another in the module's run_ner process: case -> result."""
  commands = []
  for case, extra, _ in _BAD_INPUTS:
    folder = tmp_path_factory.mktemp(case)
    data = slice_data(folder / "data", documents=2)
    if case == "missing_test":
      (data / "test.txt").unlink()
    commands.append(ner_args(data, folder / "out", *extra))
  results = [run_script("run_ner.py", *command, shared=script_session) for command in commands]
  return {case: result for (case, _, _), result in zip(_BAD_INPUTS, results)}


@pytest.mark.slow
@pytest.mark.parametrize("case, extra, message", _BAD_INPUTS)
def test_bad_inputs_are_one_line_errors(bad_input_runs, case, extra, message):
  result = bad_input_runs[case]
  assert result.returncode != 0
  assert "Traceback" not in result.stderr
  assert re.search(message, result.stderr), result.stderr[-2000:]
