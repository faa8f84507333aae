"""run_classifier: the original's features, processor quirks, GLUE metrics, fine-tuning runs."""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.data import example_codec
from bert_tf.errors import UserInputError
from bert_tf.tasks import glue
from helpers import FIXTURES, PROGRAMS, TINY, VOCAB_UNCASED, printed_json, run_script

DATA = FIXTURES / "classifier_data"


def _parsed(path):
  return [example_codec.parse_example(r.numpy()) for r in tf.data.TFRecordDataset(str(path))]


def _features(examples, label_list, seq=32):
  tokenizer = tokenization.FullTokenizer(VOCAB_UNCASED, True)
  return [example_codec.parse_example(glue.encode_features(glue.convert_single_example(
      i, e, label_list, seq, tokenizer))) for i, e in enumerate(examples)]


def test_mrpc_features_equal_the_originals():
  processor = glue.MrpcProcessor()
  train = processor.get_train_examples(str(DATA / "MRPC"))
  assert len(train) == 12
  assert _features(train, processor.get_labels()) == _parsed(DATA / "MRPC_train.tfrecord")
  test = processor.get_test_examples(str(DATA / "MRPC")) + [glue.PaddingInputExample()]
  assert all(e.label == "0" for e in test[:-1])
  assert _features(test, processor.get_labels()) == _parsed(DATA / "MRPC_test.tfrecord")


def _write(folder, name, rows):
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
    f.write("".join("\t".join(r) + "\n" for r in rows))


def test_cola_has_no_header_in_train_but_one_in_test(tmp_path):
  _write(tmp_path, "train.tsv",
         [["src", "1", "", "Row zero is data ."], ["src", "0", "*", "Bad ."]])
  _write(tmp_path, "test.tsv", [["index", "sentence"], ["0", "A test ."]])
  processor = glue.ColaProcessor()
  train = processor.get_train_examples(str(tmp_path))
  assert [(e.guid, e.text_a, e.text_b, e.label) for e in train] == [
      ("train-0", "Row zero is data .", None, "1"), ("train-1", "Bad .", None, "0")]
  test = processor.get_test_examples(str(tmp_path))
  assert [(e.guid, e.text_a, e.label) for e in test] == [("test-1", "A test .", "0")]


def test_mnli_xnli_and_quotes(tmp_path):
  header = ["index"] + ["c%d" % i for i in range(1, 8)] + ["sentence1", "sentence2", "gold"]
  row = ["7", "x", "x", "x", "x", "x", "x", "x", 'He said "hi', "ok", "neutral"]
  _write(tmp_path, "train.tsv", [header, row])
  _write(tmp_path, "test_matched.tsv", [header[:-1], row[:-1]])
  mnli = glue.MnliProcessor()
  (example,) = mnli.get_train_examples(str(tmp_path))
  assert (example.guid, example.text_a, example.label) == ("train-7", 'He said "hi', "neutral")
  assert mnli.get_test_examples(str(tmp_path))[0].label == "contradiction"

  _write(tmp_path / "multinli", "multinli.train.de.tsv",
         [["premise", "hypo", "label"], ["a", "b", "contradictory"]])
  _write(tmp_path, "xnli.dev.tsv", [["language", "gold_label"] + ["x"] * 6,
                                    ["de", "entailment", "", "", "", "", "p", "h"],
                                    ["zh", "neutral", "", "", "", "", "p2", "h2"]])
  xnli = glue.XnliProcessor("de")
  assert xnli.get_train_examples(str(tmp_path))[0].label == "contradiction"
  assert [(e.guid, e.text_a) for e in xnli.get_dev_examples(str(tmp_path))] == [("dev-1", "p")]


def test_empty_text_b_gives_single_sentence_features():
  example = glue.InputExample("x", "hello world", "", "1")
  (features,) = _features([example], ["0", "1"], seq=8)
  assert features["segment_ids"] == [0] * 8 and features["input_mask"] == [1, 1, 1, 1, 0, 0, 0, 0]


