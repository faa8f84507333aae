"""Hugging Face transformers on PyTorch, in --hf_python: the peer of the encoder, serving,
fine-tuning and parity benchmarks (benchmarks/peers.py says what its precisions are).

A model is `folder` (an HF folder, or "-" for random weights of `config`, a dict of
transformers' BertConfig fields), seeded so that every process builds the same one.
"""

import contextlib
import json
import warnings

from benchmarks import sides, timing


def load_model(folder, config, head):
  """transformers' BertForSequenceClassification (head "classifier", 2 labels) or BertModel
  (head "encoder"), in eval mode."""
  import torch
  import transformers
  torch.manual_seed(0)
  if head == "classifier":
    cls, extra = transformers.BertForSequenceClassification, {"num_labels": 2}
  else:
    cls, extra = transformers.BertModel, {}
  if folder != "-":
    return cls.from_pretrained(folder, **extra).eval()
  return cls(transformers.BertConfig(**config, **extra)).eval()


def hf_precision(model, precision):
  """(model, a context manager to call it in) computing in `precision`: bfloat16 autocast over
  float32 weights, or the encoder's nn.Linear layers quantized dynamically to qint8."""
  import torch
  if precision == "bfloat16":
    return model, lambda: torch.autocast("cpu", dtype=torch.bfloat16)
  if precision == "int8":
    with warnings.catch_warnings():  # torch.ao's deprecation notice (moving to torchao)
      warnings.simplefilter("ignore")
      quantize = lambda m: torch.ao.quantization.quantize_dynamic(m, {torch.nn.Linear},
                                                                  dtype=torch.qint8)
      if hasattr(model, "bert"):  # the encoder only, as bert_tf's int8 keeps heads float32
        model.bert = quantize(model.bert)
      else:
        model = quantize(model)
  return model, contextlib.nullcontext


def versions():
  import torch
  import transformers
  return "transformers %s, torch %s" % (transformers.__version__, torch.__version__)


def encoder(folder, config, batch, seq, vocab, iterations, threads, precision):
  """Best seconds of BertModel's forward pass on timing.fixed_inputs."""
  import torch
  torch.set_num_threads(threads)
  model, context = hf_precision(load_model(folder, config, "encoder"), precision)
  ids, mask, types = (torch.tensor(a) for a in timing.fixed_inputs(batch, seq, vocab))

  def forward():
    with torch.inference_mode(), context():
      return model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

  return {"seconds": timing.best_seconds(forward, iterations), "version": versions()}


def classify(workload_file, vocab, folder, threads, config, precision, lower, length):
  """timing.serving_workloads of the classifier from raw text: transformers' tokenizer padding
  each batch to its longest, the model, the softmax."""
  import torch
  import transformers
  torch.set_num_threads(threads)
  with open(workload_file, encoding="utf-8") as f:
    workload = json.load(f)
  tokenizer = transformers.BertTokenizerFast(vocab, do_lower_case=lower)
  model, context = hf_precision(load_model(folder, config, "classifier"), precision)

  def call(texts):
    with torch.inference_mode(), context():
      inputs = tokenizer(texts, padding=True, truncation=True, max_length=length,
                         return_tensors="pt")
      return torch.softmax(model(**inputs).logits.float(), -1).numpy()

  return dict(timing.serving_workloads(call, workload), version=versions())


def train(batches_file, folder, threads, config, steps):
  """Seconds of each of `steps` training steps (the first 2 are warm-up, left out) on the
  saved batches, each padded to its longest pair as DataCollatorWithPadding pads: forward,
  backward, clipping to norm 1 and torch's AdamW."""
  import numpy as np
  import torch
  torch.set_num_threads(threads)
  batches = np.load(batches_file)
  model = load_model(folder, config, "classifier").train()
  optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
  padded = []
  for i in range(steps):
    length = int(batches["input_mask"][i].sum(1).max())
    padded.append({name: torch.from_numpy(batches[key][i][:, :length]).long() for name, key in (
        ("input_ids", "input_ids"), ("attention_mask", "input_mask"),
        ("token_type_ids", "segment_ids"))})
    padded[-1]["labels"] = torch.from_numpy(batches["label_ids"][i]).long()

  def step(inputs):
    model(**inputs).loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()

  # call_seconds' warm-up step and the first timed one make the 2 warm-up steps.
  return {"seconds": timing.call_seconds(step, padded[1:])[1:], "version": versions()}


def parity(folder, inputs, output):
  """transformers' own BertModel of `folder` (eager attention where transformers has the
  choice) on the saved ids: its outputs saved to `output`, the keys it reported."""
  import numpy as np
  import torch
  import transformers
  data = np.load(inputs)
  try:
    model, info = transformers.BertModel.from_pretrained(folder, output_loading_info=True,
                                                         attn_implementation="eager")
  except TypeError:
    model, info = transformers.BertModel.from_pretrained(folder, output_loading_info=True)
  with torch.no_grad():
    out = model.eval()(**{name: torch.tensor(data[key], dtype=torch.long) for name, key in (
        ("input_ids", "ids"), ("attention_mask", "mask"), ("token_type_ids", "types"))})
  np.savez(output, sequence_output=out.last_hidden_state.float().numpy(),
           pooled_output=out.pooler_output.float().numpy())
  return {"missing": sorted(info.get("missing_keys", [])),
          "unexpected": sorted(info.get("unexpected_keys", [])), "version": versions()}


if __name__ == "__main__":
  sides.main({"encoder": encoder, "classify": classify, "train": train, "parity": parity})
