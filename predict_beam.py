"""Run any bert_tf export over a corpus with Apache Beam: classify, tag, answer or embed.

  python predict_beam.py --export_dir=/tmp/mrpc_savedmodel --input='rows/part-*.jsonl' \
    --output=/tmp/predictions/mrpc

JSONL rows hold the export's inputs by name (text_a/text_b, question/context, text,
sentences, context/ending0..3) and an id (--id_field); with --input_format=text each line
is one text of a one-input export and its line number is its id. Writes
<output>-SSSSS-of-NNNNN.jsonl (the row's id and the export's answers), and bad rows with
their reason to <output>-dead_letter-00000-of-00001.jsonl. Every other flag is one of Beam's
pipeline options (--runner, --direct_num_workers, --direct_running_mode, --project, ...);
see docs/beam_inference.md.
"""

import os
import time

import bert_tf  # noqa: F401  (environment defaults)  # isort: skip
from absl import flags, logging

from bert_tf.utils import cli

beam = cli.import_beam("predict_beam.py")

from bert_tf.errors import UserInputError  # noqa: E402
from bert_tf.inference import beam_inference  # noqa: E402
from bert_tf.utils import beam_options  # noqa: E402

FLAGS = flags.FLAGS
ROOT = os.path.dirname(os.path.abspath(__file__))

flags.DEFINE_string("export_dir", None,
                    "A bert_tf export: the folder run_classifier.py / run_ner.py / run_squad.py "
                    "/ run_swag.py --export_dir or export_text_embedder.py wrote.")
flags.DEFINE_string("input", None, "Input files: comma-separated globs (local, gs://, ...).")
flags.DEFINE_string("output", None,
                    "Output prefix: answers go to <output>-SSSSS-of-NNNNN.<format>, bad rows to "
                    "<output>-dead_letter-00000-of-00001.jsonl.")
flags.DEFINE_string("id_field", "id", "The JSONL field holding each row's id (a string or an "
                    "integer), written beside its answers.")
flags.DEFINE_enum("input_format", "jsonl", ["jsonl", "text"],
                  "jsonl: one JSON object a line, fields named as the export's inputs; text: "
                  "one text a line for a one-input export, the line number (from 1) its id.")
flags.DEFINE_enum("output_format", "jsonl", ["jsonl", "tfrecord", "parquet"],
                  "jsonl for every export; tfrecord (tf.train.Example: id, embedding) or "
                  "parquet (columns id, embedding) for a text embedder's embeddings.")
flags.DEFINE_integer("batch_size", 32, "Rows per call of the export (rows of similar length "
                     "are batched together).")
flags.DEFINE_integer("num_shards", 0, "Output shards; 0 (default): one per 4 MB of input. A "
                     "shard is sorted in a worker's memory before it is written.")
flags.DEFINE_integer("max_row_bytes", 1 << 20, "A row longer than this many bytes is a dead "
                     "letter (one huge row would hold a worker's memory).")

_OWN_FLAGS = ("export_dir", "input", "output", "id_field", "input_format", "output_format",
              "batch_size", "num_shards", "max_row_bytes")


def parse_flags(argv):
  """absl parses this script's flags; everything it does not know is left for Beam (cli.run
  passes it to main)."""
  return FLAGS(argv, known_only=True)


def pipeline_options(beam_args):
  """Beam's options; the local runner defaults to one worker process per core."""
  return beam_options.pipeline_options(beam_args, _OWN_FLAGS, ROOT, share_cores=True)


