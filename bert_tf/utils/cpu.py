"""What this machine's CPU can do, for choosing code paths by the CPU rather than by the one a
developer measured on.

TensorFlow's bfloat16 matmuls use oneDNN only on CPUs with AVX-512 (fast with AVX512-BF16 and
AMX); elsewhere they fall back to Eigen, which is slower than float32, and worst on small
batches. `python -m benchmarks.encoder_throughput --precisions=float32,bfloat16` measures it;
the figures are in docs/performance.md (inference precision).
"""

import functools
import os

# The flags that decide matmul speed, as /proc/cpuinfo names them.
MATMUL_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile",
                "amx_bf16", "amx_int8")


def parse_cpuinfo(text):
  """(model name, set of flags) of /proc/cpuinfo's text (its first processor)."""
  model, flags = "unknown CPU", set()
  for line in text.splitlines():
    key, _, value = line.partition(":")
    key = key.strip()
    if key == "model name" and model == "unknown CPU":
      model = value.strip()
    elif key == "flags" and not flags:
      flags = set(value.split())
  return model, flags


@functools.lru_cache(maxsize=None)
def info():
  """(model name, flags) of this machine ("unknown CPU", empty set where unreadable)."""
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      return parse_cpuinfo(f.read())
  except OSError:
    return "unknown CPU", frozenset()


def describe(cpu=None):
  """"<model>, <n> logical CPUs, flags avx2 fma ...": what every benchmark figure names."""
  model, flags = cpu or info()
  shown = [f for f in MATMUL_FLAGS if f in flags]
  return "%s, %d logical CPUs, flags %s" % (model, os.cpu_count() or 0,
                                            " ".join(shown) if shown else "(unknown)")


def fast_bfloat16(cpu=None):
  """Whether TensorFlow's bfloat16 matmuls run on oneDNN here (AVX-512; AMX or AVX512-BF16
  make them faster than float32) rather than on the slow Eigen fallback."""
  _, flags = cpu or info()
  return "avx512f" in flags
