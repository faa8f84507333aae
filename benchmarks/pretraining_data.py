"""Speed of create_pretraining_data: bert_tf against the original google-research/bert.

    python -m benchmarks.pretraining_data --input_file=corpus.txt --vocab_file=vocab.txt \
        [--original_dir=/path/to/google-research/bert]

Times bert_tf's faithful path (whole corpus in memory, same records as the original)
stage by stage. With --original_dir (a checkout of google-research/bert, which this
project does not ship), it also runs the original script unmodified on TensorFlow 2
through `tf.compat.v1` in a subprocess, checks that both wrote the same parsed
records, and prints the speed-up. Prints figures only (common.Results).
"""

import os
import sys
import tempfile

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import app, flags
import tensorflow as tf

from benchmarks import common, timing
from bert_tf import tokenization
from bert_tf.data import example_codec
from bert_tf.tasks.pretraining import records

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None,
                    "Corpus: one sentence per line, blank line between documents.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab.")
flags.DEFINE_string("original_dir", None, "Checkout of google-research/bert to compare against.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case input.")
flags.DEFINE_bool("do_whole_word_mask", False, "Whole-word masking.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_integer("dupe_factor", 5, "Passes over the corpus.")
flags.DEFINE_integer("random_seed", 12345, "Seed.")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too

def _flags_list(output_file):
  """The original's flags for the same run (absolute paths: it runs in its own folder)."""
  return ["--input_file=%s" % os.path.abspath(FLAGS.input_file),
          "--output_file=%s" % output_file,
          "--vocab_file=%s" % os.path.abspath(FLAGS.vocab_file),
          "--do_lower_case=%s" % FLAGS.do_lower_case,
          "--do_whole_word_mask=%s" % FLAGS.do_whole_word_mask,
          "--max_seq_length=%d" % FLAGS.max_seq_length,
          "--max_predictions_per_seq=%d" % FLAGS.max_predictions_per_seq,
          "--dupe_factor=%d" % FLAGS.dupe_factor, "--random_seed=%d" % FLAGS.random_seed]


def _parsed(path):
  return [example_codec.parse_example(r.numpy()) for r in tf.data.TFRecordDataset(path)]


def run_ours(output_file):
  """(records written, seconds, {stage: seconds}) of bert_tf's faithful path."""
  stages = {}
  tokenizer, stages["read + tokenize"] = timing.timed(
      lambda: tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case))
  documents, seconds = timing.timed(
      lambda: records.read_documents([FLAGS.input_file], tokenizer))
  stages["read + tokenize"] += seconds
  instances, stages["instances + masking"] = timing.timed(
      lambda: records.create_training_instances(
          None, tokenizer, FLAGS.max_seq_length, FLAGS.dupe_factor, 0.1, 0.15,
          FLAGS.max_predictions_per_seq, records.new_rng(FLAGS.random_seed),
          FLAGS.do_whole_word_mask, documents=documents))
  count, stages["encode + write"] = timing.timed(
      lambda: records.write_instance_to_example_files(
          instances, tokenizer, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
          [output_file]))
  return count, sum(stages.values()), stages


def main(_):
  results = common.Results("pretraining_data", {
      "input_file": FLAGS.input_file, "dupe_factor": FLAGS.dupe_factor,
      "max_seq_length": FLAGS.max_seq_length, "do_whole_word_mask": FLAGS.do_whole_word_mask})
  with tempfile.TemporaryDirectory() as tmp:
    ours_file = os.path.join(tmp, "ours.tfrecord")
    count, seconds, stages = run_ours(ours_file)
    results.note("input: %.2f MB" % (os.path.getsize(FLAGS.input_file) / 1e6))
    results.add("bert_tf", {"records": (count, ""), "time": (seconds, "s"),
                            "throughput": (count / seconds, "records/s"),
                            "speed-up": (None, "x")})
    if FLAGS.original_dir:
      original_file = os.path.join(tmp, "original.tfrecord")
      original_dir = os.path.abspath(FLAGS.original_dir)
      original = common.run_side(sys.executable, "original", "run",
                                 {"argv": _flags_list(original_file)},
                                 failure="the original failed", first_on_path=original_dir,
                                 cwd=original_dir)["seconds"]
      if not os.path.exists(original_file):
        sys.exit("the original wrote no %s" % original_file)
      same = _parsed(ours_file) == _parsed(original_file)
      results.add("original google-research/bert", {
          "records": (count, ""), "time": (original, "s"),
          "throughput": (count / original, "records/s"),
          "speed-up": (original / seconds, "x")}, checks={"identical parsed records": same})
    else:
      results.note("(pass --original_dir=<google-research/bert checkout> to time the original)")
    results.note("speed-up: bert_tf's speed over the original's")
    for name, value in stages.items():
      results.add("bert_tf " + name, {"stage time": (value, "s")})
  results.report()


if __name__ == "__main__":
  flags.mark_flags_as_required(["input_file", "vocab_file"])
  app.run(main)
