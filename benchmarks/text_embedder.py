"""Serving speed of bert_tf's text-embedder SavedModel against sentence-transformers, same CPU.

    python benchmarks/text_embedder.py --model_dir=/path/to/all-MiniLM-L6-v2 \
        [--st_python=/path/to/venv/bin/python] [--requests=200] [--batches=30]

Exports the sentence-transformers folder with bert_tf.text_embedder (as
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
matmul flags are printed with the figures; run it on a quiet machine.
"""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bert_tf  # noqa: E402,F401
from absl import app, flags  # noqa: E402

from benchmarks import common  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A sentence-transformers folder (e.g. all-MiniLM-L6-v2).")
flags.DEFINE_string("st_python", None, "A Python with sentence-transformers, for the comparison.")
flags.DEFINE_string("texts_file", os.path.join(REPO, "data", "pretraining_corpus.txt"),
                    "Text file, one sentence per line.")
flags.DEFINE_integer("requests", 200, "Timed single-sentence calls.")
flags.DEFINE_integer("batches", 30, "Timed calls of 32 sentences.")

# Timing loop shared by both sides: `call(texts)` embeds a list of strings.
TIMING = common.LATENCY_STATS_SOURCE + r'''
import json, sys, time

def timings(call, batches):
  call(batches[0])  # warm-up (and tracing)
  seconds = []
  for texts in batches:
    start = time.perf_counter()
    call(texts)
    seconds.append(time.perf_counter() - start)
  return latency_stats(seconds, len(batches[0]))

def run_all(call, workload):
  return {"single": timings(call, [[t] for t in workload["single"]]),
          "batch32": timings(call, workload["batches"])}
'''

TF_SIDE = TIMING + r'''
import tensorflow as tf, tensorflow_text  # noqa: F401  (nothing else: a plain serving process)
workload = json.load(open(sys.argv[1]))
model = tf.saved_model.load(sys.argv[2])
result = run_all(lambda texts: model(tf.constant(texts)).numpy(), workload)
result["version"] = "tensorflow " + tf.__version__
print(json.dumps(result))
'''

ST_SIDE = TIMING + r'''
import torch, sentence_transformers
torch.set_num_threads(int(sys.argv[3]))
workload = json.load(open(sys.argv[1]))
model = sentence_transformers.SentenceTransformer(sys.argv[2], device="cpu")
result = run_all(lambda texts: model.encode(texts, batch_size=32, convert_to_numpy=True,
                                            show_progress_bar=False), workload)
result["version"] = "sentence-transformers %s, torch %s" % (sentence_transformers.__version__,
                                                            torch.__version__)
print(json.dumps(result))
'''


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


def measure(python, script, *args):
  return common.run_json_script(python, script, *args,
                                env={"TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})


def main(_):
  from bert_tf import text_embedder
  if not FLAGS.model_dir:
    sys.exit("--model_dir (a sentence-transformers folder) is required.")
  threads = os.cpu_count()
  with tempfile.TemporaryDirectory() as folder:
    export_dir = text_embedder.export_from_folder(FLAGS.model_dir, os.path.join(folder, "export"))
    work_file = os.path.join(folder, "workload.json")
    with open(work_file, "w", encoding="utf-8") as f:
      json.dump(workload(), f)
    results = {"bert_tf SavedModel": measure(sys.executable, TF_SIDE, work_file, export_dir)}
    if FLAGS.st_python:
      results["sentence-transformers"] = measure(FLAGS.st_python, ST_SIDE, work_file,
                                                 FLAGS.model_dir, str(threads))
  print("text embedding of %s, fresh processes, %d CPU threads" % (FLAGS.model_dir, threads))
  print("CPU: %s" % common.cpu_info())
  print("%-22s %22s %16s %16s" % ("", "1 sentence p50/p99 ms", "32 sentences ms",
                                  "32: sentences/s"))
  for name, r in results.items():
    print("%-22s %11.1f / %-8.1f %16.1f %16.1f   (%s)" % (
        name, r["single"]["p50_ms"], r["single"]["p99_ms"], r["batch32"]["p50_ms"],
        r["batch32"]["per_second"], r["version"]))
  if len(results) == 2:
    ours, theirs = results.values()
    print("bert_tf vs sentence-transformers: 1 sentence %.2fx, 32 sentences %.2fx faster" % (
        theirs["single"]["p50_ms"] / ours["single"]["p50_ms"],
        theirs["batch32"]["p50_ms"] / ours["batch32"]["p50_ms"]))


if __name__ == "__main__":
  app.run(main)
