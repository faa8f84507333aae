"""run_classifier --long_document=windows: the windows (Python and in-graph), the pooling, and
one run through the real command line (records, metrics, predictions, export, resume)."""

import hashlib
import json
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.data import example_codec, input_pipeline, packing
from bert_tf.runner.run_lock import LOCK_NAME
from bert_tf.tasks import glue
from bert_tf.tasks.glue import export as glue_export
from bert_tf.tasks.glue import model as glue_model
from bert_tf.tasks.glue import windows
from helpers import (
  FIXTURES,
  PROGRAMS,
  TINY,
  VOCAB_UNCASED,
  assert_float32_close,
  printed_json,
  run_script,
  tiny_config,
)

LETTERS = "a b c d e f g h i j"  # ten words, each one piece of the uncased vocab


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.FullTokenizer(VOCAB_UNCASED, True)


@pytest.fixture(scope="module")
def graph_tokenizer():
  from bert_tf.text import BertTextTokenizer
  return BertTextTokenizer(VOCAB_UNCASED, True)


def _windows(tokenizer, text_a, text_b, seq, stride, label="1"):
  example = glue.InputExample("x", text_a, text_b, label)
  return windows.example_windows(example, ["0", "1"], seq, tokenizer, stride)


def _pieces(tokenizer, features):
  """Each window's tokens up to the padding."""
  return [tokenizer.convert_ids_to_tokens(ids[:sum(mask)]) for ids, mask, *_ in features]


def test_windows_hand_worked(tokenizer):
  a = LETTERS.split()
  # Single text, 8 = [CLS] + 6 + [SEP]: windows of 6 pieces, 4 apart (doc_spans_for's rule).
  assert packing.doc_spans_for(10, 6, 4) == [(0, 6), (4, 6)]
  assert _pieces(tokenizer, _windows(tokenizer, LETTERS, None, 8, 4)) == [
      ["[CLS]"] + a[0:6] + ["[SEP]"], ["[CLS]"] + a[4:10] + ["[SEP]"]]
  # Pair, 10: room 7; b (3 pieces) leaves a 4 a window; stride 3 -> starts 0, 3, 6.
  pair = _windows(tokenizer, LETTERS, "x y z", 10, 3, label="0")
  b = ["x", "y", "z", "[SEP]"]
  assert _pieces(tokenizer, pair) == [["[CLS]"] + a[s:s + 4] + ["[SEP]"] + b for s in (0, 3, 6)]
  assert [f[2][:9] for f in pair] == [[0] * 6 + [1] * 3] * 3  # segment ids
  assert {(f[3], f[4]) for f in pair} == {(0, 1)}  # the example's label, real
  # A long b is cut to what leaves a half the room (4 of 7), at its end.
  long_b = _windows(tokenizer, LETTERS, "s t u v w x y z", 10, 4)
  cut_b = ["[SEP]", "s", "t", "u", "[SEP]"]
  assert _pieces(tokenizer, long_b) == [["[CLS]"] + a[0:4] + cut_b, ["[CLS]"] + a[4:8] + cut_b,
                                        ["[CLS]"] + a[8:10] + cut_b]  # the last one shorter
  # A short a keeps all of itself and b takes the rest: one window, as truncation gives.
  assert windows.window_room(2, 8, 10) == (2, 5)
  # What fits is one window, the record truncate writes; an empty text_a is one window too.
  for text_a, text_b, seq in ((LETTERS, None, 12), (LETTERS, "x y z", 16), ("", "x y", 8),
                              ("", None, 8), ("a b", "s t u v w x y z", 10)):
    (features,) = _windows(tokenizer, text_a, text_b, seq, 2)
    assert features == glue.convert_single_example(
        0, glue.InputExample("x", text_a, text_b, "1"), ["0", "1"], seq, tokenizer)


def test_in_graph_windows_equal_the_runners(tokenizer, graph_tokenizer):
  """export.window_features packs the records run_classifier writes, row after row."""
  graph = graph_tokenizer
  long_text = " ".join("word%d is here, again." % i for i in range(40))
  texts_a = [long_text, "", "Short text .", LETTERS, long_text[:150], "\x00"]
  texts_b = ["", "the other side", "Also short .", "x y z " * 9, long_text[:90], "b"]
  for seq, stride in ((8, 1), (16, 5), (32, 128)):
    for pair in (False, True):
      expected, rows = [], []
      for row, (a, b) in enumerate(zip(texts_a, texts_b)):
        features = _windows(tokenizer, a, b if pair else None, seq, stride)
        expected += [f[:3] for f in features]
        rows += [row] * len(features)
      got, got_rows = glue_export.window_features(
          graph, tf.constant(texts_a), tf.constant(texts_b) if pair else None, seq, stride)
      got = zip(*(got[k].numpy().tolist() for k in ("input_word_ids", "input_mask",
                                                    "input_type_ids")))
      assert [tuple(f) for f in got] == [tuple(f) for f in expected], (seq, stride, pair)
      assert got_rows.numpy().tolist() == rows


