"""ONNX Runtime, in --ort_python: the transformers model of benchmarks/sides/hf.py exported with
torch.onnx and quantized, then timed in ONNX Runtime's CPU provider.

The export uses torch.onnx's dynamo exporter (onnxscript): the legacy TorchScript exporter
traced this model into a graph whose logits differed from torch's, so `export` compares the ONNX
outputs with torch's on a padded batch and returns the difference.
"""

import json
import os
import warnings

from benchmarks import sides, timing
from benchmarks.sides import hf

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def session(path, threads):
  """An ONNX Runtime CPU session of the file at `path` with `threads` intra-op threads."""
  import onnxruntime
  options = onnxruntime.SessionOptions()
  options.intra_op_num_threads = threads
  return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def export(folder, config, head, out):
  """The model (`head` "classifier": its logits, "encoder": its sequence output) exported to
  `out`/model.onnx (int64 inputs, dynamic batch and sequence axes) and quantized to
  model_int8.onnx; {"float32": path, "int8": path, "max_abs_diff": ONNX vs torch, "versions"}."""
  import numpy as np
  import onnxruntime
  from onnxruntime.quantization import QuantType, quantize_dynamic
  import torch
  model = hf.load_model(folder, config, head)

  class Outputs(torch.nn.Module):
    def __init__(self):
      super().__init__()
      self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
      result = self.model(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids)
      return result.logits if head == "classifier" else result.last_hidden_state

  ids = torch.randint(1000, 2000, (2, 8))
  mask = torch.ones_like(ids)
  mask[1, 5:] = 0
  batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
  f32, int8 = os.path.join(out, "model.onnx"), os.path.join(out, "model_int8.onnx")
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.onnx.export(Outputs(), (ids, mask, torch.zeros_like(ids)), f32,
                      input_names=list(INPUT_NAMES), output_names=["output"], dynamo=True,
                      dynamic_shapes={n: {0: batch, 1: seq} for n in INPUT_NAMES})
  quantize_dynamic(f32, int8, weight_type=QuantType.QInt8)
  rng = np.random.default_rng(1)
  ids = rng.integers(1000, 2000, (3, 17))
  mask = np.ones_like(ids)
  mask[2, 9:] = 0
  feed = dict(zip(INPUT_NAMES, (ids, mask, np.zeros_like(ids))))
  ours = session(f32, os.cpu_count()).run(None, feed)[0]
  with torch.inference_mode():
    reference = Outputs()(*(torch.tensor(feed[n]) for n in INPUT_NAMES)).numpy()
  real = mask.astype(bool) if head == "encoder" else slice(None)
  return {"float32": f32, "int8": int8,
          "max_abs_diff": float(np.abs(ours - reference)[real].max()),
          "versions": "onnxruntime %s, %s" % (onnxruntime.__version__, hf.versions())}


def encoder(path, batch, seq, vocab, iterations, threads):
  """Best seconds of the exported encoder on timing.fixed_inputs."""
  import numpy as np
  runner = session(path, threads)
  feed = dict(zip(INPUT_NAMES, (a.astype(np.int64)
                                for a in timing.fixed_inputs(batch, seq, vocab))))
  return {"seconds": timing.best_seconds(lambda: runner.run(None, feed), iterations)}


def classify(workload_file, vocab, path, threads, lower, length):
  """timing.serving_workloads of the exported classifier from raw text, with transformers'
  tokenizer (padding each batch to its longest, as hf.classify) and the softmax in numpy."""
  import numpy as np
  import transformers
  with open(workload_file, encoding="utf-8") as f:
    workload = json.load(f)
  tokenizer = transformers.BertTokenizerFast(vocab, do_lower_case=lower)
  runner = session(path, threads)

  def call(texts):
    inputs = tokenizer(texts, padding=True, truncation=True, max_length=length,
                       return_tensors="np", return_token_type_ids=True)
    logits = runner.run(None, {k: inputs[k].astype(np.int64) for k in INPUT_NAMES})[0]
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)

  return timing.serving_workloads(call, workload)


if __name__ == "__main__":
  sides.main({"export": export, "encoder": encoder, "classify": classify})
