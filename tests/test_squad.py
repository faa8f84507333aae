"""run_squad's data path against the original: examples, features, records, predictions."""

from functools import partial
import json

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.data import example_codec
from bert_tf.errors import UserInputError
from bert_tf.tasks import squad
from helpers import FIXTURES, TINY, VOCAB_UNCASED, run_script, tiny_config

DATA = FIXTURES / "squad"
REFERENCE = json.loads((DATA / "squad_features.json").read_text())
RUNS = {"train_v2": (DATA / "squad_v2_tiny.json", True, True),
        "train_v1": (DATA / "squad_v1_tiny.json", True, False),
        "predict": (DATA / "squad_v2_tiny.json", False, False)}


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case=True)


def _run(tokenizer, name):
  path, is_training, v2 = RUNS[name]
  examples = squad.read_squad_examples(str(path), is_training, v2)
  features = []
  params = REFERENCE["params"]
  squad.convert_examples_to_features(examples, tokenizer, params["max_seq_length"],
                                     params["doc_stride"], params["max_query_length"],
                                     is_training, features.append)
  return examples, features


@pytest.mark.parametrize("name", sorted(RUNS))
def test_examples_and_features_equal_the_originals(tokenizer, name):
  examples, features = _run(tokenizer, name)
  want = REFERENCE[name]
  assert len(examples) == len(want["examples"])
  for ours, theirs in zip(examples, want["examples"]):
    for key, value in theirs.items():
      assert getattr(ours, key) == value, (ours.qas_id, key)
  assert len(features) == len(want["features"])
  for ours, theirs in zip(features, want["features"]):
    for key, value in theirs.items():
      got = getattr(ours, key)
      if key in ("token_to_orig_map", "token_is_max_context"):
        got = {str(k): v for k, v in got.items()}
      assert got == value, (ours.unique_id, key)


def test_feature_records_equal_the_originals(tokenizer):
  for name, file_name, is_training in (("train_v2", "train_v2_features.tfrecord", True),
                                       ("predict", "predict_features.tfrecord", False)):
    _, features = _run(tokenizer, name)
    ours = [example_codec.parse_example(squad.encode_feature(f, is_training)) for f in features]
    theirs = [example_codec.parse_example(r.numpy())
              for r in tf.data.TFRecordDataset(str(DATA / file_name))]
    assert ours == theirs


def test_v2_file_without_the_flag_is_a_clear_error():
  assert "exactly 1 answer" in REFERENCE["runs"]["train_v2file_flag_off_error"]
  with pytest.raises(UserInputError, match="each question should have exactly 1 answer"):
    squad.read_squad_examples(str(DATA / "squad_v2_tiny.json"), True, False)


def _results(logit_set):
  logits = np.load(DATA / "write_predictions_logits.npz")
  return [squad.RawResult(int(uid), [float(x) for x in start.flat], [float(x) for x in end.flat])
          for uid, start, end in zip(logits["unique_ids"], logits[logit_set + ".start_logits"],
                                     logits[logit_set + ".end_logits"])]


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_prediction_files_are_byte_identical(tokenizer, tmp_path, version):
  """The original's write_predictions on the 131 predict features and the `random` logits."""
  examples, features = _run(tokenizer, "predict")
  v2 = version == "v2"
  out = {n: str(tmp_path / n) for n in ("predictions.json", "nbest_predictions.json",
                                         "null_odds.json")}
  squad.write_predictions(examples, features, _results("random"), 5, 10, True,
                          out["predictions.json"], out["nbest_predictions.json"],
                          out["null_odds.json"], version_2_with_negative=v2)
  folder = DATA / "predictions" / ("random_nbest5_maxans10_" + version)
  names = ["predictions.json", "nbest_predictions.json"] + (["null_odds.json"] if v2 else [])
  for name in names:
    assert open(out[name], "rb").read() == (folder / name).read_bytes(), name
  if v2:
    predictions = json.loads((folder / "predictions.json").read_text())
    assert [k for k, v in predictions.items() if v == ""] == ["ex-04", "rw-04", "sf-03"]


