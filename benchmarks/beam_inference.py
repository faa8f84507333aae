"""Speed of predict_beam.py (Beam's DirectRunner, 1 and 2 workers) against a plain loop.

    python -m benchmarks.beam_inference --sentences_file=sentences.txt \
        --model_dir=/path/to/all-MiniLM-L6-v2 [--num_sentences=20000] [--workers=1,2]

--sentences_file holds one sentence a line (e.g. Wikipedia sentences; read locally, never
from the network), cycled to --num_sentences. From --model_dir (a sentence-transformers or
Hugging Face BERT folder) it exports a classifier (the folder's encoder, a random 3-label
head: speed does not depend on the head's values) and a text embedder, unless
--classifier_export / --embedder_export name exports to use. For each export it times:

  * loop: this process calls the export's serving_default on --batch_size sentences at a
    time, in file order (the model loaded and warmed up first: no start-up in the time);
  * loop, sorted by length: the same, the sentences sorted by length first (the sort in
    the time), as predict_beam.py batches them;
  * beam, N workers: `predict_beam.py --input_format=text --direct_num_workers=N
    --direct_running_mode=multi_processing` as a separate process, wall clock including
    its start-up and each worker's model load.

Checks: every Beam run answers each sentence as the loop did (float32 rounding apart:
another batch pads to another length), and runs with different worker counts write the same
bytes. Prints figures only (common.Results), with the CPU.
"""

import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from absl import app, flags
import numpy as np

from benchmarks import common
import bert_tf  # noqa: F401  (TensorFlow environment defaults)

ROOT = common.ROOT
FLAGS = flags.FLAGS
flags.DEFINE_string("sentences_file", None, "Sentences, one a line (a local file).")
flags.DEFINE_integer("num_sentences", 20000, "Sentences to run (the file's cycled to this).")
flags.DEFINE_string("model_dir", None, "A sentence-transformers or Hugging Face BERT folder "
                    "to export a classifier and a text embedder from.")
flags.DEFINE_string("classifier_export", None, "Use this classifier export instead.")
flags.DEFINE_string("embedder_export", None, "Use this text embedder export instead.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the exports made here.")
flags.DEFINE_integer("batch_size", 32, "Sentences per call, in the loop and in Beam.")
flags.DEFINE_list("workers", ["1", "2"], "DirectRunner worker counts to time.")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too

TOLERANCE = 1e-5  # another padded length moves float32 rounding (1e-6 relative to values ~1)


def read_sentences(path, count):
  with open(path, encoding="utf-8") as f:
    lines = [line.strip() for line in f if line.strip()]
  if not lines:
    raise SystemExit("%s has no sentences" % path)
  return list(itertools.islice(itertools.cycle(lines), count)), len(lines)


def make_exports(folder):
  """{kind: export dir}: the flags' exports, or ones made from --model_dir."""
  made = {"classifier": FLAGS.classifier_export, "embedder": FLAGS.embedder_export}
  if all(made.values()):
    return made
  if not FLAGS.model_dir:
    raise SystemExit("pass --model_dir, or --classifier_export and --embedder_export")
  if not made["classifier"]:
    from bert_tf import checkpoints
    from bert_tf.tasks.glue.export import export_classifier
    from bert_tf.tasks.glue.model import ClassifierModel
    source = checkpoints.open_source(FLAGS.model_dir)
    model = ClassifierModel(source.config, num_labels=3, dynamic_length=True)
    checkpoints.load_checkpoint(source, model.encoder)
    casing = source.tokenizer or {"do_lower_case": True}
    made["classifier"] = export_classifier(
        os.path.join(folder, "classifier"), model, source.vocab_file,
        casing.get("do_lower_case", True), FLAGS.max_seq_length, ["a", "b", "c"],
        text_pair=False, strip_accents=casing.get("strip_accents"))
  if not made["embedder"]:
    from bert_tf.inference import text_embedder_export
    made["embedder"] = text_embedder_export.export_from_folder(
        FLAGS.model_dir, os.path.join(folder, "embedder"), max_seq_length=FLAGS.max_seq_length)
  return {kind: str(path) for kind, path in made.items()}


