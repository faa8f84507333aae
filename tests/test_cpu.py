"""CPU features read from /proc/cpuinfo decide the bfloat16 advice."""

from bert_tf.utils import cpu

AMD = """processor\t: 0
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 avx f16c avx2 fma bmi2
processor\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 avx f16c avx2 fma bmi2
"""
SAPPHIRE = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: avx avx2 fma avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8
"""


def test_parse_and_describe():
  model, flags = cpu.parse_cpuinfo(AMD)
  assert model == "AMD EPYC" and {"avx2", "fma"} <= flags and "avx512f" not in flags
  assert cpu.describe((model, flags)).endswith("flags avx avx2 fma")
  text = cpu.describe(cpu.parse_cpuinfo(SAPPHIRE))
  assert text.endswith("avx512f avx512_bf16 avx512_vnni amx_tile amx_bf16 amx_int8")
  assert text.startswith("Intel(R) Xeon")


def test_bfloat16_is_fast_only_with_avx512():
  assert not cpu.fast_bfloat16(cpu.parse_cpuinfo(AMD))
  assert cpu.fast_bfloat16(cpu.parse_cpuinfo(SAPPHIRE))
  assert not cpu.fast_bfloat16(cpu.parse_cpuinfo("garbage"))