def test_pooling_hand_worked():
  logits = np.array([[1.0, 2.0], [3.0, 0.0], [5.0, 5.0], [-1.0, 4.0]], np.float32)
  counts = [2, 1, 1]  # example 0 has two windows
  np.testing.assert_array_equal(windows.pool(logits, counts, "mean"),
                                [[2.0, 1.0], [5.0, 5.0], [-1.0, 4.0]])
  np.testing.assert_array_equal(windows.pool(logits, counts, "max"),
                                [[3.0, 2.0], [5.0, 5.0], [-1.0, 4.0]])
  np.testing.assert_array_equal(windows.pool(np.array([1.0, 3.0, 7.0]), [2, 1], "mean"),
                                [2.0, 7.0])  # regression outputs
  # any: the window least likely to be label 0 gives the example's logits. Example 0: margins
  # (label 1 over 0) +1 and -3 -> window 0; example 1: -2, +0.5, +1 -> its last window.
  topic = np.array([[1.0, 2.0], [3.0, 0.0], [2.0, 0.0], [0.0, 0.5], [1.0, 2.0]], np.float32)
  np.testing.assert_array_equal(windows.pool(topic, [2, 3], "any"), [[1.0, 2.0], [1.0, 2.0]])
  # With label 1 the "no" (a presence label second in order): the window least likely to be
  # label 1 decides. Example 0: margins +1, -3 -> window 1; example 1: -2, +0.5, +1 -> window 0.
  np.testing.assert_array_equal(windows.pool(topic, [2, 3], "any", no_label=1),
                                [[3.0, 0.0], [2.0, 0.0]])
  # Three labels: the lowest p(label 0) is window 1's (log-softmax -4.07 against -2.31).
  three = np.array([[0.0, 2.0, 0.5], [-1.0, 0.0, 3.0]], np.float32)
  np.testing.assert_array_equal(windows.pool(three, [2], "any"), [[-1.0, 0.0, 3.0]])
  # A yes/no topic: yes as soon as one window says yes, which mean and max do not give here.
  article = np.array([[-1.7, 1.5], [2.35, -2.05], [2.35, -2.05]], np.float32)
  assert [np.argmax(windows.pool(article, [3], p)) for p in ("any", "mean", "max")] == [1, 0, 0]
  # Per example: [2, 1] -> label 0 right, loss log(1 + e^-1); [0, 0] -> label 1, log 2.
  metrics = windows.example_metrics(np.array([[2.0, 1.0], [0.0, 0.0]]), np.array([0, 1]), False)
  assert metrics["eval_loss"] == pytest.approx((np.log1p(np.exp(-1.0)) + np.log(2.0)) / 2)
  assert metrics["eval_accuracy"] == 0.5  # a tie goes to label 0, as argmax
  assert windows.example_metrics(np.array([2.0, 7.0]), np.array([1.0, 4.0]), True) == {
      "eval_loss": 5.0}
  assert windows.describe([1, 3, 1, 2]) == (
      "4 examples, 7 windows (2 examples longer than a window gave 5 of them)")


POOLINGS = [("mean", 0), ("max", 0), ("any", 0), ("any", 1)]  # (pooling, the "no" label)


@pytest.mark.parametrize("pooling,no_label", POOLINGS)
def test_in_graph_pooling_is_per_row(pooling, no_label, graph_tokenizer):
  graph = graph_tokenizer
  texts = tf.constant([LETTERS, "a", LETTERS + " " + LETTERS])

  def logits_of(features):  # a window's "logits": its first piece and its length
    ids = tf.cast(features["input_word_ids"], tf.float32)
    return tf.stack([ids[:, 1], tf.reduce_sum(tf.cast(features["input_mask"], tf.float32), 1)],
                    axis=1)

  pooled = glue_export.windowed_logits(
      graph, texts, None, 6, glue.WindowOptions(2, pooling, no_label=no_label),
      logits_of).numpy()
  features, rows = glue_export.window_features(graph, texts, None, 6, 2)
  per_window = logits_of(features).numpy()
  counts = np.bincount(rows.numpy())
  np.testing.assert_allclose(pooled, windows.pool(per_window, counts, pooling, no_label=no_label),
                             rtol=1e-6)
  assert counts.tolist() == [4, 1, 9]


