"""The peers of the speed comparisons, run in their own interpreters (which have no bert_tf):
Hugging Face transformers on PyTorch (--hf_python) in float32, bfloat16 and dynamic int8, and
the same transformers model exported with torch.onnx and run by ONNX Runtime (--ort_python) in
float32 and dynamic int8.

What each peer precision is, chosen as the counterpart of bert_tf.utils.precision.for_inference:
  * HF bfloat16: `torch.autocast("cpu", dtype=torch.bfloat16)` around the float32 model
    (float32 weights, bfloat16 matmuls, LayerNorm and softmax in float32), as Keras'
    mixed_bfloat16 policy;
  * HF int8: `torch.ao.quantization.quantize_dynamic` of the encoder's nn.Linear layers to
    qint8 (weights int8, activations quantized per call); the classifier layer stays float32
    as bert_tf's heads do;
  * ONNX Runtime int8: `onnxruntime.quantization.quantize_dynamic` with QInt8 weights of the
    float32 export (ONNX Runtime has no bfloat16 CPU path, so no bfloat16 row).
The code they run is in benchmarks/sides (hf.py, ort.py, mediapipe_tasks.py), started by
common.run_side.
"""

import sys

from absl import flags

from benchmarks import common

# The modules each peer's interpreter must import (pip installs them under the same names).
HF_MODULES = ("torch", "transformers")
ORT_MODULES = ("onnxruntime", "onnx", "onnxscript", "torch", "transformers")
MEDIAPIPE_MODULES = ("mediapipe.tasks.python.text",)


def check_python(flag, python, modules, install=None):
  """Exits with one line unless `python` runs and imports every one of `modules` (`install`:
  what to pip install where the names differ)."""
  try:
    missing = common.run_side(python, "imports", "missing", {"modules": list(modules)})
  except OSError as e:
    sys.exit("--%s=%s: cannot run it (%s)." % (flag, python, e.strerror or e))
  except SystemExit as e:  # the side failed: not a Python that runs this checkout's modules
    said = str(e.code).split("\n", 1)[1].strip().splitlines()  # after run_side's first line
    sys.exit("--%s=%s: not a working Python (%s)." % (flag, python, (said or ["no output"])[-1]))
  if missing:
    sys.exit("--%s=%s: cannot import %s (pip install %s in that venv)." %
             (flag, python, ", ".join(missing), install or " ".join(missing)))


def check_flags(flag_values):
  """Checks the peers' interpreters the flags name before anything slow runs."""
  if flag_values.hf_python:
    check_python("hf_python", flag_values.hf_python, HF_MODULES)
  if getattr(flag_values, "ort_python", None):
    check_python("ort_python", flag_values.ort_python, ORT_MODULES)
  if getattr(flag_values, "mediapipe_python", None):
    check_python("mediapipe_python", flag_values.mediapipe_python, MEDIAPIPE_MODULES,
                 "mediapipe==0.10.21")


def hf_env():
  """The environment of the torch peer's timing processes (see --hf_passive_omp)."""
  return {"OMP_WAIT_POLICY": "PASSIVE"} if flags.FLAGS.hf_passive_omp else {}


def hf_note():
  """How the torch peer's threads waited, for its line in the output."""
  policy = hf_env().get("OMP_WAIT_POLICY")
  return "OMP_WAIT_POLICY=%s" % policy if policy else "torch's default OpenMP waiting"


def export_onnx(python, hf_folder, config, head, out_dir):
  """The transformers model exported to ONNX float32 and dynamic int8 by `python` in
  `out_dir`: {"float32": path, "int8": path, "max_abs_diff": export vs torch, "versions"}."""
  return common.run_side(python, "ort", "export",
                         {"folder": hf_folder or "-", "config": common.hf_config(config),
                          "head": head, "out": out_dir},
                         failure="torch.onnx export in --ort_python failed")


def ort_note(onnx, what, threads, precisions):
  """The ONNX Runtime side's line in the output: versions, how the export compares with torch
  (`what` it compared), quantization and threads."""
  return ("ORT: %s; torch.onnx dynamo export (%smax abs diff vs torch %.1e), int8 = onnxruntime "
          "quantize_dynamic(QInt8), %s intra-op threads%s" %
          (onnx["versions"], what, onnx["max_abs_diff"], threads,
           "; no bfloat16 row" if "bfloat16" in precisions else ""))


def speedup(slow, fast):
  """How many times faster `fast` is than `slow` (two times, or two rates swapped), as the
  figures in "x" give it: above 1, `fast` is faster; None where either is missing."""
  return slow / fast if slow and fast else None