def check_flags():
  """Everything that can be wrong before the pipeline starts: one line each."""
  cli.require_flags(FLAGS, "export_dir", "input", "output")
  if FLAGS.batch_size < 1:
    raise UserInputError("--batch_size=%d must be positive." % FLAGS.batch_size)
  if FLAGS.num_shards < 0:
    raise UserInputError("--num_shards must be 0 (one per 4 MB of input) or positive.")
  if FLAGS.max_row_bytes < 1:
    raise UserInputError("--max_row_bytes must be positive.")
  if "," in FLAGS.output:
    raise UserInputError("--output is one prefix (files are named <output>-SSSSS-of-NNNNN), "
                         "not a list.")
  info = beam_inference.describe_export(FLAGS.export_dir)
  if FLAGS.input_format == "text" and len(info.inputs) != 1:
    raise UserInputError(
        "--input_format=text gives one text a row, but %s takes %d inputs (%s): pass JSONL "
        "rows with those fields." % (FLAGS.export_dir, len(info.inputs), ", ".join(info.inputs)))
  if FLAGS.output_format != "jsonl" and not info.embedder:
    raise UserInputError("--output_format=%s is for a text embedder's embeddings; %s is a %s "
                         "export: use --output_format=jsonl." % (
                             FLAGS.output_format, FLAGS.export_dir, info.task))
  if FLAGS.output_format == "parquet":
    try:
      import pyarrow.parquet  # noqa: F401
    except ImportError:
      raise UserInputError("--output_format=parquet needs pyarrow, which is not installed; "
                           "use --output_format=tfrecord or jsonl.") from None
  input_files = beam_options.expand_input(FLAGS.input, "--input")
  beam_inference.check_output(FLAGS.output)
  return info, input_files


def main(argv):
  options = pipeline_options(argv[1:])
  runner = options.get_all_options()["runner"]
  if runner in ("DirectRunner", "direct"):
    # The workers print their own progress; RunInference's has no memory figures here.
    beam_options.quiet_local_runner("apache_beam.ml.inference.base")
  info, input_files = check_flags()
  settings = beam_inference.Settings(
      input_format=FLAGS.input_format, id_field=FLAGS.id_field, batch_size=FLAGS.batch_size,
      max_row_bytes=FLAGS.max_row_bytes,
      groups=beam_inference.default_groups(input_files, FLAGS.batch_size),
      num_shards=FLAGS.num_shards or beam_inference.default_shards(input_files),
      output_format=FLAGS.output_format, several_files=len(input_files) > 1)
  others = beam_inference.other_runs_files(FLAGS.output, settings)
  if others:
    raise UserInputError(
        "%d file(s) of an earlier run with another --num_shards or --output_format are in the "
        "way (%s, ...); a reader of %s-* would mix them with this run's. Delete them or "
        "choose another --output." % (len(others), others[0], FLAGS.output))
  for stale in beam_inference.stale_temp_dirs(FLAGS.output):
    logging.info("Removing %s, left by a run that did not finish", stale)
    beam_inference.remove_temp_dir(stale)
  temp_dir = beam_inference.temp_dir_of(FLAGS.output)
  start = time.monotonic()
  pipeline = beam.Pipeline(options=options)
  beam_inference.build(pipeline, info, input_files, FLAGS.output, settings, temp_dir)
  logging.info("Running %s export %s over %d input file(s) (%.1f MB) on %s", info.task,
               FLAGS.export_dir, len(input_files), sum(f.size for f in input_files) / 1e6,
               runner)
  result = beam_options.run(pipeline, lambda: beam_inference.remove_temp_dir(temp_dir))
  seconds = beam_inference.run_seconds(start)
  counts = beam_inference.counters(result)
  rows = counts.get("rows", 0)
  logging.info("%d rows (%d answered, %d dead letters) in %d batches in %.1f s: %.1f rows/s. "
               "Answers: %s-*-of-%05d.%s; dead letters: %s-%s-00000-of-00001.jsonl",
               rows, counts.get("answered", 0), counts.get("dead_letters", 0),
               counts.get("batches", 0), seconds, rows / seconds, FLAGS.output,
               settings.num_shards, beam_inference.EXTENSIONS[settings.output_format],
               FLAGS.output, beam_inference.DEAD_LETTER)


if __name__ == "__main__":
  cli.run(main, flags_parser=parse_flags)
