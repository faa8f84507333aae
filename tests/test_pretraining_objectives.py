"""Table 5's pre-training objectives: masked LM alone ("No NSP") and left-to-right ("LTR")."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints, optimization, training
from bert_tf.config import BertConfig
from bert_tf.data import input_pipeline
from bert_tf.tasks.pretraining import (
  LeftToRightLMModel,
  MaskedLMModel,
  PretrainingModel,
  PretrainingTask,
  unmasked_ids,
)
from helpers import FIXTURES, TINY, VOCAB_UNCASED, assert_float32_close, run_script, tiny_config


def _batch():
  return input_pipeline.to_model_names(dict(np.load(FIXTURES / "optimizer" / "batch.npz")))


def _no_dropout(causal=False):
  fields = dict(tiny_config().to_dict(), hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0)
  if causal:
    fields["causal_attention"] = True
  return BertConfig.from_dict(fields)


def test_unmasked_ids_puts_the_original_tokens_back():
  features = {"input_word_ids": np.array([[2, 103, 7, 103, 0]]),
              "masked_lm_positions": np.array([[1, 3, 0]]),
              "masked_lm_ids": np.array([[50, 60, 0]]),
              "masked_lm_weights": np.array([[1.0, 1.0, 0.0]])}
  np.testing.assert_array_equal(unmasked_ids(features).numpy(), [[2, 50, 7, 60, 0]])


def test_masked_lm_alone_is_the_masked_lm_term_of_the_original():
  batch = _batch()
  both, alone = PretrainingModel(_no_dropout()), MaskedLMModel(_no_dropout())
  checkpoints.load_checkpoint(TINY.ckpt, both.encoder, both.heads)
  checkpoints.load_checkpoint(TINY.ckpt, alone.encoder, alone.heads)
  expected = both.per_example_losses(both(batch), batch)["masked_lm"]
  got = alone.per_example_losses(alone(batch), batch)
  assert list(got) == ["masked_lm"]
  assert_float32_close(got["masked_lm"].numpy(), expected.numpy(), atol=1e-6)  # losses up to 13
  weights = batch["masked_lm_weights"].reshape(-1)
  np.testing.assert_allclose(float(alone.compute_loss(batch)),
                             (weights * expected.numpy()).sum() / (weights.sum() + 1e-5),
                             rtol=1e-6)


def test_left_to_right_loss_is_next_token_cross_entropy():
  batch = _batch()
  model = LeftToRightLMModel(_no_dropout(causal=True))
  checkpoints.load_checkpoint(TINY.ckpt, model.encoder, model.heads)
  ids = unmasked_ids(batch).numpy()
  hidden = model.encoder({"input_word_ids": ids, "input_mask": batch["input_mask"],
                          "input_type_ids": batch["input_type_ids"]})["sequence_output"]
  seq = ids.shape[1]
  positions = np.tile(np.arange(seq - 1), (ids.shape[0], 1))
  logits = model.masked_lm.logits(hidden, positions).numpy().reshape(ids.shape[0], seq - 1, -1)
  log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(
      -1, keepdims=True)) - logits.max(-1, keepdims=True)
  targets = ids[:, 1:]
  nll = -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
  weights = batch["input_mask"][:, 1:].astype(np.float32)
  expected = (weights * nll).sum() / (weights.sum() + 1e-5)
  np.testing.assert_allclose(float(model.compute_loss(batch)), expected, rtol=1e-5)


def test_left_to_right_ignores_what_the_mask_replaced_and_what_comes_later():
  batch = _batch()
  model = LeftToRightLMModel(_no_dropout(causal=True))
  base = model(batch)["lm_log_probs"].numpy()
  other = dict(batch, input_word_ids=batch["input_word_ids"].copy())
  positions, weights = batch["masked_lm_positions"], batch["masked_lm_weights"]
  for row in range(positions.shape[0]):
    for p, w in zip(positions[row], weights[row]):
      if w > 0:
        other["input_word_ids"][row, p] = 5  # another stand-in for the masked token
  assert_float32_close(model(other)["lm_log_probs"].numpy(), base, atol=1e-6)  # down to -16


def test_left_to_right_needs_a_causal_encoder():
  with pytest.raises(ValueError, match="needs a causal encoder"):
    LeftToRightLMModel(_no_dropout())


@pytest.mark.parametrize("objective, config, metrics", [
    ("mlm", _no_dropout(), {"masked_lm_loss", "masked_lm_accuracy"}),
    ("ltr", _no_dropout(causal=True), {"lm_loss", "lm_accuracy"}),
])
def test_each_objective_trains_and_evaluates(tmp_path, objective, config, metrics):
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  task = PretrainingTask(config, objective=objective)
  trainer = training.Trainer(strategy, task, str(tmp_path),
                             lambda names: optimization.create_optimizer(1e-3, 4, 1, names),
                             init_checkpoint=TINY.ckpt)
  dataset = tf.data.Dataset.from_tensors(_batch()).repeat()
  first = trainer.evaluate(dataset.take(1))
  trainer.train(dataset, num_train_steps=3, save_checkpoints_steps=10)
  last = trainer.evaluate(dataset.take(1))
  assert set(first) == metrics | {"loss", "global_step"}
  assert last["loss"] < first["loss"]  # three steps on one batch lower its loss


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("records") / "a.tfrecord")
  result = run_script("create_pretraining_data.py",
                      "--input_file=%s" % (FIXTURES / "pretraining_data" / "corpus.txt"),
                      "--output_file=%s" % path, "--vocab_file=%s" % VOCAB_UNCASED,
                      "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=1")
  assert result.returncode == 0, result.stderr
  return path


@pytest.mark.slow
@pytest.mark.parametrize("objective, names", [
    ("mlm", ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss"]),
    ("ltr", ["global_step", "lm_accuracy", "lm_loss", "loss"]),
])
def test_run_pretraining_objective_and_fine_tuning_its_checkpoint(records, tmp_path, objective,
                                                                  names):
  out = tmp_path / "pretrained"
  result = run_script("run_pretraining.py", "--input_file=%s" % records,
                      "--output_dir=%s" % out, "--bert_config_file=%s" % TINY.config,
                      "--init_checkpoint=%s" % TINY.ckpt, "--max_seq_length=64",
                      "--max_predictions_per_seq=10", "--train_batch_size=4",
                      "--num_train_steps=2", "--num_warmup_steps=1", "--do_train", "--do_eval",
                      "--eval_batch_size=4", "--max_eval_steps=2",
                      "--pretraining_objective=%s" % objective)
  assert result.returncode == 0, result.stderr[-3000:]
  lines = (out / "eval_results.txt").read_text().splitlines()
  assert [line.split(" = ")[0] for line in lines] == names
  written = BertConfig.from_json_file(str(out / "bert_config.json"))
  assert written.causal_attention == (objective == "ltr")
  reader = tf.train.load_checkpoint(str(out / "model.ckpt-2"))
  assert not any(n.startswith("cls/seq_relationship") for n in reader.get_variable_to_shape_map())
  fine_tuned = run_script(
      "run_classifier.py", "--task_name=MRPC",
      "--data_dir=%s" % (FIXTURES / "classifier_data" / "MRPC"), "--vocab_file=%s" % VOCAB_UNCASED,
      "--bert_config_file=%s" % (out / "bert_config.json"),
      "--init_checkpoint=%s" % (out / "model.ckpt-2"), "--max_seq_length=32",
      "--train_batch_size=4", "--num_train_epochs=1", "--do_train",
      "--output_dir=%s" % (tmp_path / "mrpc"))
  assert fine_tuned.returncode == 0, fine_tuned.stderr[-3000:]
  assert "causal_attention" in (tmp_path / "mrpc" / "training_state" / "settings.json").read_text(
  ) or objective != "ltr"