@pytest.mark.parametrize("pooling,no_label", POOLINGS)
def test_training_pooling_equals_the_prediction_pooling(pooling, no_label):
  """model.pool_windows on [documents, windows, labels] with empty windows padding the rest
  gives glue/windows.pool's answer on the real windows alone, whatever the padding holds."""
  rng = np.random.default_rng(7)
  counts = [3, 1, 4, 2]
  real = np.arange(4)[None, :] < np.array(counts)[:, None]
  logits = rng.normal(size=(4, 4, 3)).astype(np.float32) * 3
  padded = np.where(real[..., None], logits, 1e3)  # padding that would win every pooling
  pooled = glue_model.pool_windows(tf.constant(padded), tf.constant(real), pooling,
                                   no_label=no_label).numpy()
  np.testing.assert_allclose(pooled, windows.pool(logits[real], counts, pooling,
                                                  no_label=no_label), rtol=1e-6)


def test_document_features_hand_worked(tokenizer):
  """A training document's record: its first max_windows windows end to end, empty windows
  after its last; the label once."""
  example = glue.InputExample("x", LETTERS, None, "1")
  per_window = windows.example_windows(example, ["0", "1"], 8, tokenizer, 4)
  assert len(per_window) == 2
  for cap in (1, 2, 3):
    features, count = windows.document_features(example, ["0", "1"], 8, tokenizer, 4, cap)
    assert count == 2
    kept = per_window[:cap]
    for part in range(3):
      assert features[part] == [v for w in kept for v in w[part]] + [0] * 8 * (cap - len(kept))
    assert features[3:] == (1, 1)
    parsed = example_codec.parse_example(glue.encode_features(features))
    assert len(parsed["input_ids"]) == 8 * cap
  assert windows.describe([1, 3, 1, 2], 2) == (
      "4 examples, 7 windows (2 examples longer than a window gave 5 of them); 1 documents "
      "have more than 2 windows and train on their first 2")


def test_a_document_batch_is_its_windows_pooled(tokenizer):
  """ClassificationTask training by document: the logits of [documents, windows, seq] are
  the pooled logits of each document's real windows run one by one, and the loss is the
  cross-entropy of those pooled logits, by hand."""
  config = tiny_config()
  texts = [LETTERS + " " + LETTERS, "a b", LETTERS]
  labels = ["1", "0", "0"]
  for pooling in ("mean", "any"):
    options = windows.WindowOptions(4, pooling, "document", 3)
    task = glue.ClassificationTask(config, 2, windows=options, max_seq_length=8)
    model = task.create_model()
    documents, per_window, counts = [], [], []
    for text, label in zip(texts, labels):
      example = glue.InputExample("x", text, None, label)
      documents.append(windows.document_features(example, ["0", "1"], 8, tokenizer, 4, 3)[0])
      kept = windows.example_windows(example, ["0", "1"], 8, tokenizer, 4)[:3]
      per_window += kept
      counts.append(len(kept))
    assert counts == [3, 1, 2]  # the first document cut to 3 of its 5 windows

    def batch(rows):
      names = ("input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example")
      return input_pipeline.to_model_names(
          {n: tf.constant([list(r[i]) if i < 3 else [r[i]] for r in rows], tf.int32)
           for i, n in enumerate(names)})

    document_batch = batch(documents)
    logits = model(task.model_features(document_batch)).numpy()
    one_by_one = model(batch(per_window)).numpy()
    expected = windows.pool(one_by_one, counts, pooling)
    assert_float32_close(logits, expected, ulps=16)
    numerators = task.loss_numerators(model, document_batch, training=False)
    log_p = expected - np.log(np.exp(expected).sum(axis=1, keepdims=True))
    by_hand = -np.sum(log_p[np.arange(3), [1, 0, 0]])
    assert float(numerators["classification"]) == pytest.approx(by_hand, rel=1e-5)


def test_empty_text_a_beside_a_long_text_b_answers_as_the_runner(tokenizer, graph_tokenizer):
  """Issue 38 case 12: a text_a with no pieces (empty, or control characters only) beside a
  text_b that fills the room left text_a 0 pieces a window and the export's windows divided by
  zero, failing the whole batch; run_classifier packs such a row as one window
  `[CLS] [SEP] b [SEP]`. The export answers it, and the normal row beside it, as the runner."""
  long_b = " ".join(["word"] * 30)
  texts_a = [LETTERS, "", "\x07\u200b", "a b"]
  texts_b = ["x y z", long_b, long_b, long_b]
  assert tokenizer.tokenize(texts_a[2]) == []
  seq, stride = 12, 3

  def logits_of(features):  # a window's "logits": its pieces' id sum and its text_b length
    ids = tf.cast(features["input_word_ids"], tf.float32)
    return tf.stack([tf.reduce_sum(ids, 1), tf.reduce_sum(
        tf.cast(features["input_type_ids"], tf.float32), 1)], axis=1)

  expected, counts = [], []
  for a, b in zip(texts_a, texts_b):
    features = _windows(tokenizer, a, b, seq, stride)
    expected += [f[:3] for f in features]
    counts.append(len(features))
  assert counts == [3, 1, 1, 1]  # the empty rows: one window each, as the runner writes
  got, rows = glue_export.window_features(graph_tokenizer, tf.constant(texts_a),
                                          tf.constant(texts_b), seq, stride)
  got = list(zip(*(got[k].numpy().tolist() for k in ("input_word_ids", "input_mask",
                                                     "input_type_ids"))))
  assert [tuple(f) for f in got] == [tuple(f) for f in expected]
  assert np.bincount(rows.numpy()).tolist() == counts
  runner_logits = logits_of({"input_word_ids": np.array([f[0] for f in expected]),
                             "input_type_ids": np.array([f[2] for f in expected])}).numpy()
  for pooling in windows.POOLINGS:
    answer = glue_export.windowed_logits(graph_tokenizer, tf.constant(texts_a),
                                         tf.constant(texts_b), seq,
                                         glue.WindowOptions(stride, pooling), logits_of)
    np.testing.assert_allclose(answer.numpy(), windows.pool(runner_logits, counts, pooling),
                               rtol=1e-6)


