"""The first fine-tuning step of a fresh process, as benchmarks/first_step.py times it: `bert_tf`
in this checkout's interpreter, `hf` in a Python with torch and transformers. Both train the
saved batches (MRPC-sample pairs, each cut to its longest) with clipping to norm 1.
"""

import time

from benchmarks import sides


def bert_tf(batches_file, config, init_checkpoint, train_steps, steps):
  """Seconds of tracing the training step, of its first call, and of `steps` later steps (a
  run of `train_steps` steps: the length picks the optimizer update's kind)."""
  import numpy as np
  import tensorflow as tf

  from bert_tf import checkpoints, optimization, training
  from bert_tf.config import BertConfig
  from bert_tf.tasks import glue
  batches = np.load(batches_file)
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  task = glue.ClassificationTask(BertConfig.from_dict(config), 2, dynamic_length=True,
                                 length_bucket=1)
  with strategy.scope():
    model = task.create_model()
    if init_checkpoint:
      checkpoints.load_checkpoint(init_checkpoint, model.encoder, strict=False)
    names = checkpoints.variable_map(model.encoder, model.heads)
    optimizer = optimization.create_optimizer(2e-5, train_steps, train_steps // 10, names)
  step = training.TrainStep(strategy, task, model, optimizer)
  features = {"input_word_ids": batches["input_ids"], "input_mask": batches["input_mask"],
              "input_type_ids": batches["segment_ids"],
              "label_ids": batches["label_ids"][..., None],
              "is_real_example": batches["is_real_example"][..., None]}
  iterator = iter(tf.data.Dataset.from_tensor_slices(features))
  start = time.perf_counter()
  step.trace(iterator)
  trace = time.perf_counter() - start
  start = time.perf_counter()
  loss = float(step.step(iterator)["loss"])
  first_call = time.perf_counter() - start
  later = []
  for _ in range(steps):
    start = time.perf_counter()
    float(step.step(iterator)["loss"])
    later.append(time.perf_counter() - start)
  return {"trace": trace, "first_call": first_call, "later": later, "loss": loss,
          "update": step.update_kind.split(" (")[0], "version": tf.__version__}


def hf(batches_file, folder, config, threads, steps):
  """Seconds of transformers' first training step (forward, backward, clipping, torch's AdamW)
  and of `steps` later ones, each batch padded to its longest pair."""
  import numpy as np
  import torch

  from benchmarks.sides.hf import load_model, versions
  torch.set_num_threads(threads)
  batches = np.load(batches_file)
  model = load_model(folder, config, "classifier").train()
  optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
  seconds = []
  for i in range(steps + 1):
    length = int(batches["input_mask"][i].sum(1).max())
    inputs = {name: torch.from_numpy(batches[key][i][:, :length]).long() for name, key in (
        ("input_ids", "input_ids"), ("attention_mask", "input_mask"),
        ("token_type_ids", "segment_ids"))}
    start = time.perf_counter()
    model(**inputs, labels=torch.from_numpy(batches["label_ids"][i]).long()).loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    seconds.append(time.perf_counter() - start)
  return {"first": seconds[0], "later": seconds[1:], "version": versions()}


if __name__ == "__main__":
  sides.main({"bert_tf": bert_tf, "hf": hf})
