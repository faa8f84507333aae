"""The peers of the speed comparisons, run in their own interpreters (which have no bert_tf):
Hugging Face transformers on PyTorch (--hf_python) in float32, bfloat16 and dynamic int8, and
the same transformers model exported with torch.onnx and run by ONNX Runtime (--ort_python) in
float32 and dynamic int8.

What each peer precision is, chosen as the counterpart of bert_tf.precision.for_inference:
  * HF bfloat16: `torch.autocast("cpu", dtype=torch.bfloat16)` around the float32 model
    (float32 weights, bfloat16 matmuls, LayerNorm and softmax in float32), as Keras'
    mixed_bfloat16 policy;
  * HF int8: `torch.ao.quantization.quantize_dynamic` of the encoder's nn.Linear layers to
    qint8 (weights int8, activations quantized per call); the classifier layer stays float32
    as bert_tf's heads do;
  * ONNX Runtime int8: `onnxruntime.quantization.quantize_dynamic` with QInt8 weights of the
    float32 export (ONNX Runtime has no bfloat16 CPU path, so no bfloat16 row).
The export uses torch.onnx's dynamo exporter (onnxscript): in torch 2.13 the legacy
TorchScript exporter traced this model into a graph whose logits differed from torch's by
0.04, so the export script checks the ONNX logits against torch's on a padded batch and
prints the difference.
"""

import json
import subprocess
import sys

from absl import flags

from benchmarks import common

# The modules each peer's interpreter must import (pip installs them under the same names).
HF_MODULES = ("torch", "transformers")
ORT_MODULES = ("onnxruntime", "onnx", "onnxscript", "torch", "transformers")
MEDIAPIPE_MODULES = ("mediapipe.tasks.python.text",)

_IMPORT_CHECK = r'''
import importlib, json, sys
missing = []
for name in sys.argv[1:]:
  try:
    importlib.import_module(name)
  except Exception:  # a broken install is as missing as an absent one
    missing.append(name)
print(json.dumps(missing))
'''


def check_python(flag, python, modules, install=None):
  """Exits with one line unless `python` runs and imports every one of `modules` (`install`:
  what to pip install where the names differ)."""
  try:
    result = subprocess.run([python, "-c", _IMPORT_CHECK, *modules], capture_output=True,
                            text=True)
  except OSError as e:
    sys.exit("--%s=%s: cannot run it (%s)." % (flag, python, e.strerror or e))
  try:
    missing = json.loads(result.stdout.strip().splitlines()[-1])
  except (IndexError, ValueError):
    sys.exit("--%s=%s: not a working Python (%s)." %
             (flag, python, (result.stderr.strip().splitlines() or ["no output"])[-1]))
  if missing:
    sys.exit("--%s=%s: cannot import %s (pip install %s in that venv)." %
             (flag, python, ", ".join(missing), install or " ".join(missing)))


# The transformers model in the peer interpreter: `load_model(folder, config_json, head)`
# (folder "-": random weights of the config; head "classifier" or "encoder") and
# `hf_precision(model, precision)` -> (model, context manager to call it in).
MODEL_SOURCE = r'''
import contextlib, json, warnings
import torch, transformers

def load_model(folder, config_json, head):
  torch.manual_seed(0)
  if head == "classifier":
    cls, extra = transformers.BertForSequenceClassification, {"num_labels": 2}
  else:
    cls, extra = transformers.BertModel, {}
  if folder != "-":
    model = cls.from_pretrained(folder, **extra)
  else:
    model = cls(transformers.BertConfig(**json.loads(config_json), **extra))
  return model.eval()

def hf_precision(model, precision):
  if precision == "bfloat16":
    return model, lambda: torch.autocast("cpu", dtype=torch.bfloat16)
  if precision == "int8":
    with warnings.catch_warnings():  # torch.ao's deprecation notice (moving to torchao)
      warnings.simplefilter("ignore")
      if hasattr(model, "bert"):  # the encoder only, as bert_tf's int8
        model.bert = torch.ao.quantization.quantize_dynamic(model.bert, {torch.nn.Linear},
                                                            dtype=torch.qint8)
      else:
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear},
                                                       dtype=torch.qint8)
  return model, contextlib.nullcontext

def versions():
  return "transformers %s, torch %s" % (transformers.__version__, torch.__version__)
'''

