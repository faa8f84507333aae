"""Corpus-scale inference with any bert_tf export on Apache Beam (predict_beam.py).

Rows (JSONL objects or text lines) -> checked inputs -> length-sorted batches -> RunInference
with `BertExportModelHandler` -> one JSON line (or TFRecord / Parquet record) per row, and one
dead-letter line per bad row. Beam's own TensorFlow handler loads models with Keras, which
under Keras 3 cannot load a SavedModel (apache/beam#30616), so this handler loads the export
with `tf.saved_model.load`, once per worker process (RunInference shares it between the
process's threads), and calls its `serving_default`.

Reruns write the same bytes whatever the runner or number of workers: each row's batch is
fixed by the input alone (rows are dealt into groups by a hash of their position, each group
sorted by length, then position, and cut into `batch_size` rows), each row's shard is a hash
of its position, and each shard is written sorted by input position. Beam itself guarantees
neither: BatchElements cuts batches from bundles (which vary with runner and workers) and
WriteToText deals rows to shards from a random start, in arrival order. So shards are written
here as Beam's file sinks write theirs: to temporary files, renamed to their final names only
after every shard was written.
"""

import dataclasses
import io
import json
import logging
import os
import shutil
import time
import typing
import uuid
import zlib

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.ml.inference import base as beam_inference_base

from bert_tf import export
from bert_tf.errors import UserInputError, io_reason
from bert_tf.utils import beam_options, progress

_METRICS_NAMESPACE = "bert_tf.inference.beam_inference"
_LOGGER = logging.getLogger(__name__)
SHARD_TEMPLATE = "%s-%05d-of-%05d.%s"
DEAD_LETTER = "dead_letter"
EXTENSIONS = {"jsonl": "jsonl", "tfrecord": "tfrecord", "parquet": "parquet"}
TEXT_EMBEDDER = "text_embedder"
# Inputs that may be empty: a pair classifier's text_b (the single-text layout).
MAY_BE_EMPTY = frozenset({"text_b"})
# Export tasks whose serving_default takes raw text and answers per row.
TASKS = ("classification", "regression", "multi_label", "ner", "squad", "multiple_choice",
         TEXT_EMBEDDER)
# Rows of input per batching group: a group is held in memory and sorted by length.
GROUP_BYTES = 4 << 20
SHARD_BYTES = 4 << 20  # default: one output shard per this much input




class _NoMemoryNote(logging.Filter):
  """Drops Beam's note, at every model load, that it cannot read the process's memory: its
  RunInference finds the `resource` module missing when an optional import beside it fails."""

  def filter(self, record):
    return "memory usage cannot be fetched" not in str(record.msg)


logging.getLogger().addFilter(_NoMemoryNote())  # Beam logs it on the root logger


# ------------------------------------------------------------------------- the export

@dataclasses.dataclass(frozen=True)
class ExportInfo:
  """What the pipeline needs to know about an export, read from its metadata only."""
  export_dir: str
  task: str
  inputs: tuple  # serving_default's input names, in the signature's order
  outputs: tuple
  metadata: dict = dataclasses.field(compare=False, hash=False, repr=False)

  @property
  def embedder(self):
    return self.task == TEXT_EMBEDDER


