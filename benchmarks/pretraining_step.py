"""Pretraining step throughput (BERT-Base, seq 128) against this machine's matmul peak.

    python -m benchmarks.pretraining_step [--batch_size 16 --iterations 3]
        [--bert_config_file=bert_config.json | --num_layers=12]

Times bert_tf's full optimizer step (forward, backward, global-norm clipping,
AdamWeightDecay) on random data, without and with XLA (`--jit_compile` of
run_pretraining; --jit_compile / --nojit_compile time only one), and prints
sequences/s, achieved GFLOP/s (a training step is counted as 3x the encoder's
forward FLOPs) and the ratio to the matmul peak of --dtype measured in the same
run. Prints figures only (common.Results).
"""

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import app, flags
import numpy as np
import tensorflow as tf

from benchmarks import common, timing
from bert_tf import checkpoints, optimization, training
from bert_tf.config import BertConfig
from bert_tf.tasks.pretraining import PretrainingTask

FLAGS = flags.FLAGS
common.define_workload_flags(16, "Sequences per step.", 3, "Timed steps per mode.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_string("bert_config_file", None, "The model's shape (default: BERT-Base's with "
                    "--num_layers layers).")
common.define_jit_compile_flag("training step", "both, a row each")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too


def random_batch(rng, batch, seq, predictions, vocab):
  """Pretraining features of random ids, every position real, half of each pair segment B."""
  return {
      "input_word_ids": rng.integers(1000, vocab, (batch, seq)).astype(np.int32),
      "input_mask": np.ones((batch, seq), np.int32),
      "input_type_ids": np.concatenate([np.zeros((batch, seq // 2), np.int32),
                                        np.ones((batch, seq - seq // 2), np.int32)], 1),
      "masked_lm_positions": np.sort(rng.integers(1, seq, (batch, predictions)),
                                     1).astype(np.int32),
      "masked_lm_ids": rng.integers(1000, vocab, (batch, predictions)).astype(np.int32),
      "masked_lm_weights": np.ones((batch, predictions), np.float32),
      "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype(np.int32),
  }


def model_config():
  if FLAGS.bert_config_file:
    return BertConfig.from_json_file(FLAGS.bert_config_file)
  return BertConfig(vocab_size=30522, num_hidden_layers=FLAGS.num_layers)


def time_steps(config, jit_compile):
  """Best seconds of a full optimizer step, under XLA or in the graph executor."""
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  task = PretrainingTask(config, dtype=common.dtype_policy())
  with strategy.scope():
    model = task.create_model()
    names = checkpoints.variable_map(model.encoder, model.heads)
    optimizer = optimization.create_optimizer(1e-4, 1000, 10, names)
  step = training.TrainStep(strategy, task, model, optimizer, jit_compile=jit_compile)
  batch = random_batch(np.random.default_rng(0), FLAGS.batch_size, FLAGS.seq_length,
                       FLAGS.max_predictions_per_seq, config.vocab_size)
  iterator = iter(tf.data.Dataset.from_tensors(batch).repeat())
  return timing.best_seconds(lambda: float(step.step(iterator)["loss"]), FLAGS.iterations)


def main(_):
  config = model_config()
  modes = (False, True) if FLAGS.jit_compile is None else (FLAGS.jit_compile,)
  seconds = {jit: time_steps(config, jit) for jit in modes}
  flops = 3 * common.forward_flops(config, FLAGS.batch_size, FLAGS.seq_length)
  peak = common.matmul_peak_gflops(FLAGS.matmul_size, dtype=FLAGS.dtype)
  results = common.Results("pretraining_step", {
      "layers": config.num_hidden_layers, "hidden": config.hidden_size,
      "batch_size": FLAGS.batch_size, "seq_length": FLAGS.seq_length,
      "max_predictions_per_seq": FLAGS.max_predictions_per_seq, "dtype": FLAGS.dtype,
      "iterations": FLAGS.iterations})
  results.add("matmul peak %s" % FLAGS.dtype, {"peak": (peak, "GFLOP/s")},
              {"matmul": "%dx%d" % (FLAGS.matmul_size, FLAGS.matmul_size)})
  results.note("full optimizer step on random data, best of %d; a step counts 3x the encoder's "
               "forward FLOPs; %% of peak: of the matmul peak above" % FLAGS.iterations)
  for jit, s in seconds.items():
    achieved = flops / s / 1e9
    results.add("jit_compile=%s" % jit, {
        "time": (s, "s/step"), "throughput": (FLAGS.batch_size / s, "sequences/s"),
        "achieved": (achieved, "GFLOP/s"), "of peak": (100 * achieved / peak, "%")},
                {"mode": common.mode_name(jit)})
  results.report()


if __name__ == "__main__":
  app.run(main)