def _mrpc_with_long_texts(folder):
  """The MRPC fixture plus long pairs: text_a several sentences long, one text_b long too."""
  rows = (FIXTURES / "classifier_data" / "MRPC" / "train.tsv").read_text().splitlines()
  sentences = [row.split("\t")[3] for row in rows[1:]]
  rows = rows[:7]
  for i in range(3):
    text_a = " ".join(sentences[i:i + 2 + i])
    text_b = " ".join(sentences[-3:]) if i == 2 else "A short one ."
    rows.append("\t".join([str(i % 2), "9%d" % i, "8%d" % i, text_a, text_b]))
  folder.mkdir()
  for name in ("train.tsv", "dev.tsv", "test.tsv"):
    (folder / name).write_text("\n".join(rows) + "\n")
  return folder


def _args(data, output_dir, *extra, training="window"):
  """run_classifier's flags for the MRPC windows data (`training`: --window_training, None to
  leave it to its default)."""
  rule = ["--window_training=" + training] if training else []
  return ["--task_name=MRPC", "--data_dir=%s" % data, "--vocab_file=%s" % VOCAB_UNCASED,
          "--bert_config_file=%s" % TINY.config, "--init_checkpoint=%s" % TINY.ckpt,
          "--max_seq_length=32", "--output_dir=%s" % output_dir, "--long_document=windows",
          *rule, *extra]


def _results(path):
  return {k: float(v) for k, v in (line.split(" = ") for line in path.read_text().splitlines())}


@pytest.fixture(scope="module")
def windows_run(tmp_path_factory, script_session):
  """One windows run (stride 12, --window_training=window) trained one epoch, evaluated,
  predicted and exported, by the module's run_classifier process: (data folder, output
  folder, export folder, its result)."""
  folder = tmp_path_factory.mktemp("windows")
  data = _mrpc_with_long_texts(folder / "MRPC")
  out, export_dir = folder / "out", folder / "export"
  result = script_session("run_classifier.py")(*_args(
      data, out, "--doc_stride=12", "--do_train", "--do_eval", "--do_predict",
      "--train_batch_size=4", "--num_train_epochs=1", "--eval_batch_size=5",
      "--predict_batch_size=5", "--export_dir=%s" % export_dir))
  return data, out, export_dir, result


