"""The first fine-tuning step, in a fresh process each run, as a user's run meets it.

    python -m benchmarks.first_step [--bert_config_file=... --init_checkpoint=...] [--runs=3]
        [--train_steps=40,1000] [--later_steps=4]
        [--hf_python=/path/to/venv/bin/python --hf_model_dir=DIR]

A short job, and every test that trains, waits for the first step: TensorFlow traces the step
(Python builds its graph: the model, the gradient, the optimizer), then its first call optimizes
and instantiates that graph before it runs. Each run is a fresh process
(benchmarks/sides/first_step.py) training benchmarks/finetuning_step's batches (MRPC-sample
pairs, 32 a batch, each cut to its longest), per --train_steps entry: the run's length picks the
optimizer update (TensorFlow's Adam kernels on short runs of small models, compiled by XLA once
per weight shape beyond; see AdamWeightDecay.kernel_update_pays). Per row: tracing, the first
call, the first step (both), and the median of --later_steps later steps, as the median over
--runs processes. With --hf_python, transformers' first step (forward, backward, clipping,
torch's AdamW) on the same batches. Process start, imports and loading the checkpoint are left
out on both sides. Prints figures only (common.Results).
"""

import os
from statistics import median
import sys
import tempfile

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import app, flags
import numpy as np

# finetuning_step: its batches and their flags (--data_dir, --batch_size, --max_seq_length)
from benchmarks import common, finetuning_step

FLAGS = flags.FLAGS
flags.DEFINE_integer("runs", 3, "Fresh processes per row; figures are their medians.")
flags.DEFINE_list("train_steps", ["40", "1000"], "Run lengths to time (each picks the optimizer "
                  "update's kind, as run_classifier's num_train_steps does).")
flags.DEFINE_integer("later_steps", 4, "Later steps timed after the first, per process.")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too


def _bert_tf_run(path, config, train_steps):
  return common.run_side(sys.executable, "first_step", "bert_tf", {
      "batches_file": path, "config": config.to_dict(), "init_checkpoint": FLAGS.init_checkpoint,
      "train_steps": train_steps, "steps": FLAGS.later_steps},
      failure="bert_tf's first step failed")


def _hf_run(path, config):
  return common.run_side(FLAGS.hf_python, "first_step", "hf", {
      "batches_file": path, "folder": FLAGS.hf_model_dir or "-",
      "config": common.hf_config(config), "threads": os.cpu_count(),
      "steps": FLAGS.later_steps}, failure="HF's first step failed")


def main(_):
  try:
    lengths = [int(n) for n in FLAGS.train_steps]
  except ValueError:
    raise app.UsageError("--train_steps: whole numbers of steps, e.g. 40,1000.")
  if not lengths or any(n < 1 for n in lengths) or FLAGS.runs < 1 or FLAGS.later_steps < 1:
    raise app.UsageError("--train_steps (at least one), --runs and --later_steps must be "
                         "positive.")
  config = common.comparison_config()
  results = common.Results("first_step", {
      "layers": config.num_hidden_layers, "hidden": config.hidden_size,
      "batch_size": FLAGS.batch_size, "runs": FLAGS.runs,
      "weights": FLAGS.init_checkpoint or "random"})
  runs = {n: [] for n in lengths}
  hf_runs = []
  with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "batches.npz")
    np.savez(path, **finetuning_step.batches(FLAGS.later_steps + 1))
    # Round-robin, so that a shared machine's drift falls on every row alike.
    for _ in range(FLAGS.runs):
      for train_steps in lengths:
        runs[train_steps].append(_bert_tf_run(path, config, train_steps))
      if FLAGS.hf_python:
        hf_runs.append(_hf_run(path, config))
  for train_steps, got in runs.items():
    results.add("bert_tf, %d-step run" % train_steps, {
        "tracing": (median([r["trace"] for r in got]), "s"),
        "first call": (median([r["first_call"] for r in got]), "s"),
        "first step": (median([r["trace"] + r["first_call"] for r in got]), "s"),
        "later steps": (median([median(r["later"]) for r in got]), "s/step")},
        {"update": got[0]["update"]})
    results.note("bert_tf, %d-step run, first steps of the runs: %s s" % (
        train_steps, ", ".join("%.2f" % (r["trace"] + r["first_call"]) for r in got)))
  if hf_runs:
    results.add("HF transformers", {
        "first step": (median([r["first"] for r in hf_runs]), "s"),
        "later steps": (median([median(r["later"]) for r in hf_runs]), "s/step")})
    results.note("HF: %s, torch AdamW, %d threads" % (hf_runs[0]["version"], os.cpu_count()))
  results.note("TensorFlow: %s; the runs went round-robin over the rows" %
               runs[lengths[0]][0]["version"])
  results.report()


if __name__ == "__main__":
  app.run(main)
