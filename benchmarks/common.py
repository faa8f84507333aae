"""Shared by the benchmarks: their common flags, the model of the Hugging Face comparisons,
running the other side in its own interpreter, FLOP counts and this machine's float32 matmul
peak."""

import json
import os
import subprocess
import sys
import time

from absl import flags
import tensorflow as tf

# all-MiniLM-L6-v2's shape (6 layers, hidden 384): the model of the serving and
# fine-tuning comparisons when no checkpoint is given.
MINILM_L6 = {"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
             "num_attention_heads": 12, "intermediate_size": 1536, "max_position_embeddings": 512,
             "type_vocab_size": 2}


def define_workload_flags(batch_size, batch_size_help, iterations, iterations_help):
  """The size, precision and repeats of the BERT-Base timings against the matmul peak."""
  flags.DEFINE_integer("batch_size", batch_size, batch_size_help)
  flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
  flags.DEFINE_integer("num_layers", 12, "Encoder layers (BERT-Base: 12).")
  flags.DEFINE_integer("iterations", iterations, iterations_help)
  flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"],
                    "Compute type: float32, or bfloat16 (Keras mixed_bfloat16: matmuls in "
                    "bfloat16, variables and LayerNorm in float32). The peak printed is the "
                    "matmul peak of the same type.")


def dtype_policy():
  """The Keras dtype policy of --dtype (None: float32)."""
  return "mixed_bfloat16" if flags.FLAGS.dtype == "bfloat16" else None


def define_hf_comparison_flags():
  """The model (MiniLM-L6-shaped and random by default) and the transformers side of the
  comparisons with Hugging Face."""
  flags.DEFINE_string("bert_config_file", None, "Model config (default: MiniLM-L6 shape).")
  flags.DEFINE_string("init_checkpoint", None, "Google-layout checkpoint or HF folder.")
  flags.DEFINE_string("hf_python", None, "A Python with torch + transformers, for the comparison.")
  flags.DEFINE_string("hf_model_dir", None, "HF folder with the same weights (else random).")


def comparison_config():
  """The BertConfig of --bert_config_file, else MiniLM-L6's shape."""
  from bert_tf.config import BertConfig
  config_file = flags.FLAGS.bert_config_file
  return BertConfig.from_json_file(config_file) if config_file else BertConfig(**MINILM_L6)


def hf_config(config):
  """The fields of `config` that transformers' BertConfig takes, for its random model."""
  return {k: v for k, v in config.to_dict().items() if k in MINILM_L6}


def run_json_script(python, script, *args, env=None, failure="measurement failed"):
  """`python -c script *args` without PYTHONPATH (another interpreter must not import this
  checkout), with `env` added; the JSON of its last output line. Exits if it fails."""
  environment = dict(os.environ, **(env or {}))
  environment.pop("PYTHONPATH", None)
  result = subprocess.run([python, "-c", script, *args], capture_output=True, text=True,
                          env=environment)
  if result.returncode:
    sys.exit("%s:\n%s" % (failure, result.stderr[-3000:]))
  return json.loads(result.stdout.strip().splitlines()[-1])


def forward_flops(config, batch, seq):
  """Multiply-adds x 2 of the encoder: projections, FFN and the two attention matmuls."""
  hidden, intermediate = config.hidden_size, config.intermediate_size
  per_token_dense = 2 * (4 * hidden * hidden + 2 * hidden * intermediate)
  attention = 2 * 2 * seq * seq * hidden
  return batch * config.num_hidden_layers * (seq * per_token_dense + attention)


# latency_stats as source text: the timing loops run in other interpreters too (a plain
# TensorFlow process, the peers' virtualenvs), which cannot import this module.
LATENCY_STATS_SOURCE = r'''
import statistics

def latency_stats(seconds, items):
  """p50/p99 milliseconds and items per second of a list of request times in seconds."""
  seconds = sorted(seconds)
  median = statistics.median(seconds)
  return {"p50_ms": 1000 * median,
          "p99_ms": 1000 * seconds[min(len(seconds) - 1, int(0.99 * len(seconds)))],
          "per_second": items / median}
'''


def best_seconds(fn, repeats):
  """Fastest of `repeats` calls (after one warm-up call): the machine's capability."""
  fn()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - start)
  return best


def matmul_peak_gflops(n=4096, repeats=5, dtype="float32"):
  """GFLOP/s of one large square matmul in `dtype`, best of `repeats`: the fair peak of a
  workload in that type (bfloat16 runs at several times float32's speed where the CPU has
  AMX or AVX512-BF16, and slower than it where the CPU has neither)."""
  a = tf.cast(tf.random.normal((n, n)), dtype)
  b = tf.cast(tf.random.normal((n, n)), dtype)
  matmul = tf.function(lambda x, y: tf.matmul(x, y))
  return 2 * n ** 3 / best_seconds(lambda: matmul(a, b).numpy(), repeats) / 1e9


def cpu_info():
  """The CPU that gave a figure: every benchmark prints it (bert_tf.cpu.describe)."""
  from bert_tf import cpu
  return cpu.describe()
