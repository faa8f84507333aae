"""Serving speed of bert_tf's text-embedder SavedModel against sentence-transformers, same CPU.

    python -m benchmarks.text_embedder --model_dir=/path/to/all-MiniLM-L6-v2 \
        [--st_python=/path/to/venv/bin/python] [--requests=200] [--batches=30]

Exports the sentence-transformers folder with bert_tf.inference.text_embedder_export (as
export_text_embedder.py does), then times, each in a fresh process on the same
texts (real sentences from data/pretraining_corpus.txt, or --texts_file):
  * bert_tf: the SavedModel loaded by a process that imports only tensorflow and
    tensorflow_text (TF_ENABLE_ONEDNN_OPTS=1, as the README recommends for serving),
    called as `model(tf.constant(texts))`;
  * sentence-transformers (with --st_python, a Python that has it): the same folder,
    `SentenceTransformer(model_dir, device="cpu").encode(texts)`, torch using as many
    threads as TensorFlow (one per logical CPU).
Workloads: one sentence per call (p50 / p99 latency) and 32 sentences per call (p50
latency and sentences per second). Both include tokenization. The CPU's model and
matmul flags are printed with the figures; run it on a quiet machine. The two sides run
benchmarks/sides/savedmodel.py and sentence_embedding.py. Prints figures only
(common.Results).
"""

import json
import os
import sys
import tempfile

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import app, flags

from benchmarks import common, peers

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A sentence-transformers folder (e.g. all-MiniLM-L6-v2).")
flags.DEFINE_string("st_python", None, "A Python with sentence-transformers, for the comparison.")
flags.DEFINE_string("texts_file", os.path.join(common.ROOT, "data", "pretraining_corpus.txt"),
                    "Text file, one sentence per line.")
flags.DEFINE_integer("requests", 200, "Timed single-sentence calls.")
flags.DEFINE_integer("batches", 30, "Timed calls of 32 sentences.")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too

def workload():
  """Single sentences (one per timed call) and batches of 32, all real and distinct."""
  with open(FLAGS.texts_file, encoding="utf-8") as f:
    lines = [line.strip() for line in f if len(line.split()) >= 3]
  needed = FLAGS.requests + 32 * FLAGS.batches
  if len(lines) < needed:
    lines = (lines * (needed // max(len(lines), 1) + 1))[:needed]
  batches = lines[FLAGS.requests:needed]
  return {"single": lines[:FLAGS.requests],
          "batches": [batches[i:i + 32] for i in range(0, len(batches), 32)]}


def measure(python, side, command, arguments):
  return common.run_side(python, side, command, arguments,
                         env={"TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})


def main(_):
  from bert_tf.inference import text_embedder_export
  if not FLAGS.model_dir:
    sys.exit("--model_dir (a sentence-transformers folder) is required.")
  if FLAGS.st_python:
    peers.check_python("st_python", FLAGS.st_python, ("sentence_transformers", "torch"),
                       "sentence-transformers")
  threads = os.cpu_count()
  with tempfile.TemporaryDirectory() as folder:
    export_dir = text_embedder_export.export_from_folder(FLAGS.model_dir,
                                                         os.path.join(folder, "export"))
    work_file = os.path.join(folder, "workload.json")
    with open(work_file, "w", encoding="utf-8") as f:
      json.dump(workload(), f)
    results = {"bert_tf SavedModel": measure(sys.executable, "savedmodel", "embedder",
                                             {"workload_file": work_file, "export": export_dir})}
    if FLAGS.st_python:
      results["sentence-transformers"] = measure(
          FLAGS.st_python, "sentence_embedding", "embed",
          {"workload_file": work_file, "model_dir": FLAGS.model_dir, "threads": threads})
  report = common.Results("text_embedder", {
      "model_dir": FLAGS.model_dir, "requests": FLAGS.requests, "batches": FLAGS.batches,
      "threads": threads})
  report.note("text embedding from raw text, a fresh process per row; bert_tf speed-up: bert_tf's "
              "speed over the row's")
  ours = results["bert_tf SavedModel"]
  for name, r in results.items():
    other = name != "bert_tf SavedModel"
    report.add(name, {
        "1 sentence p50": (r["single"]["p50_ms"], "ms"),
        "1 sentence p99": (r["single"]["p99_ms"], "ms"),
        "32 sentences p50": (r["batch32"]["p50_ms"], "ms"),
        "32 sentences": (r["batch32"]["per_second"], "sentences/s"),
        "bert_tf speed-up 1": (peers.speedup(r["single"]["p50_ms"], ours["single"]["p50_ms"])
                               if other else None, "x"),
        "bert_tf speed-up 32": (peers.speedup(r["batch32"]["p50_ms"], ours["batch32"]["p50_ms"])
                                if other else None, "x")}, {"version": r["version"]})
  report.report()


if __name__ == "__main__":
  app.run(main)