# Runs in --ort_python: exports the transformers model (argv: folder|-, config JSON, head,
# output folder) with inputs input_ids, attention_mask, token_type_ids (int64, dynamic batch
# and sequence axes), quantizes it, and prints {"float32": path, "int8": path, ...}.
ORT_EXPORT_SCRIPT = MODEL_SOURCE + r'''
import os, sys
import numpy as np, onnxruntime
from onnxruntime.quantization import QuantType, quantize_dynamic

folder, config_json, head, out = sys.argv[1:5]
model = load_model(folder, config_json, head)

class Wrapped(torch.nn.Module):
  def __init__(self, model):
    super().__init__()
    self.model = model

  def forward(self, input_ids, attention_mask, token_type_ids):
    out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                     token_type_ids=token_type_ids)
    return out.logits if head == "classifier" else out.last_hidden_state

names = ["input_ids", "attention_mask", "token_type_ids"]
ids = torch.randint(1000, 2000, (2, 8))
mask = torch.ones_like(ids)
mask[1, 5:] = 0
batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
f32 = os.path.join(out, "model.onnx")
with warnings.catch_warnings():
  warnings.simplefilter("ignore")
  torch.onnx.export(Wrapped(model), (ids, mask, torch.zeros_like(ids)), f32, input_names=names,
                    output_names=["output"], dynamo=True,
                    dynamic_shapes={n: {0: batch, 1: seq} for n in names})
int8 = os.path.join(out, "model_int8.onnx")
quantize_dynamic(f32, int8, weight_type=QuantType.QInt8)

rng = np.random.default_rng(1)
ids = rng.integers(1000, 2000, (3, 17))
mask = np.ones_like(ids)
mask[2, 9:] = 0
feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
ort = onnxruntime.InferenceSession(f32, providers=["CPUExecutionProvider"]).run(None, feed)[0]
with torch.inference_mode():
  ref = Wrapped(model)(*(torch.tensor(feed[n]) for n in names)).numpy()
real = mask.astype(bool) if head == "encoder" else slice(None)
print(json.dumps({"float32": f32, "int8": int8,
                  "max_abs_diff": float(np.abs(ort - ref)[real].max()),
                  "versions": "onnxruntime %s, %s" % (onnxruntime.__version__, versions())}))
'''

# In --ort_python: `ort_session(path, threads)`, an ONNX Runtime CPU session using `threads`
# intra-op threads (os.cpu_count(), as TensorFlow and torch here).
ORT_SESSION_SOURCE = r'''
import onnxruntime

def ort_session(path, threads):
  options = onnxruntime.SessionOptions()
  options.intra_op_num_threads = threads
  return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
'''


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
  return common.run_json_script(python, ORT_EXPORT_SCRIPT, hf_folder or "-",
                                json.dumps(common.hf_config(config)), head, out_dir,
                                failure="torch.onnx export in --ort_python failed")


def ort_note(onnx, what, threads, precisions):
  """The ONNX Runtime side's line in the output: versions, how the export compares with torch
  (`what` it compared), quantization and threads."""
  return ("ORT: %s; torch.onnx dynamo export (%smax abs diff vs torch %.1e), int8 = onnxruntime "
          "quantize_dynamic(QInt8), %s intra-op threads%s" %
          (onnx["versions"], what, onnx["max_abs_diff"], threads,
           "; no bfloat16 row" if "bfloat16" in precisions else ""))


def speedup(ours, theirs):
  """bert_tf's speed over a peer's, as printed: '1.23x' (above 1: bert_tf is faster)."""
  return "%.2fx" % (ours / theirs) if ours and theirs else "-"