def describe_export(export_dir):
  """ExportInfo of a bert_tf export folder; a UserInputError naming the folder otherwise."""
  export_dir = os.fspath(export_dir)
  if not FileSystems.exists(export_dir):
    raise UserInputError("--export_dir=%s does not exist." % export_dir)
  if not FileSystems.exists(FileSystems.join(export_dir, "saved_model.pb")):
    raise UserInputError("--export_dir=%s is not a SavedModel (no saved_model.pb); pass the "
                         "folder a runner's --export_dir wrote." % export_dir)
  try:
    metadata = export.read_metadata(export_dir)
    signature = metadata["signatures"][export.DEFAULT_SIGNATURE]
    inputs, outputs = tuple(signature["inputs"]), tuple(signature["outputs"])
  except Exception:  # noqa: BLE001  (missing, unreadable or another tool's)
    raise UserInputError(
        "--export_dir=%s is not a bert_tf export: %s/%s with a %s signature is missing or "
        "unreadable." % (export_dir, export.METADATA_DIR, export.METADATA_FILE,
                         export.DEFAULT_SIGNATURE)) from None
  task = metadata.get("task")
  if task not in TASKS:
    raise UserInputError("--export_dir=%s is a %r export; predict_beam.py runs the raw-text "
                         "exports (%s)." % (export_dir, task, ", ".join(TASKS)))
  return ExportInfo(export_dir, task, inputs, outputs, metadata)


# ------------------------------------------------------------------------- reading rows

@dataclasses.dataclass(frozen=True)
class Settings:
  """How rows are read and batched (the flags of predict_beam.py)."""
  input_format: str = "jsonl"
  id_field: str = "id"
  batch_size: int = 32
  max_row_bytes: int = 1 << 20
  groups: int = 1  # batching groups (see the module docstring)
  num_shards: int = 1
  output_format: str = "jsonl"
  several_files: bool = False  # text ids name their file


def text_id(input_file, line, several_files):
  """A text line's id: its line number (from 1), after its file's path if several match."""
  return "%s:%d" % (input_file.path, line) if several_files else line


def parse_row(raw, input_file, line, info, settings):
  """(key, inputs) for a good row, or a dead-letter dict (id where readable, file, line,
  error) for a bad one. The key is (file index, line number, id): input position first."""
  where = {"file": input_file.path, "line": line}
  is_text = settings.input_format == "text"
  row_id = text_id(input_file, line, settings.several_files) if is_text else None

  def dead(error):
    return dict({"id": row_id}, **where, error=error)

  if len(raw) > settings.max_row_bytes:
    return dead("row of %d bytes is over --max_row_bytes=%d" % (len(raw), settings.max_row_bytes))
  try:
    text = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    if not is_text:  # the id, if the rest of the row is readable
      row_id = _readable_id(raw, settings.id_field)
    return dead("not UTF-8 (at byte offset %d)" % e.start)
  if is_text:
    inputs = {info.inputs[0]: text}
  else:
    if not text.strip():
      return dead("empty line")
    try:
      row = json.loads(text)
    except ValueError as e:
      return dead("malformed JSON: %s" % e)
    if not isinstance(row, dict):
      return dead("not a JSON object")
    row_id = row.get(settings.id_field)
    if settings.id_field not in row:
      return dead("no %r field (--id_field)" % settings.id_field)
    if isinstance(row_id, bool) or not isinstance(row_id, (str, int)):
      row_id = None
      return dead("the %r field is not a string or an integer" % settings.id_field)
    inputs = {}
    for name in info.inputs:
      if name not in row:
        return dead("missing input field %r (the export takes %s)" % (
            name, ", ".join(info.inputs)))
      if not isinstance(row[name], str):
        return dead("input field %r is not a string" % name)
      inputs[name] = row[name]
  for name, value in inputs.items():
    if name not in MAY_BE_EMPTY and not value.strip():
      return dead("empty text in %r" % name)
  return (input_file.index, line, row_id), inputs


def _readable_id(raw, id_field):
  try:
    row_id = json.loads(raw.decode("utf-8", errors="replace")).get(id_field)
  except (ValueError, AttributeError):
    return None
  return row_id if isinstance(row_id, (str, int)) and not isinstance(row_id, bool) else None


def row_length(inputs):
  return sum(len(v) for v in inputs.values())


def _hash(*parts):
  """A hash that is the same in every process (Python's own hash of a str is salted)."""
  return zlib.crc32(repr(parts).encode("utf-8"))


