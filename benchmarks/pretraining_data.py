"""Speed of create_pretraining_data: bert_tf against the original google-research/bert.

    python benchmarks/pretraining_data.py --input_file=corpus.txt --vocab_file=vocab.txt \
        [--original_dir=/path/to/google-research/bert]

Times bert_tf's faithful path (whole corpus in memory, same records as the original)
stage by stage. With --original_dir (a checkout of google-research/bert, which this
project does not ship), it also runs the original script unmodified on TensorFlow 2
through `tf.compat.v1` in a subprocess, checks that both wrote the same parsed
records, and prints the speed-up. Prints figures only.
"""

import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import bert_tf  # noqa: E402,F401
from absl import app, flags  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf import example_codec, pretraining_data, tokenization  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Corpus: one sentence per line, blank line between documents.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab.")
flags.DEFINE_string("original_dir", None, "Checkout of google-research/bert to compare against.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case input.")
flags.DEFINE_bool("do_whole_word_mask", False, "Whole-word masking.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_integer("dupe_factor", 5, "Passes over the corpus.")
flags.DEFINE_integer("random_seed", 12345, "Seed.")

# Runs the original script with TF1 names served by tf.compat.v1 and a minimal `six`.
_ORIGINAL_SHIM = r"""
import sys, types, time
import tensorflow as tf
six = types.ModuleType("six")
six.PY2, six.PY3, six.string_types = False, True, (str,)
six.iteritems = lambda d: iter(d.items())
sys.modules["six"] = six
sys.modules["tensorflow"] = tf.compat.v1
sys.path.insert(0, sys.argv[1])
import create_pretraining_data as original
start = time.perf_counter()
try:
  tf.compat.v1.app.run(original.main, argv=[sys.argv[0]] + sys.argv[2:])
except SystemExit:
  pass
print("ORIGINAL_SECONDS %.3f" % (time.perf_counter() - start))
"""


def _flags_list(output_file):
  return ["--input_file=%s" % FLAGS.input_file, "--output_file=%s" % output_file,
          "--vocab_file=%s" % FLAGS.vocab_file, "--do_lower_case=%s" % FLAGS.do_lower_case,
          "--do_whole_word_mask=%s" % FLAGS.do_whole_word_mask,
          "--max_seq_length=%d" % FLAGS.max_seq_length,
          "--max_predictions_per_seq=%d" % FLAGS.max_predictions_per_seq,
          "--dupe_factor=%d" % FLAGS.dupe_factor, "--random_seed=%d" % FLAGS.random_seed]


def _parsed(path):
  return [example_codec.parse_example(r.numpy()) for r in tf.data.TFRecordDataset(path)]


def run_ours(output_file):
  stages = {}
  start = time.perf_counter()
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  documents = pretraining_data.read_documents([FLAGS.input_file], tokenizer)
  stages["read + tokenize"] = time.perf_counter() - start
  t = time.perf_counter()
  instances = pretraining_data.create_training_instances(
      None, tokenizer, FLAGS.max_seq_length, FLAGS.dupe_factor, 0.1, 0.15,
      FLAGS.max_predictions_per_seq, pretraining_data.new_rng(FLAGS.random_seed),
      FLAGS.do_whole_word_mask, documents=documents)
  stages["instances + masking"] = time.perf_counter() - t
  t = time.perf_counter()
  count = pretraining_data.write_instance_to_example_files(
      instances, tokenizer, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq, [output_file])
  stages["encode + write"] = time.perf_counter() - t
  return count, time.perf_counter() - start, stages


def main(_):
  with tempfile.TemporaryDirectory() as tmp:
    ours_file = os.path.join(tmp, "ours.tfrecord")
    count, seconds, stages = run_ours(ours_file)
    size = os.path.getsize(FLAGS.input_file) / 1e6
    print("input: %s (%.2f MB), dupe_factor %d, seq %d" % (FLAGS.input_file, size,
                                                          FLAGS.dupe_factor, FLAGS.max_seq_length))
    print("bert_tf: %d records in %.2f s = %.0f records/s" % (count, seconds, count / seconds))
    for name, value in stages.items():
      print("  %-20s %.2f s" % (name, value))
    if not FLAGS.original_dir:
      print("(pass --original_dir=<google-research/bert checkout> to time the original)")
      return
    original_file = os.path.join(tmp, "original.tfrecord")
    result = subprocess.run(
        [sys.executable, "-c", _ORIGINAL_SHIM, FLAGS.original_dir] + _flags_list(original_file),
        capture_output=True, text=True)
    marker = [l for l in result.stdout.splitlines() if l.startswith("ORIGINAL_SECONDS")]
    if not marker or not os.path.exists(original_file):
      print("the original failed:\n%s" % result.stderr[-3000:])
      return
    original_seconds = float(marker[0].split()[1])
    same = _parsed(ours_file) == _parsed(original_file)
    print("original: %d records in %.2f s = %.0f records/s" %
          (count, original_seconds, count / original_seconds))
    print("identical parsed records: %s" % same)
    print("speed-up: %.2fx" % (original_seconds / seconds))


if __name__ == "__main__":
  flags.mark_flags_as_required(["input_file", "vocab_file"])
  app.run(main)