@pytest.mark.slow
def test_windows_through_run_classifier_and_its_export(windows_run, tmp_path, tokenizer):
  """The run: records, the log, per-example metrics and predictions, the export's answers on
  the long texts, the stored settings."""
  data, out, export_dir, result = windows_run
  assert result.returncode == 0, result.stderr[-3000:]
  processor = glue.MrpcProcessor()
  examples = processor.get_train_examples(str(data))
  per_example = [windows.example_windows(e, processor.get_labels(), 32, tokenizer, 12)
                 for e in examples]
  counts = [len(w) for w in per_example]
  # Each example's windows in a row; the examples in the order of --shuffle_seed's shuffle.
  order = list(range(len(examples)))
  random.Random(12345).shuffle(order)
  assert order != sorted(order)
  records = [r.numpy() for r in tf.data.TFRecordDataset(str(out / "train.tf_record"))]
  assert records == [glue.encode_features(f) for i in order for f in per_example[i]]
  fits = 0
  for example, features in zip(examples, per_example):
    labels = {example_codec.parse_example(glue.encode_features(f))["label_ids"][0]
              for f in features}
    assert labels == {int(example.label)}
    pieces = len(tokenizer.tokenize(example.text_a)) + len(tokenizer.tokenize(example.text_b))
    if pieces <= 32 - 3:  # what fits is the record truncate writes, byte for byte
      fits += 1
      assert glue.encode_features(features[0]) == glue.encode_features(
          glue.convert_single_example(0, example, processor.get_labels(), 32, tokenizer))
  assert fits >= 3 and max(counts) >= 4
  assert windows.describe(counts) in result.stderr
  eval_results = _results(out / "eval_results.txt")
  assert eval_results["global_step"] == sum(counts) // 4
  # Metrics and predictions are per example, from the same pooled logits.
  probabilities = np.loadtxt(out / "test_results.tsv")
  labels = np.array([int(e.label) for e in examples])
  assert probabilities.shape == (len(examples), 2)
  assert eval_results["eval_accuracy"] == pytest.approx(
      np.mean(np.argmax(probabilities, axis=1) == labels), abs=1e-12)
  assert eval_results["eval_loss"] == pytest.approx(
      -np.mean(np.log(probabilities[np.arange(len(labels)), labels])), rel=1e-5)
  assert "eval_f1" in eval_results
  settings = json.loads((out / "training_state" / "settings.json").read_text())
  assert (settings["long_document"], settings["doc_stride"], settings["window_pooling"],
          settings["window_training"]) == ("windows", 12, "mean", "window")
  assert "max_train_windows" not in settings
  # The export reads the long texts as the runner did (a fresh process, without bert_tf).
  meta = json.loads((export_dir / "assets.extra" / "bert_tf_export.json").read_text())
  assert (meta["long_document"], meta["doc_stride"], meta["window_pooling"]) == (
      "windows", 12, "mean")
  served = printed_json(run_script(
      PROGRAMS + "serve_pair_probabilities.py",
      json.dumps({"a": [e.text_a for e in examples], "b": [e.text_b for e in examples]}),
      export_dir, isolated=True, cwd=tmp_path, timeout=120))
  assert_float32_close(np.array(served), probabilities, ulps=64)


@pytest.mark.slow
def test_training_on_the_first_window_is_truncate_training(tmp_path, tokenizer, script_session):
  """The default rule: training writes truncate's records and takes truncate's steps, so the
  trained weights are a truncate run's; prediction then pools every window."""
  data = _mrpc_with_long_texts(tmp_path / "MRPC")
  train = ("--do_train", "--train_batch_size=4", "--num_train_epochs=1")
  truncated = script_session("run_classifier.py")(*_truncate(_args(data, tmp_path / "t", *train)))
  assert truncated.returncode == 0, truncated.stderr[-3000:]
  first = script_session("run_classifier.py")(*_args(
      data, tmp_path / "w", "--doc_stride=12", "--do_predict", "--predict_batch_size=5", *train,
      training=None))
  assert first.returncode == 0, first.stderr[-3000:]
  assert (tmp_path / "w" / "train.tf_record").read_bytes() == (
      tmp_path / "t" / "train.tf_record").read_bytes()
  assert ("--window_training=first: training reads each document's first window (the records "
          "of truncate); evaluation, prediction and the export pool all of its windows by "
          "mean.") in first.stderr
  # The few steps only: a GLUE task's pooling is not judged (its labels' shares are not read).
  assert first.stderr.count("--long_document=windows may lose to truncate here: ") == 1
  assert "training steps: below 50" in first.stderr
  reader = {name: tf.train.load_checkpoint(str(tmp_path / name)) for name in ("t", "w")}
  names = [n for n, _ in tf.train.list_variables(str(tmp_path / "t")) if n.startswith(("bert/",
                                                                                       "output"))]
  assert len(names) > 20
  for name in names:
    np.testing.assert_array_equal(reader["w"].get_tensor(name), reader["t"].get_tensor(name),
                                  err_msg=name)
  settings = json.loads((tmp_path / "w" / "training_state" / "settings.json").read_text())
  assert settings["window_training"] == "first" and "max_train_windows" not in settings
  test = glue.MrpcProcessor().get_test_examples(str(data))
  probabilities = np.loadtxt(tmp_path / "w" / "test_results.tsv")
  assert probabilities.shape == (len(test), 2)
  counts = [windows.count_windows(e, 32, tokenizer, 12) for e in test]
  assert max(counts) > 1 and windows.describe(counts) in first.stderr  # prediction: windows


