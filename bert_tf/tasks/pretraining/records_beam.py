"""Apache Beam pipeline that runs create_pretraining_data once per input file, files in parallel.

The unit of work is one input file: file i of the sorted, de-duplicated list is
turned into exactly the records that `create_pretraining_data.py` writes for that
file alone with `--random_seed` = random_seed + i (`pretraining_data.file_examples`,
the same reader, instance generator and encoder). So the records written, as a
multiset over all output shards, are the union of those single-file runs, whatever
the runner, the number of workers or the order they finish in; and a worker holds
one file in memory, never the corpus.

Records go to `<output_prefix>-SSSSS-of-NNNNN` through Beam's WriteToTFRecord;
`num_shards=0` lets the runner choose (one shard per bundle, e.g. per local worker).
"""

import dataclasses
import glob
import logging
import shutil
import time

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from bert_tf.tasks.pretraining import records
from bert_tf.utils import beam_options

SHARD_TEMPLATE = "-SSSSS-of-NNNNN"
_METRICS_NAMESPACE = "bert_tf.tasks.pretraining.records"
_LOGGER = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Settings:
  """The per-run flags of create_pretraining_data.py (the seed is per file)."""
  random_seed: int = 12345
  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  dupe_factor: int = 10
  masked_lm_prob: float = 0.15
  short_seq_prob: float = 0.1
  do_whole_word_mask: bool = False
  mask_token_prob: float = records.MASK_TOKEN_PROB
  random_token_prob: float = records.RANDOM_TOKEN_PROB


def open_input(path):
  """Opens a file on any of Beam's file systems (local, gs://, s3://, hdfs://, ...).

  Always uncompressed: the bytes are read exactly as create_pretraining_data.py reads them.
  """
  return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def check_input_files(input_files, tokenizer):
  """Stops before anything is written if an input file has no text (its run would fail)."""
  for input_file in input_files:
    if not records.has_text(input_file.path, tokenizer, open_input):
      raise records.no_text_error(input_file.path)


def existing_shards(output_prefix):
  """Shards a previous run left under this prefix (a reader would mix them with ours)."""
  pattern = output_prefix + "-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]"
  return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)


def remove_temporary_files(output_prefix):
  """Deletes what WriteToTFRecord left behind when the pipeline failed."""
  folder, base = FileSystems.split(output_prefix)
  pattern = FileSystems.join(folder, "beam-temp-%s-*" % base)
  files = [m.path for m in FileSystems.match([FileSystems.join(pattern, "*")])[0].metadata_list]
  if files:
    FileSystems.delete(files)
  if "://" not in output_prefix:  # local folders stay behind empty; object stores have none
    for path in glob.glob(pattern):
      shutil.rmtree(path, ignore_errors=True)


class CreateFileExamples(beam.DoFn):
  """A beam_options.InputFile -> its serialized records, as its single-file run writes them."""

  def __init__(self, tokenizer, settings):
    self.tokenizer = tokenizer
    self.settings = settings
    self.records = beam.metrics.Metrics.counter(_METRICS_NAMESPACE, "records")
    self.files = beam.metrics.Metrics.counter(_METRICS_NAMESPACE, "files")

  def process(self, input_file):
    s = self.settings
    start = time.monotonic()
    count = 0
    for record in records.file_examples(
        input_file.path, self.tokenizer, s.random_seed + input_file.index, s.max_seq_length,
        s.dupe_factor, s.short_seq_prob, s.masked_lm_prob, s.max_predictions_per_seq,
        s.do_whole_word_mask, opener=open_input, mask_token_prob=s.mask_token_prob,
        random_token_prob=s.random_token_prob):
      count += 1
      yield record
    self.records.inc(count)
    self.files.inc()
    _LOGGER.info("input file %d (%s, %.1f MB): %d records in %.1f s", input_file.index,
                 input_file.path, input_file.size / 1e6, count, time.monotonic() - start)


def build(pipeline, input_files, output_prefix, tokenizer, settings, num_shards=0):
  """Adds read -> create examples -> write shards to `pipeline`; returns the file names."""
  # Largest files first: runners that hand out work in order finish evenly.
  work = sorted(input_files, key=lambda f: (-f.size, f.index))
  return (pipeline
          | "Input files" >> beam.Create(work)  # reshuffled: each file a separate work item
          | "Create examples" >> beam.ParDo(CreateFileExamples(tokenizer, settings))
          | "Write shards" >> beam.io.WriteToTFRecord(
              output_prefix, num_shards=num_shards, shard_name_template=SHARD_TEMPLATE))


def counters(result):
  """{"records": n, "files": n} from a finished pipeline's metrics."""
  return beam_options.counters(result, _METRICS_NAMESPACE)