def test_bad_inputs_are_clear_errors(tmp_path):
  with pytest.raises(UserInputError, match="Known tasks: cola, mnli, mnli-mm, mrpc"):
    glue.get_processor("glue-everything")
  with pytest.raises(UserInputError, match="label 'maybe', which is not one of the task's labels"):
    _features([glue.InputExample("train-3", "a", "b", "maybe")], ["0", "1"])
  _write(tmp_path, "train.tsv", [["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                                 ["1", "only", "three"]])
  with pytest.raises(UserInputError, match=r"train.tsv row 2 has 3 column\(s\)"):
    glue.MrpcProcessor().get_train_examples(str(tmp_path))
  with pytest.raises(UserInputError, match="dev.tsv does not exist"):
    glue.MrpcProcessor().get_dev_examples(str(tmp_path))


def test_glue_metrics_hand_worked():
  predictions = np.array([1, 1, 0, 0, 1, 0])
  labels = np.array([1, 0, 0, 1, 1, 0])
  f1 = glue.glue_metrics("mrpc", predictions, labels)
  assert f1["eval_precision"] == pytest.approx(2 / 3) and f1["eval_recall"] == pytest.approx(2 / 3)
  assert f1["eval_f1"] == pytest.approx(2 / 3)
  # tp=2 tn=2 fp=1 fn=1: (4 - 1) / sqrt(3*3*3*3) = 1/3
  assert glue.glue_metrics("cola", predictions, labels)["eval_mcc"] == pytest.approx(1 / 3)
  sts = glue.glue_metrics("sts-b", np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 3.0, 3.0, 9.0]))
  assert sts["eval_pearson"] == pytest.approx(12 / np.sqrt(180), abs=1e-9)
  # ranks of labels with a tie: 1, 2.5, 2.5, 4 -> 4.5 / sqrt(5 * 4.5)
  assert sts["eval_spearman"] == pytest.approx(0.9486833, abs=1e-6)
  assert glue.glue_metrics("rte", predictions, labels) == {}


def _run(*args):
  return run_script("run_classifier.py", *args)


def _common(data_dir, output_dir, *extra):
  return ["--task_name=MRPC", "--data_dir=%s" % data_dir, "--vocab_file=%s" % VOCAB_UNCASED,
          "--bert_config_file=%s" % TINY.config, "--init_checkpoint=%s" % TINY.ckpt,
          "--max_seq_length=32", "--output_dir=%s" % output_dir, *extra]


def _results(path):
  return dict(line.split(" = ") for line in open(path).read().splitlines())


@pytest.mark.slow
def test_fine_tuning_lowers_the_loss_and_writes_results(tmp_path):
  data = tmp_path / "MRPC"
  shutil.copytree(DATA / "MRPC", data)
  shutil.copy(data / "train.tsv", data / "dev.tsv")
  before = _run(*_common(data, tmp_path / "before", "--do_eval", "--eval_batch_size=5"))
  assert before.returncode == 0, before.stderr
  # Allowed (a baseline), but the untrained head is a warning.
  assert "has no trained classifier head, and this run does not train" in before.stderr
  after = _run(*_common(data, tmp_path / "after", "--do_train", "--do_eval", "--do_predict",
                        "--train_batch_size=4", "--num_train_epochs=8", "--learning_rate=2e-3",
                        "--eval_batch_size=5", "--write_glue_submission"))
  assert after.returncode == 0, after.stderr
  r0, r1 = _results(tmp_path / "before" / "eval_results.txt"), _results(
      tmp_path / "after" / "eval_results.txt")
  assert sorted(r1) == ["eval_accuracy", "eval_f1", "eval_loss", "eval_precision", "eval_recall",
                        "global_step", "loss"]
  assert r0["global_step"] == "0" and r1["global_step"] == "24"
  assert float(r1["eval_loss"]) < float(r0["eval_loss"])
  rows = (tmp_path / "after" / "test_results.tsv").read_text().splitlines()
  assert len(rows) == 3
  assert all(abs(sum(float(x) for x in row.split("\t")) - 1) < 1e-5 for row in rows)
  submission = (tmp_path / "after" / "MRPC.tsv").read_text().splitlines()
  assert submission[0] == "index\tprediction" and len(submission) == 4
  for name in ("train.tf_record", "eval.tf_record", "predict.tf_record", "model.ckpt-24.index"):
    assert (tmp_path / "after" / name).exists(), name
  reader = tf.train.load_checkpoint(str(tmp_path / "after" / "model.ckpt-24"))
  assert list(reader.get_tensor("output_weights").shape) == [2, 32]


@pytest.mark.slow
def test_regression_task_and_unknown_task(tmp_path):
  header = ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1",
            "sentence2", "score"]
  rows = [header] + [[str(i), "g", "f", "y", "o", "s", "s", "a man plays %d" % i, "a man %d" % i,
                      "%.1f" % (i % 5)] for i in range(8)]
  _write(tmp_path / "STS-B", "train.tsv", rows)
  _write(tmp_path / "STS-B", "dev.tsv", rows)
  args = _common(tmp_path / "STS-B", tmp_path / "out", "--do_train", "--do_eval",
                 "--train_batch_size=4", "--num_train_epochs=1", "--eval_batch_size=4")
  args[0] = "--task_name=STS-B"
  result = _run(*args)
  assert result.returncode == 0, result.stderr
  keys = sorted(_results(tmp_path / "out" / "eval_results.txt"))
  assert keys == ["eval_loss", "eval_pearson", "eval_spearman", "global_step", "loss"]
  args[0] = "--task_name=nope"
  result = _run(*args)
  assert result.returncode == 2 and "Task not found: nope. Known tasks:" in result.stderr


@pytest.mark.slow
def test_checkpoint_of_another_config_is_a_clear_error(tmp_path):
  wide = tmp_path / "config.json"
  wide.write_text(open(TINY.config).read().replace('"intermediate_size": 64',
                                                   '"intermediate_size": 48'))
  args = _common(DATA / "MRPC", tmp_path / "out", "--do_train", "--train_batch_size=4")
  args = [a for a in args if not a.startswith("--bert_config_file")] + [
      "--bert_config_file=%s" % wide]
  result = _run(*args)
  assert result.returncode == 2 and "shape mismatch" in result.stderr
  assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_export_dir_gives_a_savedmodel_answering_raw_text_in_a_fresh_process(tmp_path):
  export_dir = tmp_path / "export"
  result = _run(*_common(DATA / "MRPC", tmp_path / "out", "--do_train", "--train_batch_size=4",
                         "--num_train_epochs=1", "--export_dir=%s" % export_dir,
                         "--strip_accents=false"))
  assert result.returncode == 0, result.stderr
  from bert_tf import export
  meta = export.read_metadata(str(export_dir))
  assert meta["strip_accents"] is False and meta["do_lower_case"] is True
  assert meta["dynamic_length"] is True
  import json
  texts = {"text_a": ["The cat sat .", ""], "text_b": ["A cat was sitting .", "x"]}
  answer = printed_json(run_script(PROGRAMS + "serve_signature.py", json.dumps(texts),
                                   export_dir, isolated=True, cwd=tmp_path))
  assert len(answer["probabilities"]) == 2 and all(
      abs(sum(p) - 1) < 1e-5 for p in answer["probabilities"])
  assert set(answer["label_ids"]) <= {0, 1}