@beam.typehints.with_output_types(typing.Tuple[typing.Any, typing.Any])
class ReadRows(beam.DoFn):
  """A beam_options.InputFile -> its rows, each ("ok", key, inputs) or ("dead", record)."""

  def __init__(self, info, settings):
    self.info, self.settings = info, settings
    self.rows = beam.metrics.Metrics.counter(_METRICS_NAMESPACE, "rows")

  def process(self, input_file):
    # AUTO: a .gz or .bz2 file is read decompressed, anything else as it is.
    with FileSystems.open(input_file.path, compression_type=CompressionTypes.AUTO) as f:
      line = 0
      for raw in f:
        line += 1
        raw = raw.rstrip(b"\n").rstrip(b"\r")
        self.rows.inc()
        parsed = parse_row(raw, input_file, line, self.info, self.settings)
        if isinstance(parsed, dict):
          yield beam.pvalue.TaggedOutput(DEAD_LETTER, parsed)
        else:
          yield parsed


def batches_of_group(group_rows, batch_size):
  """A group's rows sorted by length, then input position, cut into batches: similar
  lengths share a batch (little padding), and the same input gives the same batches."""
  rows = sorted(group_rows, key=lambda kv: (row_length(kv[1]), kv[0][:2]))
  return [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]


# ------------------------------------------------------------------------- the model

class BertExportModelHandler(beam_inference_base.ModelHandler):
  """RunInference's handler for a bert_tf export: a batch of {input name: text} dicts in,
  one answer dict per row out (`answers_of`); a row the export refuses answers
  {"error": reason} instead of failing the batch.

  The model is loaded once per worker process; RunInference shares it between the process's
  threads. `large_model=True` shares one copy between the processes of a machine instead.
  In a pipeline of your own, `batch_elements_kwargs` asks Beam's batching for `batch_size`
  rows; predict_beam.py hands over its own length-sorted batches instead."""

  def __init__(self, info, batch_size=32, large_model=False):
    super().__init__(min_batch_size=1, max_batch_size=batch_size, large_model=large_model)
    self.info = info
    self.batch_size = batch_size

  def load_model(self):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)
    return LoadedExport(tf.saved_model.load(self.info.export_dir))

  def run_inference(self, batch, model, inference_args=None):
    import tensorflow as tf
    _progress().update(len(batch))
    try:
      answers = answers_of(self.info, _call(model, self.info, batch))
    except tf.errors.OpError:  # a row the export refuses: find it, answer the others
      answers = []
      for row in batch:
        try:
          answers.extend(answers_of(self.info, _call(model, self.info, [row])))
        except tf.errors.OpError as e:
          answers.append({"error": "the export refused the row: %s" % (
              e.message.strip().splitlines() or ["?"])[0]})
    return [beam_inference_base.PredictionResult(row, answer)
            for row, answer in zip(batch, answers)]

  def get_num_bytes(self, batch):
    return sum(len(v.encode("utf-8")) for row in batch for v in row.values())

  def get_metrics_namespace(self):
    return "BertTfExport"


class LoadedExport:
  """The loaded SavedModel and its serving_default: holding the root keeps the variables the
  signature reads alive."""

  def __init__(self, root):
    self.root = root
    self.signature = root.signatures[export.DEFAULT_SIGNATURE]

  def __call__(self, **inputs):
    return self.signature(**inputs)


_PROGRESS = []


class _LogStream:
  """A stream whose lines go to this module's log: a worker's log reaches the runner's."""

  def write(self, text):
    if text.strip():
      _LOGGER.info(text.strip())

  def flush(self):
    pass


def _progress():
  """This worker process's progress line (rows/s, every 30 s, in its log)."""
  if not _PROGRESS:
    _PROGRESS.append(progress.Progress(None, "rows", "worker %d" % os.getpid(), _LogStream(),
                                       interval=30))
  return _PROGRESS[0]


def _call(signature, info, batch):
  import tensorflow as tf
  return signature(**{name: tf.constant([row[name] for row in batch], tf.string)
                      for name in info.inputs})


