"""Speed of create_pretraining_data_beam.py against one create_pretraining_data.py job per file.

    python -m benchmarks.pretraining_data_beam --input_file=corpus.txt --vocab_file=vocab.txt \
        [--num_files=8] [--workers=1,2] [--dupe_factor=10]

Splits the corpus (one sentence per line, blank line between documents) at document
boundaries into --num_files files of about equal size in a temporary folder, then times,
as separate processes and wall clock including start-up:

  * sequential: create_pretraining_data.py on each file in turn, --random_seed = seed + i
    (what users of the original did by hand);
  * beam, N workers: create_pretraining_data_beam.py on all files with
    --direct_num_workers=N (DirectRunner, one process per worker).

It checks that every Beam run wrote the same multiset of parsed records as the
sequential jobs, and prints times, records/s, speed-ups and each run's peak memory
(its largest process, and all its processes together; sampled from Linux /proc every
0.1 s). Prints figures only (common.Results).
"""

import collections
import os
import subprocess
import sys
import tempfile
import time

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import app, flags

from benchmarks import common

ROOT = common.ROOT
FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", os.path.join(ROOT, "data", "pretraining_corpus.txt"),
                    "Corpus: one sentence per line, blank line between documents.")
flags.DEFINE_string("vocab_file", os.path.join(ROOT, "data", "vocab.txt"), "WordPiece vocab.")
flags.DEFINE_integer("num_files", 8, "Files to split the corpus into.")
flags.DEFINE_list("workers", ["1", "2"], "Beam worker counts to time.")
flags.DEFINE_integer("dupe_factor", 10, "Passes over the corpus (the original's default).")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Seed of file 0.")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too


def split_corpus(path, folder, n):
  """Whole documents, in order, into n files of about equal size; returns the paths."""
  with open(path, encoding="utf-8") as f:
    documents = [d.strip("\n") for d in f.read().split("\n\n") if d.strip()]
  if len(documents) < n:
    raise SystemExit("%s has %d documents, fewer than --num_files=%d" % (path, len(documents), n))
  total = sum(len(d) for d in documents)
  parts, done = [[] for _ in range(n)], 0
  k = 0
  for i, document in enumerate(documents):
    # Next file once this one has its share, keeping a document for each file left.
    if k < n - 1 and parts[k] and (done >= total * (k + 1) / n or len(documents) - i == n - 1 - k):
      k += 1
    parts[k].append(document)
    done += len(document)
  paths = []
  for k, part in enumerate(parts):
    paths.append(os.path.join(folder, "part-%03d.txt" % k))
    with open(paths[-1], "w", encoding="utf-8") as f:
      f.write("\n\n".join(part) + "\n")
  return paths


def shared_flags():
  """The flags of every run, sequential and Beam."""
  return ["--vocab_file=%s" % FLAGS.vocab_file, "--dupe_factor=%d" % FLAGS.dupe_factor,
          "--max_seq_length=%d" % FLAGS.max_seq_length,
          "--max_predictions_per_seq=%d" % FLAGS.max_predictions_per_seq]


def _process_tree(pid):
  """pid and all its descendants (Linux /proc; empty elsewhere)."""
  found, stack = [], [pid]
  while stack:
    p = stack.pop()
    found.append(p)
    try:
      for task in os.listdir("/proc/%d/task" % p):
        with open("/proc/%d/task/%s/children" % (p, task)) as f:
          stack.extend(int(c) for c in f.read().split())
    except OSError:
      pass
  return found


def _rss_mb(pid):
  try:
    with open("/proc/%d/statm" % pid) as f:
      return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20
  except OSError:
    return 0.0


def run(args, log):
  """Runs a command; returns (wall seconds, peak MB of its largest process, peak MB of all
  its processes together), memory sampled every 0.1 s."""
  peaks = [0.0, 0.0]
  start = time.perf_counter()
  with open(log, "w") as stderr:
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT)
    while process.poll() is None:
      sizes = [_rss_mb(p) for p in _process_tree(process.pid)]
      peaks = [max(peaks[0], max(sizes)), max(peaks[1], sum(sizes))]
      time.sleep(0.1)
  seconds = time.perf_counter() - start
  if process.returncode:
    with open(log) as f:
      raise SystemExit("failed: %s\n%s" % (" ".join(args), f.read()[-3000:]))
  return seconds, peaks[0], peaks[1]


def records(paths):
  """Multiset of the parsed records in the files."""
  import tensorflow as tf

  from bert_tf.data import example_codec
  return collections.Counter(
      tuple(sorted((k, tuple(v)) for k, v in example_codec.parse_example(r.numpy()).items()))
      for r in tf.data.TFRecordDataset(paths))


def main(_):
  python = sys.executable
  with tempfile.TemporaryDirectory() as tmp:
    inputs = split_corpus(FLAGS.input_file, tmp, FLAGS.num_files)
    sizes = [os.path.getsize(p) / 1e6 for p in inputs]
    results = common.Results("pretraining_data_beam", {
        "input_file": FLAGS.input_file, "num_files": len(inputs),
        "dupe_factor": FLAGS.dupe_factor, "max_seq_length": FLAGS.max_seq_length})
    results.note("corpus: %.2f MB split into files of %.2f-%.2f MB; %d CPUs, load average "
                 "%.2f at the start" % (os.path.getsize(FLAGS.input_file) / 1e6, min(sizes),
                                        max(sizes), os.cpu_count(), os.getloadavg()[0]))
    outputs = []
    log = os.path.join(tmp, "stderr.txt")
    sequential, peak = 0.0, (0.0, 0.0)
    for i, path in enumerate(inputs):
      outputs.append(os.path.join(tmp, "single-%03d.tfrecord" % i))
      seconds, *rss = run([python, os.path.join(ROOT, "create_pretraining_data.py"),
                          "--input_file=" + path, "--output_file=" + outputs[-1],
                          "--random_seed=%d" % (FLAGS.random_seed + i), *shared_flags()], log)
      sequential += seconds
      peak = (max(peak[0], rss[0]), max(peak[1], rss[1]))
    want = records(outputs)
    count = sum(want.values())
    rows = [("sequential single-file jobs", sequential, peak, {}, {})]
    for workers in FLAGS.workers:
      folder = os.path.join(tmp, "beam-%s" % workers)
      os.mkdir(folder)
      seconds, *rss = run([python, os.path.join(ROOT, "create_pretraining_data_beam.py"),
                          "--input_file=" + os.path.join(tmp, "part-*.txt"),
                          "--output_file=" + os.path.join(folder, "examples"),
                          "--random_seed=%d" % FLAGS.random_seed,
                          "--direct_num_workers=%s" % workers, *shared_flags()], log)
      shards = sorted(os.path.join(folder, f) for f in os.listdir(folder))
      rows.append(("beam, %s worker%s" % (workers, "" if workers == "1" else "s"), seconds, rss,
                   {"shards": len(shards)}, {"same records": records(shards) == want}))
    results.note("speed-up: over the sequential jobs; peak MB: of the run's largest process "
                 "and of all its processes together; load average %.2f at the end" %
                 os.getloadavg()[0])
    for name, seconds, rss, settings, checks in rows:
      results.add(name, {"records": (count, ""), "time": (seconds, "s"),
                         "throughput": (count / seconds, "records/s"),
                         "speed-up": (sequential / seconds, "x"),
                         "peak 1 process": (rss[0], "MB"), "peak all": (rss[1], "MB")},
                  settings, checks)
  results.report()


if __name__ == "__main__":
  app.run(main)
