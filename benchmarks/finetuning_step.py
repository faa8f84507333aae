"""Fine-tuning step time on short real sentence pairs: batches cut to their longest vs padded.

    python benchmarks/finetuning_step.py [--bert_config_file=... --init_checkpoint=...]
        [--steps=10] [--hf_python=/path/to/venv/bin/python --hf_model_dir=DIR]

Packs sentence pairs of data/mrpc_sample/train.tsv at --max_seq_length=128 as
run_classifier does and times bert_tf's full optimizer step (forward, backward,
clipping, AdamWeightDecay) on the same batches twice: padded to 128 (the
original's fixed shapes) and cut to each batch's longest pair (the default), in
the graph executor as run_classifier by default (--jit_compile: both under XLA).
With --hf_python, Hugging Face transformers (PyTorch) trains the same batches,
padded to each batch's longest, with torch's AdamW and the same clipping, in that
interpreter. Without a checkpoint the model is MiniLM-L6-shaped with random
weights. Prints figures only.
"""

import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bert_tf  # noqa: E402,F401
from absl import app, flags  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import common  # noqa: E402
from bert_tf import checkpoints, optimization, precision, tokenization, training  # noqa: E402
from bert_tf.tasks import glue  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = flags.FLAGS
common.define_hf_comparison_flags()
flags.DEFINE_integer("max_seq_length", 128, "Padded length, as run_classifier's flag.")
flags.DEFINE_integer("batch_size", 32, "Pairs per step.")
flags.DEFINE_integer("steps", 10, "Timed steps per mode (after 2 warm-up steps).")
common.define_jit_compile_flag(
    "training step", "the graph executor, as run_classifier's own default (under "
    "--jit_compile the cut rows round lengths up to multiples of 16, as run_classifier's)")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too

HF_SIDE = r'''
import json, statistics, sys, time
import numpy as np, torch, transformers
torch.set_num_threads(int(sys.argv[3]))
torch.manual_seed(0)
batches = np.load(sys.argv[1])
if sys.argv[2] != "-":
  model = transformers.BertForSequenceClassification.from_pretrained(sys.argv[2], num_labels=2)
else:
  model = transformers.BertForSequenceClassification(transformers.BertConfig(
      **json.loads(sys.argv[4]), num_labels=2))
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
seconds = []
for i in range(int(sys.argv[5])):
  mask = torch.from_numpy(batches["input_mask"][i]).long()
  length = int(mask.sum(1).max())  # padding to the batch's longest, as DataCollatorWithPadding
  start = time.perf_counter()
  out = model(input_ids=torch.from_numpy(batches["input_ids"][i][:, :length]).long(),
              attention_mask=mask[:, :length],
              token_type_ids=torch.from_numpy(batches["segment_ids"][i][:, :length]).long(),
              labels=torch.from_numpy(batches["label_ids"][i]).long())
  out.loss.backward()
  torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
  optimizer.step()
  optimizer.zero_grad()
  seconds.append(time.perf_counter() - start)
print(json.dumps({"seconds": seconds[2:]}))
'''


def batches(num_batches):
  """[num_batches, batch, seq] arrays of run_classifier features, in file order."""
  processor = glue.MrpcProcessor()
  examples = processor.get_train_examples(os.path.join(REPO, "data", "mrpc_sample"))
  tokenizer = tokenization.FullTokenizer(os.path.join(REPO, "data", "vocab.txt"), True)
  needed = num_batches * FLAGS.batch_size
  features = [glue.convert_single_example(i, e, processor.get_labels(), FLAGS.max_seq_length,
                                          tokenizer) for i, e in enumerate(examples[:needed])]
  names = ("input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example")
  arrays = {n: np.array([f[i] for f in features], np.int32) for i, n in enumerate(names)}
  return {n: a.reshape((num_batches, FLAGS.batch_size) + a.shape[1:]) for n, a in arrays.items()}


def time_bert_tf(data, dynamic, jit_compile=False):
  config = common.comparison_config()
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  task = glue.ClassificationTask(config, 2, dynamic_length=dynamic,
                                 length_bucket=precision.XLA_LENGTH_BUCKET if jit_compile else 1)
  with strategy.scope():
    model = task.create_model()
    if FLAGS.init_checkpoint:
      checkpoints.load_checkpoint(FLAGS.init_checkpoint, model.encoder, strict=False)
    names = checkpoints.variable_map(model.encoder, model.heads)
    optimizer = optimization.create_optimizer(2e-5, 1000, 10, names)
  step = training.TrainStep(strategy, task, model, optimizer, jit_compile=jit_compile)
  features = {"input_word_ids": data["input_ids"], "input_mask": data["input_mask"],
              "input_type_ids": data["segment_ids"], "label_ids": data["label_ids"][..., None],
              "is_real_example": data["is_real_example"][..., None]}
  iterator = iter(tf.data.Dataset.from_tensor_slices(features))
  seconds = []
  for _ in range(len(data["input_ids"])):
    start = time.perf_counter()
    float(step.step(iterator)["loss"])
    seconds.append(time.perf_counter() - start)
  return seconds[2:], config


def main(_):
  data = batches(FLAGS.steps + 2)
  lengths = data["input_mask"].sum(-1)
  results = {}
  jit = common.jit_compile(False)  # run_classifier's --jit_compile default
  for name, dynamic in (("padded", False), ("cut", True)):
    results[name], config = time_bert_tf(data, dynamic, jit)
  if FLAGS.hf_python:
    with tempfile.TemporaryDirectory() as folder:
      path = os.path.join(folder, "batches.npz")
      np.savez(path, **data)
      results["HF transformers"] = common.run_json_script(
          FLAGS.hf_python, HF_SIDE, path, FLAGS.hf_model_dir or "-", str(os.cpu_count()),
          json.dumps(common.hf_config(config)), str(FLAGS.steps + 2),
          failure="HF measurement failed")["seconds"]
  print("fine-tuning step: L=%d H=%d, batch %d, max_seq_length %d, MRPC-sample pairs "
        "(real lengths: mean %.1f, longest per batch: mean %.1f)" %
        (config.num_hidden_layers, config.hidden_size, FLAGS.batch_size, FLAGS.max_seq_length,
         lengths.mean(), lengths.max(-1).mean()))
  medians = {name: statistics.median(s) for name, s in results.items()}
  for name, median in medians.items():
    mode = "" if name.startswith("HF") else common.mode_name(jit)
    print("%-16s %-6s %.3f s/step (median of %d), %.1f pairs/s" %
          (name, mode, median, len(results[name]), FLAGS.batch_size / median))
  for fast in [n for n in medians if n.startswith("cut")]:
    for name in [n for n in medians if not n.startswith("cut")]:
      print("%s vs %s: %.2fx faster" % (fast, name, medians[name] / medians[fast]))


if __name__ == "__main__":
  app.run(main)
