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
  """The size and repeats of the BERT-Base timings against the matmul peak."""
  flags.DEFINE_integer("batch_size", batch_size, batch_size_help)
  flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
  flags.DEFINE_integer("num_layers", 12, "Encoder layers (BERT-Base: 12).")
  flags.DEFINE_integer("iterations", iterations, iterations_help)


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


# The CPU features that decide float32 matmul speed (what oneDNN and PyTorch pick kernels by).
_MATMUL_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile",
                 "amx_bf16")


def cpu_info():
  """"<model name>, <n> logical CPUs, flags avx2 fma ..." from /proc/cpuinfo: timings depend on
  it, so every figure printed says which CPU gave it."""
  model, flags_seen = "unknown CPU", set()
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model == "unknown CPU":
          model = value.strip()
        elif key == "flags" and not flags_seen:
          flags_seen = set(value.split())
  except OSError:
    pass
  shown = [f for f in _MATMUL_FLAGS if f in flags_seen]
  return "%s, %d logical CPUs, flags %s" % (model, os.cpu_count() or 0,
                                            " ".join(shown) if shown else "(unknown)")
