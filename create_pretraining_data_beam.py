"""Create pretraining TFRecords from a corpus of many files with Apache Beam (paper section 3.1).

Input file i of the sorted list is processed exactly as create_pretraining_data.py
processes that file alone with --random_seed = random_seed + i; files run in
parallel, and a worker holds one file in memory. Output: <output_file>-00000-of-0000N.

Locally, on all cores (Beam's DirectRunner, one process per core by default):

  python create_pretraining_data_beam.py --input_file='corpus/part-*.txt' \
    --output_file=/tmp/pretraining/tf_examples.tfrecord --vocab_file=$BERT_DIR/vocab.txt \
    --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=5

Every other flag is one of Beam's pipeline options and goes to Beam unchanged:
--runner (DataflowRunner, FlinkRunner, SparkRunner, ...), --direct_num_workers,
--direct_running_mode, --project, --region, --temp_location, --flink_master, ...
See https://beam.apache.org/documentation/runners/capability-matrix/ and the
section "Corpus-scale pretraining data (Apache Beam)" of docs/pretraining.md.
"""

import os
import time

import bert_tf  # noqa: F401  (environment defaults)  # isort: skip
from absl import flags, logging

from bert_tf.utils import cli

beam = cli.import_beam("create_pretraining_data_beam.py")

from bert_tf.errors import UserInputError, io_reason  # noqa: E402
from bert_tf.tasks.pretraining import data_flags, records_beam  # noqa: E402
from bert_tf.utils import beam_options  # noqa: E402

FLAGS = flags.FLAGS
ROOT = os.path.dirname(os.path.abspath(__file__))

data_flags.define(
    input_file_help="Input raw text files: comma-separated globs. File i of the sorted list "
                    "gets seed --random_seed + i.",
    output_file_help="Output prefix: shards are written as <output_file>-SSSSS-of-NNNNN.",
    random_seed_help="Random seed for data generation; input file i uses random_seed + i.")
flags.DEFINE_integer("num_shards", 0,
                     "Number of output shards; 0 (default): the runner decides (one per bundle, "
                     "e.g. one per local worker). A fixed number makes the runner shuffle every "
                     "record, which the local runner does in memory.")
flags.adopt_module_key_flags(cli)  # --help lists the shared flags too

_OWN_FLAGS = ("input_file", "output_file", "vocab_file", "do_lower_case", "strip_accents",
              "do_whole_word_mask", "max_seq_length", "max_predictions_per_seq", "random_seed",
              "dupe_factor", "masked_lm_prob", "short_seq_prob", "mask_token_prob",
              "random_token_prob", "num_shards")


def parse_flags(argv):
  """absl parses this script's flags; everything it does not know is left for Beam."""
  return FLAGS(argv, known_only=True)


def pipeline_options(beam_args):
  """Beam's options; the local runner defaults to one worker process per core."""
  return beam_options.pipeline_options(beam_args, _OWN_FLAGS, ROOT)


def check_flags():
  data_flags.check(FLAGS)
  if FLAGS.num_shards < 0:
    raise UserInputError("--num_shards must be 0 (the runner decides) or positive.")
  if "," in FLAGS.output_file:
    raise UserInputError("--output_file is one prefix here (shards are named "
                         "<output_file>-SSSSS-of-NNNNN), not a list.")
  if "://" not in FLAGS.output_file:  # created, as the runners create --output_dir
    folder = os.path.dirname(os.path.abspath(FLAGS.output_file))
    try:
      os.makedirs(folder, exist_ok=True)
    except OSError as e:
      raise UserInputError("Cannot create the folder of --output_file=%s: %s." % (
          FLAGS.output_file, io_reason(e))) from None


def main(argv):
  options = pipeline_options(argv[1:])
  runner = options.get_all_options()["runner"]
  if runner in ("DirectRunner", "direct"):
    beam_options.quiet_local_runner()
  check_flags()
  tokenizer = data_flags.tokenizer(FLAGS)
  input_files = beam_options.expand_input(FLAGS.input_file, "--input_file")
  left = records_beam.existing_shards(FLAGS.output_file)
  if left:
    raise UserInputError("%d shard(s) of an earlier run are in the way (%s, ...); a reader "
                         "would mix them with this run's. Delete them or choose another "
                         "--output_file." % (len(left), left[0]))
  logging.info("Checking %d input file(s) (%.1f MB) for text", len(input_files),
               sum(f.size for f in input_files) / 1e6)
  records_beam.check_input_files(input_files, tokenizer)
  settings = records_beam.Settings(
      random_seed=FLAGS.random_seed, max_seq_length=FLAGS.max_seq_length,
      max_predictions_per_seq=FLAGS.max_predictions_per_seq, dupe_factor=FLAGS.dupe_factor,
      masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob,
      do_whole_word_mask=FLAGS.do_whole_word_mask, mask_token_prob=FLAGS.mask_token_prob,
      random_token_prob=FLAGS.random_token_prob)
  start = time.monotonic()
  pipeline = beam.Pipeline(options=options)
  records_beam.build(pipeline, input_files, FLAGS.output_file, tokenizer, settings,
                              FLAGS.num_shards)
  logging.info("Running the pipeline on %s (input file i gets seed %d + i)", runner,
               FLAGS.random_seed)
  result = beam_options.run(
      pipeline, lambda: records_beam.remove_temporary_files(FLAGS.output_file))
  counts = records_beam.counters(result)
  shards = records_beam.existing_shards(FLAGS.output_file)
  logging.info("Wrote %d records from %d input file(s) to %d shard(s) %s-*-of-%05d in %.1f s",
               counts.get("records", 0), counts.get("files", 0), len(shards), FLAGS.output_file,
               len(shards), time.monotonic() - start)


if __name__ == "__main__":
  cli.run(main, flags_parser=parse_flags)  # absl leaves Beam's options alone