@pytest.mark.slow
def test_training_by_document_through_run_classifier(tmp_path, tokenizer, script_session):
  """--window_training=document: a record per document (at most --max_train_windows windows), a step
  per batch of documents, the log's account, the rule in the stored settings; evaluation
  and prediction read every window as the window rule does."""
  data = _mrpc_with_long_texts(tmp_path / "MRPC")
  out = tmp_path / "out"
  result = script_session("run_classifier.py")(*_args(
      data, out, "--doc_stride=12", "--max_train_windows=3", "--do_train", "--do_eval",
      "--do_predict", "--train_batch_size=4", "--num_train_epochs=1", "--eval_batch_size=5",
      "--predict_batch_size=5", training="document"))
  assert result.returncode == 0, result.stderr[-3000:]
  processor = glue.MrpcProcessor()
  examples = processor.get_train_examples(str(data))
  documents = [windows.document_features(e, processor.get_labels(), 32, tokenizer, 12, 3)
               for e in examples]
  records = [r.numpy() for r in tf.data.TFRecordDataset(str(out / "train.tf_record"))]
  assert records == [glue.encode_features(f) for f, _ in documents]  # in the file's order
  counts = [count for _, count in documents]
  assert max(counts) > 3  # a document cut to its first 3 windows
  assert windows.describe(counts, 3) in result.stderr
  assert ("--window_training=document: a batch is 4 documents, each with its windows (at most "
          "3); the loss is on their logits pooled by mean.") in result.stderr
  eval_results = _results(out / "eval_results.txt")
  assert eval_results["global_step"] == len(examples) // 4
  settings = json.loads((out / "training_state" / "settings.json").read_text())
  assert (settings["window_training"], settings["max_train_windows"]) == ("document", 3)
  probabilities = np.loadtxt(out / "test_results.tsv")
  assert probabilities.shape == (len(processor.get_test_examples(str(data))), 2)
  # A resume that would train every window on its own stops before writing anything.
  before = _digests(out)
  refused = script_session("run_classifier.py")(*_args(
      data, out, "--doc_stride=12", *_TRAIN))
  assert refused.returncode == 2, refused.stderr[-2000:]
  assert 'window_training: "document" when the state was saved, "window" now' in refused.stderr
  assert _digests(out) == before


# Resuming windows_run's folder (a copy per test) otherwise. A resume that trains on other
# windows, or on truncated records, would mix two datasets: it stops before writing anything.

_TRAIN = ("--do_train", "--train_batch_size=4", "--num_train_epochs=1")


def _digests(folder):
  """Each file under `folder`: its path -> the sha1 of its bytes. The run lock is left out: a
  process removes it as it ends, but the session's process lives on, holding it."""
  return {str(path): hashlib.sha1(path.read_bytes()).hexdigest()
          for path in sorted(folder.rglob("*")) if path.is_file() and path.name != LOCK_NAME}


def _copy(windows_run, tmp_path):
  data, out = windows_run[:2]
  assert windows_run[3].returncode == 0, windows_run[3].stderr[-3000:]
  shutil.copytree(out, tmp_path / "out")
  return data, tmp_path / "out"


def _truncate(args):
  return [a for a in args
          if a != "--long_document=windows" and not a.startswith("--window_training")]


@pytest.mark.slow
def test_resume_with_another_doc_stride_stops_before_writing_anything(windows_run, tmp_path,
                                                                      script_session):
  data, out = _copy(windows_run, tmp_path)
  before = _digests(out)
  refused = script_session("run_classifier.py")(*_args(data, out, "--doc_stride=8", *_TRAIN))
  assert refused.returncode == 2, refused.stderr[-2000:]
  assert "doc_stride: 12 when the state was saved, 8 now" in refused.stderr
  assert "Traceback" not in refused.stderr
  assert _digests(out) == before  # train.tf_record, settings.json, every checkpoint


@pytest.mark.slow
def test_resume_of_a_windows_state_without_windows_stops_before_writing_anything(
    windows_run, tmp_path, script_session):
  data, out = _copy(windows_run, tmp_path)
  before = _digests(out)
  refused = script_session("run_classifier.py")(*_truncate(_args(data, out, *_TRAIN)))
  assert refused.returncode == 2, refused.stderr[-2000:]
  assert 'long_document: "windows" when the state was saved, "truncate" now' in refused.stderr
  assert "doc_stride: 12 when the state was saved, (not set) now" in refused.stderr
  assert "Traceback" not in refused.stderr
  assert _digests(out) == before


@pytest.mark.slow
def test_a_state_saved_before_the_rule_was_recorded_resumes_as_the_window_rule(
    windows_run, tmp_path, script_session):
  """Such a state trained every window on its own: it resumes under --window_training=window
  and stops, nothing written, under the new default."""
  data, out = _copy(windows_run, tmp_path)
  path = out / "training_state" / "settings.json"
  settings = json.loads(path.read_text())
  del settings["window_training"]
  path.write_text(json.dumps(settings))
  before = _digests(out)
  refused = script_session("run_classifier.py")(*_args(data, out, "--doc_stride=12", *_TRAIN,
                                                        training=None))
  assert refused.returncode == 2, refused.stderr[-2000:]
  assert 'window_training: "window" when the state was saved, "first" now' in refused.stderr
  assert _digests(out) == before
  resumed = script_session("run_classifier.py")(*_args(data, out, "--doc_stride=12", *_TRAIN))
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  assert "Already trained to step" in resumed.stderr