def _value(array):
  """A numpy value as JSON: bytes decoded, arrays as lists (float32 exactly, as doubles)."""
  if isinstance(array, bytes):
    return array.decode("utf-8", errors="replace")
  if array.dtype.kind in "SO":
    return ([_value(a) for a in array] if array.ndim else
            array.item().decode("utf-8", errors="replace"))
  return array.tolist()


def answers_of(info, outputs):
  """The signature's outputs of a batch -> one dict per row, JSON-ready: every output by
  its name; NER's padded entity arrays become a list of entities, a multi-label export's
  `labels` drops its padding."""
  outputs = {name: tensor.numpy() for name, tensor in outputs.items()}
  rows = len(next(iter(outputs.values())))
  answers = []
  for i in range(rows):
    if info.task == "ner":
      count = int(outputs["entity_count"][i])
      answer = {"entities": [
          {"text": _value(outputs["entity_texts"][i][k]),
           "type": _value(outputs["entity_types"][i][k]),
           "start": int(outputs["entity_starts"][i][k]),
           "end": int(outputs["entity_ends"][i][k]),
           "score": float(outputs["entity_scores"][i][k])} for k in range(count)]}
    else:
      answer = {name: _value(value[i]) for name, value in sorted(outputs.items())}
      if info.task == "multi_label":
        answer["labels"] = [name for name in answer["labels"] if name]
    answers.append(answer)
  return answers


@beam.typehints.with_output_types(typing.Tuple[int, typing.Any])
class SplitAnswers(beam.DoFn):
  """(key, PredictionResult) -> (shard, (position, record)); refused rows -> dead letters."""

  def __init__(self, info, settings):
    self.info, self.settings = info, settings
    self.answered = beam.metrics.Metrics.counter(_METRICS_NAMESPACE, "answered")

  def process(self, element):
    key, result = element
    file_index, line, row_id = key
    answer = result.inference
    if "error" in answer:
      yield beam.pvalue.TaggedOutput(DEAD_LETTER, (key, {"id": row_id, "line": line,
                                                         "error": answer["error"]}))
      return
    self.answered.inc()
    shard = _hash(file_index, line) % self.settings.num_shards
    yield shard, ((file_index, line), encode_record(row_id, answer, self.settings.output_format))


def encode_record(row_id, answer, output_format):
  """One output record: a JSON line, or for embeddings a tf.train.Example or a Parquet row."""
  if output_format == "jsonl":
    return json.dumps(dict({"id": row_id}, **answer), ensure_ascii=False)
  embedding = answer["embedding"]
  if output_format == "parquet":
    return (str(row_id), embedding)
  import tensorflow as tf
  return tf.train.Example(features=tf.train.Features(feature={
      "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[str(row_id).encode()])),
      "embedding": tf.train.Feature(float_list=tf.train.FloatList(value=embedding)),
  })).SerializeToString()


# ------------------------------------------------------------------------- writing

def shard_name(prefix, index, count, extension):
  return SHARD_TEMPLATE % (prefix, index, count, extension)


def output_names(prefix, settings):
  """{final path: None} of every file a run writes (the answers' shards, the dead letters)."""
  ext = EXTENSIONS[settings.output_format]
  names = [shard_name(prefix, i, settings.num_shards, ext) for i in range(settings.num_shards)]
  return names + [shard_name("%s-%s" % (prefix, DEAD_LETTER), 0, 1, "jsonl")]


