"""Shared by the benchmarks: FLOP counts and this machine's float32 matmul peak."""

import time

# all-MiniLM-L6-v2's shape (6 layers, hidden 384): the model of the serving and
# fine-tuning comparisons when no checkpoint is given.
MINILM_L6 = {"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
             "num_attention_heads": 12, "intermediate_size": 1536, "max_position_embeddings": 512,
             "type_vocab_size": 2}

import tensorflow as tf


def forward_flops(batch, seq, layers, hidden, intermediate):
  """Multiply-adds x 2 of the encoder: projections, FFN and the two attention matmuls."""
  per_token_dense = 2 * (4 * hidden * hidden + 2 * hidden * intermediate)
  attention = 2 * 2 * seq * seq * hidden
  return batch * layers * (seq * per_token_dense + attention)


def best_seconds(fn, repeats):
  """Fastest of `repeats` calls (after one warm-up call): the machine's capability."""
  fn()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - start)
  return best


def matmul_peak_gflops(n=4096, repeats=5):
  """float32 GFLOP/s of one large square matmul, best of `repeats`."""
  a = tf.random.normal((n, n))
  b = tf.random.normal((n, n))
  matmul = tf.function(lambda x, y: tf.matmul(x, y))
  return 2 * n ** 3 / best_seconds(lambda: matmul(a, b).numpy(), repeats) / 1e9
