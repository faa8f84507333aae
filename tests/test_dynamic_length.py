"""Cutting batches to their longest real sequence: the numbers equal the fixed-length path.

The goldens were computed by the original code at a fixed length; here they are
padded much further (to 64) and must come back unchanged from the cut path.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints, optimization, training
from bert_tf.config import BertConfig
from bert_tf.data import input_pipeline
from bert_tf.modeling import longest_length, trim_to_longest
from bert_tf.tasks import glue, pretraining, squad, swag
from helpers import FIXTURES, PROGRAMS, TINY, VOCAB_UNCASED, run_script, tiny_config

FORWARD = FIXTURES / "model_forward"
NODROPOUT_CONFIG = str(FIXTURES / "optimizer" / "bert_config_nodropout.json")


def _pad(features, length=64):
  """Right-pads every [B, S] sequence feature with zeros to `length`."""
  names = ("input_word_ids", "input_mask", "input_type_ids")
  return {k: np.pad(v, [(0, 0), (0, length - v.shape[1])]) if k in names else v
          for k, v in features.items()}


def test_longest_length_hand_worked():
  mask = np.array([[1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]], np.int32)
  assert int(longest_length(mask)) == 3
  assert int(longest_length(mask, bucket=4)) == 4
  assert int(longest_length(mask, bucket=16)) == 6  # never past the padded length
  assert int(longest_length(mask, min_length=np.int32(5))) == 5
  cut = trim_to_longest({"input_word_ids": mask * 7, "input_mask": mask,
                         "input_type_ids": mask * 0})
  assert cut["input_word_ids"].shape == (2, 3) and np.sum(cut["input_mask"]) == 5


def test_pretraining_heads_from_a_padded_batch_equal_the_originals():
  ref = np.load(FORWARD / "pretrain_heads_forward.npz")
  features = _pad(input_pipeline.to_model_names(
      {k[len("A.in."):]: v for k, v in ref.items() if k.startswith("A.in.")}))
  features["next_sentence_labels"] = features["next_sentence_labels"][:, None]
  model = pretraining.PretrainingModel(tiny_config(), dynamic_length=True)
  checkpoints.load_checkpoint(TINY.ckpt, model.encoder, model.heads)
  assert int(longest_length(features["input_mask"])) == 15  # 64 positions cut to 15
  out = model(features)
  np.testing.assert_allclose(out["masked_lm_log_probs"], ref["A.mlm_log_probs"], atol=1e-4)
  np.testing.assert_allclose(out["next_sentence_log_probs"], ref["A.nsp_log_probs"], atol=1e-5)


def test_a_masked_position_past_the_real_tokens_is_kept():
  features = {"input_word_ids": np.array([[101, 7, 102, 0, 0, 0, 0, 0]], np.int32),
              "input_mask": np.array([[1, 1, 1, 0, 0, 0, 0, 0]], np.int32),
              "input_type_ids": np.zeros((1, 8), np.int32),
              "masked_lm_positions": np.array([[1, 6]], np.int32)}
  fixed = pretraining.PretrainingModel(tiny_config())
  cut = pretraining.PretrainingModel(tiny_config(), dynamic_length=True)
  checkpoints.load_checkpoint(TINY.ckpt, fixed.encoder, fixed.heads)
  checkpoints.load_checkpoint(TINY.ckpt, cut.encoder, cut.heads)
  np.testing.assert_allclose(cut(features)["masked_lm_log_probs"],
                             fixed(features)["masked_lm_log_probs"], atol=1e-5)


def test_classifier_logits_from_a_padded_batch_equal_the_originals():
  ref = np.load(FORWARD / "classifier_head_forward.npz")
  model = glue.ClassifierModel(tiny_config(), num_labels=3, dynamic_length=True)
  checkpoints.load_checkpoint(TINY.ckpt, model.encoder)
  checkpoints.load_checkpoint(FIXTURES / "checkpoint" / "classifier_head_3labels" / "head.ckpt",
                              heads=model.heads)
  features = _pad(input_pipeline.to_model_names(
      {k[len("in."):]: v for k, v in ref.items() if k.startswith("in.") and k != "in.labels"}))
  np.testing.assert_allclose(model(features), ref["logits"], atol=1e-5)


def test_swag_scores_cut_per_choice_equal_the_full_length_ones():
  rng = np.random.default_rng(3)
  lengths = rng.integers(3, 20, (2, swag.NUM_CHOICES))
  mask = (np.arange(32)[None, None, :] < lengths[:, :, None]).astype(np.int32)
  features = {"input_word_ids": rng.integers(1000, 2000, mask.shape) * mask,
              "input_mask": mask, "input_type_ids": np.zeros(mask.shape, np.int32)}
  fixed = swag.MultipleChoiceModel(tiny_config())
  cut = swag.MultipleChoiceModel(tiny_config(), dynamic_length=True)
  cut.set_weights(fixed.get_weights())
  np.testing.assert_allclose(cut(features), fixed(features), atol=1e-5)


def test_squad_always_runs_at_full_length():
  assert not squad.SquadModel(tiny_config(), dynamic_length=True).dynamic_length


@pytest.mark.slow
def test_training_steps_on_a_padded_batch_equal_the_fixed_length_steps():
  """Same losses, gradient norms and weights after 4 steps, cut or not, cut under XLA too
  (the length reaching the compiled step as a shape; no dropout)."""
  ref = np.load(FORWARD / "pretrain_heads_forward.npz")
  batch = _pad(input_pipeline.to_model_names(
      {k[len("A.in."):]: v for k, v in ref.items() if k.startswith("A.in.")}))
  batch["next_sentence_labels"] = batch["next_sentence_labels"][:, None]
  config = BertConfig.from_json_file(NODROPOUT_CONFIG)
  runs = []
  for dynamic, jit in ((False, False), (True, False), (True, True)):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    task = pretraining.PretrainingTask(config, dynamic_length=dynamic,
                                       length_bucket=16 if jit else 1)
    with strategy.scope():
      model = task.create_model()
      checkpoints.load_checkpoint(TINY.ckpt, model.encoder, model.heads)
      names = checkpoints.variable_map(model.encoder, model.heads)
      optimizer = optimization.create_optimizer(1e-3, 10, 2, names)
    step = training.TrainStep(strategy, task, model, optimizer, jit_compile=jit)
    iterator = iter(tf.data.Dataset.from_tensors(batch).repeat())
    metrics = [step.step(iterator) for _ in range(4)]
    runs.append(([float(m["loss"]) for m in metrics], [float(m["grad_norm"]) for m in metrics],
                 {n: v.numpy() for n, v in names.items()}))
  fixed_loss, fixed_norm, fixed_vars = runs[0]
  for cut_loss, cut_norm, cut_vars in runs[1:]:
    np.testing.assert_allclose(cut_loss, fixed_loss, atol=1e-5)
    np.testing.assert_allclose(cut_norm, fixed_norm, atol=1e-4)
    for name in fixed_vars:
      np.testing.assert_allclose(cut_vars[name], fixed_vars[name], atol=1e-5, err_msg=name)


@pytest.mark.slow
def test_xla_training_compiles_once_per_length_bucket(tmp_path):
  """Cut batches under --jit_compile: XLA compiles the forward/backward once per bucket (it
  compiled it again for every batch while the length came from the mask inside it)."""
  dump = tmp_path / "xla_dump"
  env = {"XLA_FLAGS": "--xla_dump_to=%s" % dump, "TF_CPP_MIN_LOG_LEVEL": "2"}
  result = run_script(PROGRAMS + "xla_bucket_steps.py", env=env, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  compiled = [f for f in os.listdir(dump)
              if "replica_gradients" in f and f.endswith("before_optimizations.txt")]
  assert len(compiled) == 2, compiled  # buckets 32 and 48


def _results(path):
  return {k: float(v) for k, v in (l.split(" = ") for l in path.read_text().splitlines())}


@pytest.mark.slow
def test_run_classifier_cut_equals_padded_run(tmp_path):
  """Fine-tuning, eval and predict through the runner: the same numbers either way."""
  outputs = []
  for name, extra in (("padded", ["--pad_to_max_seq_length"]), ("cut", [])):
    out = tmp_path / name
    result = run_script(
        "run_classifier.py", "--task_name=MRPC",
        "--data_dir=%s" % (FIXTURES / "classifier_data" / "MRPC"),
        "--bert_config_file=%s" % NODROPOUT_CONFIG, "--vocab_file=%s" % VOCAB_UNCASED,
        "--init_checkpoint=%s" % TINY.ckpt, "--output_dir=%s" % out, "--max_seq_length=64",
        "--do_train", "--do_predict", "--train_batch_size=4", "--num_train_epochs=2",
        "--learning_rate=1e-3", "--iterations_per_loop=1", *extra)
    assert result.returncode == 0, result.stderr[-3000:]
    losses = [float(l.rsplit("loss ", 1)[1].split(",")[0]) for l in result.stderr.splitlines()
              if "] step " in l and "loss " in l]
    reader = tf.train.load_checkpoint(str(out / "model.ckpt-6"))
    weights = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
               if n.startswith(("bert/", "output_"))}
    predictions = np.loadtxt(out / "test_results.tsv")
    outputs.append((losses, weights, predictions))
  (losses_a, weights_a, pred_a), (losses_b, weights_b, pred_b) = outputs
  assert len(losses_a) == 6
  np.testing.assert_allclose(losses_b, losses_a, atol=1e-5)
  for name in weights_a:
    np.testing.assert_allclose(weights_b[name], weights_a[name], atol=1e-5, err_msg=name)
  np.testing.assert_allclose(pred_b, pred_a, atol=1e-5)
