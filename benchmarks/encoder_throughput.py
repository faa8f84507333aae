"""Encoder forward throughput against this machine's matmul peak in the same type.

    python benchmarks/encoder_throughput.py [--dtype=float32|bfloat16 --batch_size 32 ...]

Builds BERT-Base (random weights) and times the inference forward pass; measures
the matmul peak of --dtype with large square matmuls in the same process, and prints
sequences/s, achieved GFLOP/s and the ratio to the peak. Both are best-of-N timings
(the peak itself varies by about 10% between runs on a shared 2-core machine).
Prints figures only.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # noqa: E402

import bert_tf  # noqa: E402,F401  (TensorFlow environment defaults)
from absl import app, flags  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks.common import best_seconds, forward_flops, matmul_peak_gflops  # noqa: E402
from bert_tf.config import BertConfig  # noqa: E402
from bert_tf.modeling import BertModel  # noqa: E402

FLAGS = flags.FLAGS
common.define_workload_flags(32, "Sequences per forward pass.", 5, "Timed forward passes.")
flags.DEFINE_integer("hidden_size", 768, "Hidden size (BERT-Base: 768).")
flags.DEFINE_integer("num_heads", 12, "Attention heads (BERT-Base: 12).")
flags.DEFINE_integer("intermediate_size", 3072, "Feed-forward size (BERT-Base: 3072).")
flags.DEFINE_integer("matmul_size", 4096, "Side of the square matrices used to measure the peak.")
flags.DEFINE_bool("jit_compile", True, "Compile the forward pass with XLA (the default of bert_tf's "
                  "inference paths; --nojit_compile measures plain graph mode).")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too


def main(_):
  config = BertConfig(vocab_size=30522, hidden_size=FLAGS.hidden_size,
                      num_hidden_layers=FLAGS.num_layers, num_attention_heads=FLAGS.num_heads,
                      intermediate_size=FLAGS.intermediate_size)
  model = BertModel(config, dtype=common.dtype_policy())
  rng = np.random.default_rng(0)
  shape = (FLAGS.batch_size, FLAGS.seq_length)
  inputs = {
      "input_word_ids": tf.constant(rng.integers(1000, 30000, shape), tf.int32),
      "input_mask": tf.ones(shape, tf.int32),
      "input_type_ids": tf.zeros(shape, tf.int32),
  }
  forward = tf.function(lambda x: model(x, training=False)["sequence_output"],
                        jit_compile=FLAGS.jit_compile)
  seconds = best_seconds(lambda: forward(inputs).numpy(), FLAGS.iterations)
  flops = forward_flops(config, FLAGS.batch_size, FLAGS.seq_length)
  achieved = flops / seconds / 1e9
  peak = matmul_peak_gflops(FLAGS.matmul_size, dtype=FLAGS.dtype)
  print("CPU: %s" % common.cpu_info())
  print("encoder: L=%d H=%d A=%d I=%d, batch %d x seq %d, %s, jit_compile=%s" %
        (config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
         config.intermediate_size, FLAGS.batch_size, FLAGS.seq_length, FLAGS.dtype,
         FLAGS.jit_compile))
  print("oneDNN: TF_ENABLE_ONEDNN_OPTS=%s, threads: %d" %
        (os.environ.get("TF_ENABLE_ONEDNN_OPTS"), os.cpu_count()))
  print("forward: %.3f s per batch (best of %d), %.2f sequences/s" %
        (seconds, FLAGS.iterations, FLAGS.batch_size / seconds))
  print("achieved: %.1f GFLOP/s (%.1f GFLOP per sequence)" %
        (achieved, flops / FLAGS.batch_size / 1e9))
  print("matmul peak (%dx%d %s): %.1f GFLOP/s" % (FLAGS.matmul_size, FLAGS.matmul_size,
                                                  FLAGS.dtype, peak))
  print("ratio to peak: %.1f%%" % (100 * achieved / peak))


if __name__ == "__main__":
  app.run(main)
