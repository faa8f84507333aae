"""Serving latency of a classifier SavedModel: cut to each request's length vs padded to max_seq_length.

    python benchmarks/serving_latency.py [--bert_config_file=... --init_checkpoint=...]
        [--hf_python=/path/to/venv/bin/python --hf_model_dir=DIR]

Exports one single-sentence classifier twice (dynamic length, and padded as the
original), loads each in a fresh process that imports only tensorflow and
tensorflow_text (TF_ENABLE_ONEDNN_OPTS=1, as the README recommends for serving),
and measures: one short request (p50/p99), one long request (p50/p99) and the
throughput of batches of 32 real sentences from data/pretraining_corpus.txt.
With --hf_python, the same texts go through Hugging Face transformers (PyTorch,
padding to each batch's longest) in that interpreter, for a back-to-back
comparison; --hf_model_dir then gives both sides the same weights (bert_tf reads
the HF folder through --init_checkpoint). Without a checkpoint the model is
MiniLM-L6-shaped (6 layers, hidden 384) with random weights. Prints figures only.
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
common.define_hf_comparison_flags()
flags.DEFINE_string("vocab_file", os.path.join(REPO, "data", "vocab.txt"), "Vocabulary.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the text.")
flags.DEFINE_integer("max_seq_length", 128, "Packed length of the padded export.")
flags.DEFINE_integer("requests", 200, "Timed single requests per workload.")
flags.DEFINE_integer("batches", 20, "Timed batches of 32 sentences.")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too

# Timing loop shared by both sides: `call(texts)` answers a list of strings.
TIMING = common.LATENCY_STATS_SOURCE + r'''
import json, sys, time

def timings(call, texts, repeats):
  call(texts)  # warm-up (and tracing)
  seconds = []
  for _ in range(repeats):
    start = time.perf_counter()
    call(texts)
    seconds.append(time.perf_counter() - start)
  return latency_stats(seconds, len(texts))

def run_all(call, workload):
  return {"short": timings(call, [workload["short"]], workload["requests"]),
          "long": timings(call, [workload["long"]], workload["requests"] // 4),
          "batch32": timings(call, workload["batch"], workload["batches"])}
'''

TF_SIDE = TIMING + r'''
import tensorflow as tf, tensorflow_text  # noqa: F401  (nothing else: a plain serving process)
workload = json.load(open(sys.argv[1]))
serve = tf.saved_model.load(sys.argv[2]).signatures["serving_default"]
print(json.dumps(run_all(lambda texts: serve(text_a=tf.constant(texts))["probabilities"].numpy(),
                         workload)))
'''

HF_SIDE = TIMING + r'''
import torch, transformers
torch.set_num_threads(int(sys.argv[4]))
workload = json.load(open(sys.argv[1]))
tokenizer = transformers.BertTokenizerFast(sys.argv[2], do_lower_case=True)
if sys.argv[3] != "-":
  model = transformers.BertForSequenceClassification.from_pretrained(sys.argv[3], num_labels=2)
else:
  model = transformers.BertForSequenceClassification(transformers.BertConfig(
      **json.loads(sys.argv[5]), num_labels=2))
model.eval()

def call(texts):
  with torch.inference_mode():
    inputs = tokenizer(texts, padding=True, truncation=True, max_length=%d, return_tensors="pt")
    return torch.softmax(model(**inputs).logits, -1).numpy()

print(json.dumps(run_all(call, workload)))
'''


def workload():
  """A short sentence, a text past max_seq_length, and batches of real sentences."""
  with open(os.path.join(REPO, "data", "pretraining_corpus.txt"), encoding="utf-8") as f:
    lines = [l.strip() for l in f if len(l.split()) >= 5]
  short = min(lines[:200], key=len)
  return {"short": short, "long": " ".join(lines[:12]), "batch": lines[100:132],
          "requests": FLAGS.requests, "batches": FLAGS.batches}


def make_exports(folder):
  """The same classifier exported cut-to-length and padded; returns {name: path}."""
  from bert_tf import checkpoints
  from bert_tf.tasks import glue
  from bert_tf.tasks.glue.export import export_classifier
  config = common.comparison_config()
  model = glue.ClassifierModel(config, num_labels=2, dynamic_length=True)
  if FLAGS.init_checkpoint:
    checkpoints.load_checkpoint(FLAGS.init_checkpoint, model.encoder, strict=False)
  paths = {}
  for name, dynamic in (("padded", False), ("cut", True)):
    model.dynamic_length = dynamic
    paths[name] = export_classifier(os.path.join(folder, name), model, FLAGS.vocab_file,
                                    FLAGS.do_lower_case, FLAGS.max_seq_length, ["0", "1"], False)
  return paths, config


def measure(python, script, *args):
  return common.run_json_script(python, script, *args,
                                env={"TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})


def main(_):
  with tempfile.TemporaryDirectory() as folder:
    paths, config = make_exports(folder)
    work_file = os.path.join(folder, "workload.json")
    with open(work_file, "w", encoding="utf-8") as f:
      json.dump(workload(), f)
    results = {name: measure(sys.executable, TF_SIDE, work_file, path)
               for name, path in paths.items()}
    if FLAGS.hf_python:
      results["HF transformers"] = measure(
          FLAGS.hf_python, HF_SIDE % FLAGS.max_seq_length, work_file, FLAGS.vocab_file,
          FLAGS.hf_model_dir or "-", str(os.cpu_count()), json.dumps(common.hf_config(config)))
  print("classifier serving: L=%d H=%d, max_seq_length %d, fresh process, %d CPU threads" %
        (config.num_hidden_layers, config.hidden_size, FLAGS.max_seq_length, os.cpu_count()))
  print("%-16s %22s %22s %16s" % ("", "short p50 / p99 ms", "long p50 / p99 ms",
                                  "batch32 sent/s"))
  for name, r in results.items():
    print("%-16s %11.1f / %-8.1f %11.1f / %-8.1f %14.1f" % (
        name, r["short"]["p50_ms"], r["short"]["p99_ms"], r["long"]["p50_ms"],
        r["long"]["p99_ms"], r["batch32"]["per_second"]))
  cut = results["cut"]
  for name in [n for n in results if n != "cut"]:
    other = results[name]
    print("cut vs %s: short %.2fx, long %.2fx, batch32 %.2fx faster" % (
        name, other["short"]["p50_ms"] / cut["short"]["p50_ms"],
        other["long"]["p50_ms"] / cut["long"]["p50_ms"],
        cut["batch32"]["per_second"] / other["batch32"]["per_second"]))


if __name__ == "__main__":
  app.run(main)
