"""Pretraining step throughput (BERT-Base, seq 128) against this machine's matmul peak.

    python benchmarks/pretraining_step.py [--batch_size 16 --iterations 3]

Times bert_tf's full optimizer step (forward, backward, global-norm clipping,
AdamWeightDecay) on random data, without and with XLA (`--jit_compile` of
run_pretraining), and prints sequences/s, achieved GFLOP/s (a training step is
counted as 3x the encoder's forward FLOPs) and the ratio to the float32 matmul
peak measured in the same run. Prints figures only.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bert_tf  # noqa: E402,F401
from absl import app, flags  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks.common import best_seconds, forward_flops, matmul_peak_gflops  # noqa: E402
from bert_tf import checkpoints, optimization, training  # noqa: E402
from bert_tf.config import BertConfig  # noqa: E402
from bert_tf.tasks.pretraining import PretrainingTask  # noqa: E402

FLAGS = flags.FLAGS
common.define_workload_flags(16, "Sequences per step.", 3, "Timed steps per mode.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too


def random_batch(rng, batch, seq, predictions, vocab):
  return {
      "input_word_ids": rng.integers(1000, vocab, (batch, seq)).astype(np.int32),
      "input_mask": np.ones((batch, seq), np.int32),
      "input_type_ids": np.concatenate([np.zeros((batch, seq // 2), np.int32),
                                        np.ones((batch, seq - seq // 2), np.int32)], 1),
      "masked_lm_positions": np.sort(rng.integers(1, seq, (batch, predictions)), 1).astype(np.int32),
      "masked_lm_ids": rng.integers(1000, vocab, (batch, predictions)).astype(np.int32),
      "masked_lm_weights": np.ones((batch, predictions), np.float32),
      "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype(np.int32),
  }


def time_steps(jit_compile):
  config = BertConfig(vocab_size=30522, num_hidden_layers=FLAGS.num_layers)
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
  seconds = best_seconds(lambda: float(step.step(iterator)["loss"]), FLAGS.iterations)
  return seconds, config


def main(_):
  results = {}
  for jit in (False, True):
    results[jit], config = time_steps(jit)
  flops = 3 * forward_flops(config, FLAGS.batch_size, FLAGS.seq_length)
  peak = matmul_peak_gflops(4096, dtype=FLAGS.dtype)
  print("CPU: %s" % common.cpu_info())
  print("pretraining step: L=%d H=%d, batch %d x seq %d, %d masked positions, %s" %
        (config.num_hidden_layers, config.hidden_size, FLAGS.batch_size, FLAGS.seq_length,
         FLAGS.max_predictions_per_seq, FLAGS.dtype))
  print("matmul peak (4096x4096 %s): %.1f GFLOP/s" % (FLAGS.dtype, peak))
  for jit, seconds in results.items():
    achieved = flops / seconds / 1e9
    print("jit_compile=%-5s %.2f s/step, %.2f sequences/s, %.1f GFLOP/s, %.1f%% of peak" %
          (jit, seconds, FLAGS.batch_size / seconds, achieved, 100 * achieved / peak))


if __name__ == "__main__":
  app.run(main)