class WriteShard(beam.DoFn):
  """(shard, records) -> the shard written, sorted by input position, to a temporary file;
  yields (temporary path, final path)."""

  def __init__(self, temp_dir, prefix, count, output_format):
    self.temp_dir, self.prefix, self.count, self.format = temp_dir, prefix, count, output_format

  def process(self, element):
    shard, records = element
    records = sorted((r for r in records if r is not None), key=lambda r: r[0])
    if self.prefix.endswith("-" + DEAD_LETTER):
      final, ext = shard_name(self.prefix, shard, self.count, "jsonl"), "jsonl"
    else:
      ext = EXTENSIONS[self.format]
      final = shard_name(self.prefix, shard, self.count, ext)
    temp = FileSystems.join(self.temp_dir, os.path.basename(final))
    if ext == "parquet":
      _write_parquet(temp, [r[1] for r in records])
    else:
      with FileSystems.create(temp) as f:
        if ext == "tfrecord":
          for _, record in records:
            f.write(_tfrecord_frame(record))
        else:
          for _, record in records:
            f.write(record.encode("utf-8") + b"\n")
    yield temp, final


def _tfrecord_frame(data):
  """One TFRecord: length, masked CRC32C of it, data, masked CRC32C of the data."""
  import struct

  from apache_beam.io.tfrecordio import _TFRecordUtil
  header = struct.pack("<Q", len(data))
  return (header + struct.pack("<I", _TFRecordUtil._masked_crc32c(header)) + data +
          struct.pack("<I", _TFRecordUtil._masked_crc32c(data)))


def _write_parquet(path, rows):
  import pyarrow as pa
  import pyarrow.parquet as pq
  table = pa.table({"id": pa.array([r[0] for r in rows], pa.string()),
                    "embedding": pa.array([r[1] for r in rows], pa.list_(pa.float32()))})
  buffer = io.BytesIO()
  pq.write_table(table, buffer)
  with FileSystems.create(path) as f:
    f.write(buffer.getvalue())


def finalize(written, temp_dir):
  """Renames every temporary shard to its final name (only once all are written), then
  removes the temporary folder: a run killed before this leaves the earlier files as they
  were; one killed during it, some shards new and some old, which a rerun replaces."""
  written = sorted(written)
  if written:
    FileSystems.rename([t for t, _ in written], [f for _, f in written])
  remove_temp_dir(temp_dir)
  return [f for _, f in written]


def remove_temp_dir(temp_dir):
  """Deletes a temporary folder of shards (object stores: the objects under it)."""
  try:
    if "://" in temp_dir:
      files = [m.path for m in FileSystems.match([temp_dir + "/*"])[0].metadata_list]
      if files:
        FileSystems.delete(files)
    elif os.path.isdir(temp_dir):
      shutil.rmtree(temp_dir)
  except Exception:  # noqa: BLE001  (cleanup only)
    _LOGGER.warning("Could not remove the temporary folder %s.", temp_dir)


def temp_dir_of(prefix):
  folder, base = FileSystems.split(prefix)
  return FileSystems.join(folder, ".%s.beam-temp-%s" % (base, uuid.uuid4().hex[:12]))


def stale_temp_dirs(prefix):
  """Temporary folders earlier runs under this prefix left (killed before finishing)."""
  folder, base = FileSystems.split(prefix)
  pattern = FileSystems.join(folder, ".%s.beam-temp-*" % base)
  found = set()
  for m in FileSystems.match([FileSystems.join(pattern, "*")])[0].metadata_list:
    found.add(FileSystems.split(m.path)[0])
  if "://" not in prefix:
    import glob
    found.update(glob.glob(pattern))
  return sorted(found)


def other_runs_files(prefix, settings):
  """Shards under this prefix that this run will not replace (another --num_shards or
  --output_format): a reader of PREFIX-* would mix them with this run's."""
  ours = set(output_names(prefix, settings))
  pattern = prefix + "-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9].*"
  found = [m.path for m in FileSystems.match([pattern])[0].metadata_list]
  return sorted(p for p in found if p not in ours)


def check_output(prefix):
  """The folder of PREFIX exists (created) and takes files; one line otherwise."""
  if "://" in prefix:
    return
  folder = os.path.dirname(os.path.abspath(prefix))
  probe = os.path.join(folder, ".%s.probe-%s" % (os.path.basename(prefix), uuid.uuid4().hex))
  try:
    os.makedirs(folder, exist_ok=True)
    with open(probe, "w"):
      pass
    os.remove(probe)
  except OSError as e:
    raise UserInputError("Cannot write under --output=%s: %s." % (prefix, io_reason(e))) from None