@pytest.mark.slow
def test_resume_with_another_window_pooling_is_allowed_and_logged(windows_run, tmp_path,
                                                                   script_session):
  """The pooling combines logits at evaluation and prediction only: training is the same."""
  data, out = _copy(windows_run, tmp_path)
  pooling = script_session("run_classifier.py")(
      *_args(data, out, "--doc_stride=12", "--window_pooling=max", *_TRAIN))
  assert pooling.returncode == 0, pooling.stderr[-2000:]
  assert pooling.stderr.count(
      'Resuming with window_pooling changed from "mean" to "max" (allowed') == 1
  assert "Already trained to step" in pooling.stderr


@pytest.mark.slow
def test_evaluating_windows_weights_on_truncated_texts_runs_and_warns(windows_run, tmp_path,
                                                                      script_session):
  """Allowed (a run that only evaluates may read its texts otherwise), but likely a forgotten
  flag: the log names the flags the weights were trained with."""
  data, out = _copy(windows_run, tmp_path)
  evaluate = script_session("run_classifier.py")(
      *_truncate(_args(data, out, "--do_eval", "--eval_batch_size=5")))
  assert evaluate.returncode == 0, evaluate.stderr[-2000:]
  assert ("were trained with --long_document=windows --doc_stride=12; this run reads its texts "
          "with --long_document=truncate (allowed; pass --long_document=windows "
          "--doc_stride=12 to read them as training did)") in evaluate.stderr
  assert "Running evaluation: %d examples" % len(
      glue.MrpcProcessor().get_dev_examples(str(data))) in evaluate.stderr


def _sts_b(tmp_path):
  """An STS-B folder (regression, pairs) of 7 rows whose text_a is 1 to 3 of MRPC's sentences:
  the same file as dev and test."""
  sentences = (FIXTURES / "classifier_data" / "MRPC" / "train.tsv").read_text().splitlines()[1:]
  sentences = [row.split("\t")[3] for row in sentences]
  header = "index genre filename year old_index source1 source2 sentence1 sentence2 score"
  rows = [header.replace(" ", "\t")] + [
      "\t".join([str(i), "g", "f", "y", "o", "s", "s", " ".join(sentences[i:i + 1 + 2 * (i % 3)]),
                 sentences[-1 - i], "%.1f" % (i % 5)]) for i in range(7)]
  data = tmp_path / "STS-B"
  data.mkdir()
  for name in ("dev.tsv", "test.tsv"):
    (data / name).write_text("\n".join(rows) + "\n")
  return data


def _classifier_hooks(options, **values):
  """run_classifier's ClassifierHooks on flags `values` (the rest at their defaults) and the
  RunOptions `options`."""
  import types

  from bert_tf.tasks.glue.hooks import ClassifierHooks
  flags = dict(task_name="STS-B", data_dir=None, xnli_language="zh", write_glue_submission=False,
               long_document="truncate", doc_stride=None, window_pooling=None,
               window_training=None, max_train_windows=None)
  flags.update(values)
  return ClassifierHooks(types.SimpleNamespace(**flags), options)


@pytest.mark.parametrize("values, expected", [
    (dict(long_document="windows", doc_stride=0),
     "--doc_stride must be a positive integer, got 0."),
    (dict(doc_stride=64),
     "--doc_stride=64 is for --long_document=windows; drop it or add --long_document=windows."),
    (dict(window_pooling="max"),
     "--window_pooling=max is for --long_document=windows; drop it or add "
     "--long_document=windows."),
    (dict(task_name="MRPC", long_document="windows", max_seq_length=4),
     "--max_seq_length=4 leaves no room for a window of text_a beside text_b ([CLS] a [SEP] b "
     "[SEP]); --long_document=windows on MRPC needs at least 5."),
    (dict(long_document="windows", window_pooling="any"),
     "--window_pooling=any picks the window least likely to be the first label, and STS-B has "
     "no labels (regression); use mean or max."),
    (dict(window_training="document"),
     "--window_training=document is for --long_document=windows; drop it or add "
     "--long_document=windows."),
    (dict(long_document="windows", max_train_windows=0, window_training="document"),
     "--max_train_windows must be a positive integer, got 0."),
    (dict(long_document="windows", window_training="window", max_train_windows=4),
     "--max_train_windows=4 is for --window_training=document; drop it."),
    (dict(do_train=True, long_document="windows", jit_compile=True,
          window_training="document"),
     "--window_training=document runs each batch's real windows only, a count that changes "
     "from batch to batch, which XLA cannot compile; drop --jit_compile or add "
     "--window_training=first."),
    (dict(task_name="QNLI", long_document="windows"),
     "--long_document=windows cuts text_a into windows, but QNLI's text_a is a question and "
     "its long text is text_b (SQuAD-style); use --long_document=truncate, or run_squad.py "
     "for long passages."),
])
def test_bad_window_flags_are_one_line(tmp_path, values, expected):
  from bert_tf.errors import UserInputError
  from bert_tf.runner import RunOptions
  values = dict(values)
  options = RunOptions(
      max_seq_length=values.pop("max_seq_length", 24), do_train=values.pop("do_train", False),
      do_eval=True, jit_compile=values.pop("jit_compile", False),
      output_dir=str(tmp_path / "out"))
  hooks = _classifier_hooks(options, **values)
  with pytest.raises(UserInputError) as error:
    hooks.check(options)
  assert str(error.value) == expected