def loop(export_dir, sentences, by_length=False):
  """(seconds, answers in file order): serving_default over the sentences, batch_size at a
  time, in file order or (by_length) sorted by length as predict_beam.py batches them."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401

  from bert_tf.inference import beam_inference
  info = beam_inference.describe_export(export_dir)
  signature = tf.saved_model.load(export_dir).signatures["serving_default"]
  name = info.inputs[0]
  size = FLAGS.batch_size
  signature(**{name: tf.constant(sentences[:size])})  # warm-up: traced graphs, thread pools
  order = list(range(len(sentences)))
  start = time.perf_counter()
  if by_length:
    order.sort(key=lambda i: len(sentences[i]))
  answers = [None] * len(sentences)
  for i in range(0, len(order), size):
    rows = order[i:i + size]
    outputs = signature(**{name: tf.constant([sentences[j] for j in rows])})
    for j, answer in zip(rows, beam_inference.answers_of(info, outputs)):
      answers[j] = answer
  return time.perf_counter() - start, answers


def beam(export_dir, input_file, prefix, workers):
  """(wall seconds, the pipeline's own seconds from its log, answers by line number)."""
  args = [sys.executable, os.path.join(ROOT, "predict_beam.py"), "--export_dir=" + export_dir,
          "--input=" + input_file, "--output=" + prefix, "--input_format=text",
          "--batch_size=%d" % FLAGS.batch_size, "--num_shards=1",
          "--direct_running_mode=multi_processing", "--direct_num_workers=%d" % workers]
  start = time.perf_counter()
  result = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
  wall = time.perf_counter() - start
  if result.returncode:
    raise SystemExit("failed: %s\n%s" % (" ".join(args), result.stderr[-3000:]))
  found = re.search(r"batches in ([0-9.]+) s: ", result.stderr)
  answers = {}
  with open(prefix + "-00000-of-00001.jsonl", encoding="utf-8") as f:
    for line in f:
      row = json.loads(line)
      answers[row.pop("id")] = row
  return wall, float(found.group(1)) if found else None, answers


def same_answers(kind, want, got):
  """Whether every line's answer equals the loop's (floats within TOLERANCE)."""
  if len(got) != len(want):
    return False
  key = "probabilities" if kind == "classifier" else "embedding"
  for line, expected in enumerate(want, start=1):
    answer = got.get(line)
    if answer is None or not np.allclose(answer[key], expected[key], rtol=0, atol=TOLERANCE):
      return False
  return True


def main(_):
  if not FLAGS.sentences_file:
    raise SystemExit("pass --sentences_file (one sentence a line)")
  sentences, distinct = read_sentences(FLAGS.sentences_file, FLAGS.num_sentences)
  results = common.Results("beam_inference", {
      "sentences": len(sentences), "batch_size": FLAGS.batch_size,
      "max_seq_length": FLAGS.max_seq_length})
  results.note("sentences: %s (%d distinct, cycled to %d; %.1f characters on average); %d "
               "CPUs, load average %.2f at the start" % (
                   FLAGS.sentences_file, distinct, len(sentences),
                   sum(map(len, sentences)) / len(sentences), os.cpu_count(),
                   os.getloadavg()[0]))
  with tempfile.TemporaryDirectory() as tmp:
    exports = make_exports(tmp)
    input_file = os.path.join(tmp, "sentences.txt")
    with open(input_file, "w", encoding="utf-8") as f:
      f.write("\n".join(sentences) + "\n")
    for kind in ("classifier", "embedder"):
      seconds, want = loop(exports[kind], sentences)
      base = len(sentences) / seconds
      results.add("%s: loop" % kind, {"s": (seconds, "s"), "rows/s": (base, "rows/s"),
                                      "speed-up": (1.0, "x")},
                  settings={"export": exports[kind]})
      sorted_seconds, _ = loop(exports[kind], sentences, by_length=True)
      results.add("%s: loop, sorted by length" % kind, {
          "s": (sorted_seconds, "s"), "rows/s": (len(sentences) / sorted_seconds, "rows/s"),
          "speed-up": (seconds / sorted_seconds, "x")})
      files = {}
      for workers in map(int, FLAGS.workers):
        prefix = os.path.join(tmp, "%s-%d" % (kind, workers), "out")
        wall, pipeline, got = beam(exports[kind], input_file, prefix, workers)
        with open(prefix + "-00000-of-00001.jsonl", "rb") as f:
          files[workers] = f.read()
        results.add("%s: beam, %d worker(s)" % (kind, workers), {
            "s": (wall, "s"), "rows/s": (len(sentences) / wall, "rows/s"),
            "speed-up": (seconds / wall, "x")},
            settings={"pipeline s": round(pipeline, 1) if pipeline else None},
            checks={"answers as the loop's": same_answers(kind, want, got),
                    "same bytes as 1 worker": files[workers] == next(iter(files.values()))})
  results.report()


if __name__ == "__main__":
  app.run(main)