# ------------------------------------------------------------------------- the pipeline

def _write(pcoll, label, temp_dir, prefix, count, output_format):
  """(shard, record) -> GroupByKey with an empty entry per shard (every shard is written,
  even empty, so a rerun replaces all of an earlier run's) -> temporary files."""
  empty = (pcoll.pipeline | "%s: every shard" % label >> beam.Create(
      [(i, None) for i in range(count)]))
  return ((pcoll, empty) | "%s: flatten" % label >> beam.Flatten()
          | "%s: group" % label >> beam.GroupByKey()
          | "%s: write" % label >> beam.ParDo(WriteShard(temp_dir, prefix, count,
                                                         output_format)))


def build(pipeline, info, input_files, prefix, settings, temp_dir):
  """Adds read -> batch -> RunInference -> write to `pipeline`."""
  handler = beam_inference_base.KeyedModelHandler(
      BertExportModelHandler(info, settings.batch_size)).with_no_batching()
  # Largest files first: runners that hand out work in order finish evenly.
  work = sorted(input_files, key=lambda f: (-f.size, f.index))
  rows = (pipeline | "Input files" >> beam.Create(work)
          | "Read rows" >> beam.ParDo(ReadRows(info, settings)).with_outputs(
              DEAD_LETTER, main="rows"))
  groups = settings.groups
  batches = (rows.rows
             | "Key by group" >> beam.Map(lambda kv: (_hash(*kv[0][:2]) % groups, kv))
             | "Group" >> beam.GroupByKey()
             | "Sort and cut" >> beam.FlatMap(
                 lambda group: batches_of_group(group[1], settings.batch_size))
             | "Spread batches" >> beam.Reshuffle()
             | "Count batches" >> beam.ParDo(beam_options.Count(_METRICS_NAMESPACE, "batches")))
  answers = (batches | "RunInference" >> beam_inference_base.RunInference(handler)
             | "Split answers" >> beam.ParDo(SplitAnswers(info, settings)).with_outputs(
                 DEAD_LETTER, main="answers"))
  refused = answers[DEAD_LETTER] | "Refused rows" >> beam.Map(
      lambda kv: dict(kv[1], file=input_files[kv[0][0]].path))
  dead = ((rows[DEAD_LETTER], refused) | "Dead letters" >> beam.Flatten()
          | "Count dead letters" >> beam.ParDo(beam_options.Count(_METRICS_NAMESPACE,
                                                                  "dead_letters"))
          | "Dead letter records" >> beam.Map(lambda d: (0, (
              (d["file"], d["line"]), json.dumps(d, ensure_ascii=False)))))
  written = (
      (_write(answers.answers, "Answers", temp_dir, prefix, settings.num_shards,
              settings.output_format),
       _write(dead, "Dead letters", temp_dir, "%s-%s" % (prefix, DEAD_LETTER), 1, "jsonl"))
      | "All written" >> beam.Flatten())
  return (written | "Collect" >> beam.combiners.ToList()
          | "Finalize" >> beam.Map(finalize, temp_dir))


def counters(result):
  """{"rows": n, "batches": n, "dead_letters": n, ...} from a finished pipeline's metrics."""
  return beam_options.counters(result, _METRICS_NAMESPACE,
                               ("rows", "answered", "batches", "dead_letters"))


def default_groups(input_files, batch_size):
  """Batching groups: one per GROUP_BYTES of input (a group is sorted in memory)."""
  total = sum(f.size for f in input_files)
  return max(1, -(-total // GROUP_BYTES))


def default_shards(input_files):
  total = sum(f.size for f in input_files)
  return max(1, -(-total // SHARD_BYTES))


def run_seconds(start):
  return max(time.monotonic() - start, 1e-9)