@pytest.mark.parametrize("logit_set", ["ties_int", "ties_halfstep", "tiny_model"])
def test_v2_examples_without_a_span_get_the_null_answer_instead_of_crashing(tokenizer, logit_set):
  examples, features = _run(tokenizer, "predict")
  predictions, nbest, null_odds = squad.compute_predictions(
      examples, features, _results(logit_set), 5, 10, True, version_2_with_negative=True)
  assert list(predictions) == [e.qas_id for e in examples]
  no_span = [q for q, entries in nbest.items() if not any(entry["text"] for entry in entries)]
  assert no_span, "this logit set was chosen because the original crashes on it"
  for qas_id in no_span:
    assert predictions[qas_id] == "" and null_odds[qas_id] == squad.NO_SPAN_SCORE_DIFF


def test_hand_worked_helpers():
  assert squad.split_context("a  b\u00a0c\u202fd\te") == (
      ["a", "b\u00a0c", "d", "e"], [0, 0, 0, 1, 1, 1, 1, 2, 2, 3])
  assert squad.get_best_indexes([1.0, 3.0, 3.0, 2.0], 3) == [1, 2, 3]
  assert squad.doc_spans_for(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
  spans = squad.doc_spans_for(10, 4, 3)
  assert [squad.check_is_max_context(spans, i, 4) for i in range(3)] == [False, True, False]
  assert squad.get_final_text("steve smith", "Steve Smith's", True) == "Steve Smith"
  assert squad.compute_softmax([0.0, 0.0]) == [0.5, 0.5]


def test_bad_files_are_clear_errors(tmp_path):
  bad = tmp_path / "bad.json"
  bad.write_text("{not json")
  with pytest.raises(UserInputError, match="bad.json is not valid JSON"):
    squad.read_squad_examples(str(bad), False)
  empty = tmp_path / "empty.json"
  empty.write_text('{"data": []}')
  with pytest.raises(UserInputError, match="contains no usable questions"):
    squad.read_squad_examples(str(empty), False)
  offset = tmp_path / "offset.json"
  offset.write_text(json.dumps({"data": [{"paragraphs": [{"context": "short text", "qas": [
      {"id": "q1", "question": "?", "answers": [{"text": "text", "answer_start": 99}]}]}]}]}))
  with pytest.raises(UserInputError, match="question q1 has answer_start 99 outside its context"):
    squad.read_squad_examples(str(offset), True)


def test_official_metrics_hand_worked():
  from bert_tf.tasks.squad import metrics as squad_metrics
  assert squad_metrics.normalize_answer("The  Quick, brown-fox!") == "quick brownfox"
  dataset = [{"paragraphs": [{"qas": [
      {"id": "a", "answers": [{"text": "the cat"}, {"text": "a black cat"}]},
      {"id": "b", "answers": [{"text": "in 1851"}]},
      {"id": "c", "answers": []},
      {"id": "d", "answers": []}]}]}]
  predictions = {"a": "Cat", "b": "1851 or so", "c": "", "d": "something"}
  # a: exact (cat == cat); b: F1 = 2 * (1/3 * 1/2) / (1/3 + 1/2) = 0.4
  answerable = [{"paragraphs": [{"qas": dataset[0]["paragraphs"][0]["qas"][:2]}]}]
  v1 = squad_metrics.evaluate_v1(answerable, predictions)
  assert v1["exact_match"] == pytest.approx(50.0) and v1["f1"] == pytest.approx(70.0)
  assert "skipped_without_answers" not in v1
  # A v2.0 file scored in v1.1 mode: c and d have nothing to score against and are left out.
  assert squad_metrics.evaluate_v1(dataset, predictions) == pytest.approx(
      {"exact_match": 50.0, "f1": 70.0, "skipped_without_answers": 2})
  v2 = squad_metrics.evaluate_v2(dataset, predictions,
                                 na_probs={"a": -2.0, "b": -1.0, "c": 3.0, "d": 0.5})
  assert v2["total"] == 4 and v2["HasAns_total"] == 2 and v2["NoAns_total"] == 2
  assert v2["exact"] == pytest.approx(100 * (1 + 0 + 1 + 0) / 4)
  assert v2["f1"] == pytest.approx(100 * (1 + 0.4 + 1 + 0) / 4)
  assert v2["NoAns_exact"] == pytest.approx(50.0)
  # Threshold sweep: start 2 (no-answer count); a +1 -> 3, b +0.4, d -1, c 0 => best 3.4 at -1.0
  assert v2["best_f1"] == pytest.approx(100 * 3.4 / 4) and v2["best_f1_thresh"] == -1.0
  assert v2["best_exact"] == pytest.approx(75.0) and v2["best_exact_thresh"] == -2.0


def _run_squad(*args):
  return run_script("run_squad.py", *args)


@pytest.mark.slow
def test_predictions_from_a_google_checkpoint_match_the_originals_logits(tokenizer, tmp_path):
  """Encoder + cls/squad head in Google's layout -> the same answers as the original's logits."""
  from bert_tf import checkpoints, heads
  from bert_tf.modeling import BertModel
  encoder, head = BertModel(tiny_config()), heads.SpanHead(tiny_config(), name="squad")
  head.build()
  checkpoints.load_checkpoint(TINY.ckpt, encoder)
  checkpoints.load_checkpoint(FIXTURES / "checkpoint" / "squad_head" / "head.ckpt", heads=[head])
  combined = checkpoints.save_checkpoint(tmp_path / "model" / "bert_model.ckpt", encoder, [head])
  result = _run_squad("--vocab_file=%s" % VOCAB_UNCASED, "--bert_config_file=%s" % TINY.config,
                      "--init_checkpoint=%s" % combined, "--do_predict",
                      "--predict_file=%s" % (DATA / "squad_v1_tiny.json"), "--max_seq_length=64",
                      "--doc_stride=32", "--max_query_length=16", "--n_best_size=5",
                      "--max_answer_length=10", "--predict_batch_size=7",
                      "--output_dir=%s" % (tmp_path / "out"))
  assert result.returncode == 0, result.stderr
  ours = json.loads((tmp_path / "out" / "predictions.json").read_text())
  ours_nbest = json.loads((tmp_path / "out" / "nbest_predictions.json").read_text())
  examples = squad.read_squad_examples(str(DATA / "squad_v1_tiny.json"), False)
  features = []
  squad.convert_examples_to_features(examples, tokenizer, 64, 32, 16, False, features.append)
  forward = np.load(FIXTURES / "model_forward" / "squad_head_forward.npz")
  v2_features = REFERENCE["predict"]["features"]
  v2_examples = squad.read_squad_examples(str(DATA / "squad_v2_tiny.json"), False)
  row = {(v2_examples[f["example_index"]].qas_id, f["doc_span_index"]): i
         for i, f in enumerate(v2_features)}
  results = []
  for f in features:
    i = row[(examples[f.example_index].qas_id, f.doc_span_index)]
    results.append(squad.RawResult(f.unique_id,
                                   [float(x) for x in forward["predict.start_logits"][i]],
                                   [float(x) for x in forward["predict.end_logits"][i]]))
  want, want_nbest, _ = squad.compute_predictions(examples, features, results, 5, 10, True)
  assert ours == want
  for qid in want_nbest:
    assert [e["text"] for e in ours_nbest[qid]] == [e["text"] for e in want_nbest[qid]]
    np.testing.assert_allclose([e["start_logit"] for e in ours_nbest[qid]],
                               [e["start_logit"] for e in want_nbest[qid]], atol=1e-4)
  metrics = json.loads((tmp_path / "out" / "eval_results.json").read_text())
  assert sorted(metrics) == ["exact_match", "f1"]


@pytest.mark.slow
def test_train_predict_evaluate_v2_end_to_end(tmp_path):
  result = _run_squad("--vocab_file=%s" % VOCAB_UNCASED, "--bert_config_file=%s" % TINY.config,
                      "--init_checkpoint=%s" % TINY.ckpt, "--do_train", "--do_predict",
                      "--train_file=%s" % (DATA / "squad_v2_tiny.json"),
                      "--predict_file=%s" % (DATA / "squad_v2_tiny.json"),
                      "--version_2_with_negative", "--train_batch_size=8",
                      "--num_train_epochs=2", "--max_seq_length=64", "--doc_stride=32",
                      "--max_query_length=16", "--output_dir=%s" % (tmp_path / "out"))
  assert result.returncode == 0, result.stderr
  assert "Could not find answer" in result.stderr  # lh-10's wrong offset, as the original
  out = tmp_path / "out"
  predictions = json.loads((out / "predictions.json").read_text())
  assert len(predictions) == 21
  assert len(json.loads((out / "null_odds.json").read_text())) == 21
  metrics = json.loads((out / "eval_results.json").read_text())
  assert metrics["total"] == 21 and metrics["HasAns_total"] == 16 and "best_f1_thresh" in metrics
  assert tf.train.latest_checkpoint(str(out)).endswith("model.ckpt-5")
  bad = _run_squad("--vocab_file=%s" % VOCAB_UNCASED, "--bert_config_file=%s" % TINY.config,
                   "--do_train", "--train_file=%s" % (DATA / "squad_v2_tiny.json"),
                   "--max_seq_length=64", "--max_query_length=16",
                   "--output_dir=%s" % (tmp_path / "bad"))
  assert bad.returncode == 2 and "--version_2_with_negative" in bad.stderr


@pytest.mark.slow
def test_export_dir_writes_an_answering_savedmodel(tmp_path, script_session):
  from bert_tf import export
  args = ["--vocab_file=%s" % VOCAB_UNCASED, "--bert_config_file=%s" % TINY.config,
          "--init_checkpoint=%s" % TINY.ckpt, "--max_seq_length=64", "--doc_stride=32",
          "--max_query_length=16", "--export_dir=%s" % (tmp_path / "export"),
          "--output_dir=%s" % (tmp_path / "out")]
  run_squad = partial(run_script, "run_squad.py", shared=script_session)
  result = run_squad(*args)
  assert result.returncode == 0, result.stderr
  assert export.read_metadata(str(tmp_path / "export"))["task"] == "squad"
  model = tf.saved_model.load(str(tmp_path / "export"))
  context = "The lighthouse was built in 1851 by Thomas Whitcombe."
  out = model.signatures["serving_default"](question=tf.constant(["When was it built?"]),
                                            context=tf.constant([context]))
  start, end = int(out["start_char"][0]), int(out["end_char"][0])
  answer = out["answer"].numpy()[0].decode("utf-8")
  assert answer and context[start:end] == answer
  # Answer selection is in the graph: a re-run choosing answers otherwise replaces the export.
  again = run_squad(*args, "--max_answer_length=10", "--n_best_size=5")
  assert again.returncode == 0, again.stderr
  assert ("Replaced this run's earlier export in %s: max_answer_length was 30, now 10; "
          "n_best_size was 20, now 5." % (tmp_path / "export")) in again.stderr
  metadata = export.read_metadata(str(tmp_path / "export"))
  assert (metadata["max_answer_length"], metadata["n_best_size"]) == (10, 5)


def test_get_final_text_follows_strip_accents():
  # Predicted pieces kept the accent (a --strip_accents=false model): only a
  # BasicTokenizer that keeps it too can map them back onto "Café" without the "!".
  assert squad.get_final_text("café", "Café!", True, strip_accents=False) == "Café"
  # The original's tokenizer strips the accent, cannot align, and returns the whole word.
  assert squad.get_final_text("café", "Café!", True) == "Café!"
  assert squad.get_final_text("cafe", "Café!", True) == "Café"


@pytest.mark.slow
def test_v1_prediction_on_a_file_with_unanswerable_questions_scores_the_answerable_ones(tmp_path):
  """A v2.0 predict file in v1.1 mode: predictions for all 21, metrics over the 16 with answers."""
  result = _run_squad("--vocab_file=%s" % VOCAB_UNCASED, "--bert_config_file=%s" % TINY.config,
                      "--init_checkpoint=%s" % TINY.ckpt, "--do_predict",
                      "--predict_file=%s" % (DATA / "squad_v2_tiny.json"), "--max_seq_length=64",
                      "--doc_stride=32", "--max_query_length=16",
                      "--output_dir=%s" % (tmp_path / "out"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  assert "5 questions have no answers and are left out" in result.stderr
  assert len(json.loads((tmp_path / "out" / "predictions.json").read_text())) == 21
  metrics = json.loads((tmp_path / "out" / "eval_results.json").read_text())
  assert sorted(metrics) == ["exact_match", "f1", "skipped_without_answers"]
  assert metrics["skipped_without_answers"] == 5 and 0.0 <= metrics["exact_match"] <= metrics["f1"]