def test_tpu_pads_eval_windows_to_whole_batches(tmp_path, tokenizer):
  """On TPUs eval windows are padded to whole batches with records that are no example, after
  the real windows (the ones window_counts counts, which the pooling reads)."""
  from bert_tf.runner import Run, RunOptions
  options = RunOptions(max_seq_length=24, do_eval=True, eval_batch_size=4, strategy="tpu",
                       output_dir=str(tmp_path / "out"))
  hooks = _classifier_hooks(options, data_dir=str(_sts_b(tmp_path)), long_document="windows",
                            doc_stride=5, window_pooling="max")
  hooks.check(options)
  run = Run(options, None, None, tokenizer)
  examples = hooks.read_examples(run, "eval")
  records = [example_codec.parse_example(r) for r in hooks.encode(run, "eval", examples)]
  windows_written = sum(hooks.window_counts(run, examples))
  assert windows_written > len(examples) == 7
  assert len(records) % 4 == 0 and len(records) - windows_written in (1, 2, 3)
  assert {r["is_real_example"][0] for r in records[:windows_written]} == {1}
  assert {r["is_real_example"][0] for r in records[windows_written:]} == {0}


@pytest.mark.slow
def test_regression_windows_evaluate_and_predict_by_max(tmp_path, script_session):
  """STS-B (regression) read as windows pooled by max: one prediction per example, eval_loss
  the squared error of the same predictions."""
  data = _sts_b(tmp_path)
  done = script_session("run_classifier.py")(
      "--task_name=STS-B", "--data_dir=%s" % data, "--vocab_file=%s" % VOCAB_UNCASED,
      "--bert_config_file=%s" % TINY.config, "--init_checkpoint=%s" % TINY.ckpt,
      "--max_seq_length=24", "--eval_batch_size=4", "--output_dir=%s" % (tmp_path / "out"),
      "--do_eval", "--do_predict", "--long_document=windows", "--doc_stride=5",
      "--window_pooling=max")
  assert done.returncode == 0, done.stderr[-3000:]
  assert "Running evaluation: 7 examples" in done.stderr
  assert "training set" not in done.stderr  # nothing to say of a training set not read
  eval_results = _results(tmp_path / "out" / "eval_results.txt")
  assert sorted(eval_results) == ["eval_loss", "eval_pearson", "eval_spearman", "global_step",
                                  "loss"]
  predictions = np.loadtxt(tmp_path / "out" / "test_results.tsv")
  assert predictions.shape == (7,)
  labels = np.array([i % 5 for i in range(7)], np.float64)
  assert eval_results["eval_loss"] == pytest.approx(np.mean((predictions - labels) ** 2),
                                                    rel=1e-6)


def test_the_log_warns_where_windows_measured_worse():
  """docs/runners.md's measurements: on a yes/no file with a presence label, mean or max
  pooling lost to truncate; without one (balanced), any did; a budget of few steps lost with
  every pooling. Nothing for the measured winners, for regression or multi-label, or for a
  GLUE task whose labels' shares are not worked out."""
  mean = windows.WindowOptions(pooling="mean")
  anyway = windows.WindowOptions(pooling="any", no_label=1)
  assert windows.risks(anyway, 200, False, presence=1) == []
  assert windows.risks(mean, 200, False, presence=None) == []
  assert windows.risks(mean, 200, True, presence=None) == []
  assert windows.risks(anyway, 200, False, multi_label=True, presence=None) == []
  assert windows.risks(mean, 200, False) == []  # GLUE: presence not worked out
  (pooling,) = windows.risks(mean, 200, False, presence=1)
  assert pooling.startswith("--window_pooling=mean on a yes/no file whose 'no' holds most")
  (balanced,) = windows.risks(anyway, 200, False, presence=None)
  assert balanced.startswith("--window_pooling=any with no label holding most rows")
  (budget,) = windows.risks(anyway, 13, False, presence=1)
  assert budget.startswith("13 training steps: below 50")
  assert len(windows.risks(mean, 13, False, presence=1)) == 2
