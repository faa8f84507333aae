"""Fine-tuning step time on short real sentence pairs: batches cut to their longest vs padded.

    python -m benchmarks.finetuning_step [--bert_config_file=... --init_checkpoint=...]
        [--steps=10] [--hf_python=/path/to/venv/bin/python --hf_model_dir=DIR]

Packs sentence pairs of data/mrpc_sample/train.tsv at --max_seq_length=128 as
run_classifier does and times bert_tf's full optimizer step (forward, backward,
clipping, AdamWeightDecay) on the same batches twice: padded to 128 (the
original's fixed shapes) and cut to each batch's longest pair (the default), in
the graph executor as run_classifier by default (--jit_compile: both under XLA).
With --hf_python, Hugging Face transformers (PyTorch) trains the same batches,
padded to each batch's longest, with torch's AdamW and the same clipping, in that
interpreter. Without a checkpoint the model is MiniLM-L6-shaped with random
weights. Prints figures only (common.Results).
"""

import os
import statistics
import tempfile

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import app, flags
import numpy as np
import tensorflow as tf

from benchmarks import common, peers, timing
from bert_tf import checkpoints, optimization, tokenization, training
from bert_tf.tasks import glue
from bert_tf.utils import precision

FLAGS = flags.FLAGS
common.define_hf_comparison_flags()
flags.DEFINE_string("data_dir", os.path.join(common.ROOT, "data", "mrpc_sample"),
                    "MRPC-layout folder whose train.tsv gives the sentence pairs.")
flags.DEFINE_string("vocab_file", os.path.join(common.ROOT, "data", "vocab.txt"),
                    "Vocabulary of the model (uncased).")
flags.DEFINE_integer("max_seq_length", 128, "Padded length, as run_classifier's flag.")
flags.DEFINE_integer("batch_size", 32, "Pairs per step.")
flags.DEFINE_integer("steps", 10, "Timed steps per mode (after 2 warm-up steps).")
common.define_jit_compile_flag(
    "training step", "the graph executor, as run_classifier's own default (under "
    "--jit_compile the cut rows round lengths up to multiples of 16, as run_classifier's)")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too



def batches(num_batches):
  """[num_batches, batch, seq] arrays of run_classifier features, in file order."""
  processor = glue.MrpcProcessor()
  examples = processor.get_train_examples(FLAGS.data_dir)
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, True)
  needed = num_batches * FLAGS.batch_size
  if len(examples) < needed:
    raise app.UsageError("%s has %d pairs, fewer than the %d of --steps + 2 batches of "
                         "--batch_size." % (FLAGS.data_dir, len(examples), needed))
  features = [glue.convert_single_example(i, e, processor.get_labels(), FLAGS.max_seq_length,
                                          tokenizer) for i, e in enumerate(examples[:needed])]
  names = ("input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example")
  arrays = {n: np.array([f[i] for f in features], np.int32) for i, n in enumerate(names)}
  return {n: a.reshape((num_batches, FLAGS.batch_size) + a.shape[1:]) for n, a in arrays.items()}


def time_bert_tf(data, dynamic, jit_compile=False):
  """Seconds of each step after the first 2 (warm-up), cut to each batch's longest pair or
  padded to --max_seq_length; and the model's config."""
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
  # Each call trains on the next batch: call_seconds' warm-up step and the first timed one make
  # the 2 warm-up steps.
  seconds = timing.call_seconds(lambda _: float(step.step(iterator)["loss"]),
                                [None] * (len(data["input_ids"]) - 1))
  return seconds[1:], config


def main(_):
  data = batches(FLAGS.steps + 2)
  lengths = data["input_mask"].sum(-1)
  seconds = {}
  jit = common.jit_compile(False)  # run_classifier's --jit_compile default
  for name, dynamic in (("padded", False), ("cut", True)):
    seconds[name], config = time_bert_tf(data, dynamic, jit)
  results = common.Results("finetuning_step", {
      "layers": config.num_hidden_layers, "hidden": config.hidden_size,
      "batch_size": FLAGS.batch_size, "max_seq_length": FLAGS.max_seq_length,
      "weights": FLAGS.init_checkpoint or "random"})
  if FLAGS.hf_python:
    with tempfile.TemporaryDirectory() as folder:
      path = os.path.join(folder, "batches.npz")
      np.savez(path, **data)
      out = common.run_side(FLAGS.hf_python, "hf", "train", {
          "batches_file": path, "folder": FLAGS.hf_model_dir or "-",
          "threads": os.cpu_count(), "config": common.hf_config(config),
          "steps": FLAGS.steps + 2}, failure="HF measurement failed")
    seconds["HF transformers"] = out["seconds"]
    results.note("HF: %s, padded to each batch's longest, torch AdamW, %d threads" %
                 (out["version"], os.cpu_count()))
  results.note("MRPC-sample pairs from %s: real lengths mean %.1f, longest per batch mean %.1f; "
               "full optimizer steps, median of %d after 2 warm-up steps; cut speed-up: the cut "
               "rows' speed over the row's" % (FLAGS.data_dir, lengths.mean(),
                                               lengths.max(-1).mean(), FLAGS.steps))
  medians = {name: statistics.median(s) for name, s in seconds.items()}
  for name, median in medians.items():
    results.add(name, {"time": (median, "s/step"),
                       "throughput": (FLAGS.batch_size / median, "pairs/s"),
                       "cut speed-up": (None if name == "cut" else
                                        peers.speedup(median, medians["cut"]), "x")},
                None if name.startswith("HF") else {"mode": common.mode_name(jit)})
  results.report()


if __name__ == "__main__":
  app.run(main)
