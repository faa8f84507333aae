"""tf.data readers for the original TFRecord layouts.

Training input follows the original input_fn: files shuffled and repeated,
interleaved, records shuffled with a buffer of 100, parsed, int64 -> int32, batches
with drop_remainder. Unlike the original it is deterministic for a given seed
(the original interleaves "sloppily"), so a resumed run sees the same batches.

Files are checked before they are read: no match, no records, a feature that
is missing or of the wrong length, a corrupt first record, or a file cut short
(an interrupted copy: TensorFlow would read it as a shorter file, or fail hours
into training) stop with a message naming the file.
"""

import mmap
import struct
import time

from absl import logging
import google_crc32c
import tensorflow as tf

from bert_tf.data import example_codec
from bert_tf.errors import UserInputError

# Record layouts and their encoding are stated in example_codec, without TensorFlow, for
# writers that run without it; the specs below are those layouts with TF dtypes, for parsing.
ENCODER_FEATURES = example_codec.ENCODER_FEATURES
encode_record = example_codec.encode_record


def _tf_layout(layout):
  return {name: (length, tf.as_dtype(dtype)) for name, (length, dtype) in layout.items()}


def encoder_features(length):
  """The record layout of the three encoder inputs: name -> (length, int64), in file order.

  Every task's feature spec starts from this (SQuAD puts unique_ids first), and its
  encoder writes through `encode_record` with that spec, so the two cannot disagree.
  """
  return _tf_layout(example_codec.encoder_layout(length))


def pretraining_features(max_seq_length, max_predictions_per_seq):
  """The 7 features create_pretraining_data writes (`example_codec.pretraining_layout`)."""
  return _tf_layout(example_codec.pretraining_layout(max_seq_length, max_predictions_per_seq))


def expand_files(patterns, flag="--input_file"):
  """Comma-separated globs -> list of files (each pattern must match)."""
  files = []
  for pattern in [p for p in patterns.split(",") if p]:
    matched = tf.io.gfile.glob(pattern)
    if not matched:
      raise UserInputError("No file matches %s pattern %s." % (flag, pattern))
    files.extend(matched)
  if not files:
    raise UserInputError("%s names no files." % flag)
  return files


def _kind(feature):
  kind = feature.WhichOneof("kind")
  values = getattr(feature, kind).value if kind else []
  return kind, len(values)


def check_record_files(files, features):
  """Checks each file is complete and its first record holds the expected features."""
  check_complete(files)
  expected_kind = {tf.int64: "int64_list", tf.float32: "float_list"}
  for path in files:
    try:
      first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    except tf.errors.OpError as e:
      raise UserInputError("Cannot read TFRecord file %s: %s" %
                           (path, e.message.splitlines()[0])) from None
    if first is None:
      raise UserInputError("TFRecord file %s has no records." % path)
    try:
      example = tf.train.Example.FromString(first.numpy())
    except Exception:  # protobuf's DecodeError
      raise UserInputError(
          "TFRecord file %s does not hold tf.train.Example records." % path) from None
    present = example.features.feature
    problems = []
    for name, (length, dtype) in features.items():
      if name not in present:
        problems.append("feature %s is missing" % name)
        continue
      kind, count = _kind(present[name])
      if kind != expected_kind[dtype]:
        problems.append("feature %s is %s, expected %s" % (name, kind, expected_kind[dtype]))
      elif count != length:
        problems.append("feature %s has length %d, expected %d" % (name, count, length))
    if problems:
      raise UserInputError(
          "TFRecord file %s does not match the expected layout: %s. Check --max_seq_length and "
          "--max_predictions_per_seq against the flags the data was created with." %
          (path, "; ".join(problems)))


def _masked_crc(data):
  """TFRecord's masked CRC32C of `data` (the framing format's checksum)."""
  crc = google_crc32c.value(data)
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _record_count(path, data):
  """Walks the length headers of a TFRecord file in memory; raises on a cut or bad header."""
  offset = count = 0
  size = len(data)
  while offset < size:
    if size - offset < 12:
      raise UserInputError(
          "TFRecord file %s is cut short: record %d at byte offset %d has an incomplete header "
          "(the file ends at byte %d). Copy or create the file again." %
          (path, count, offset, size))
    length, length_crc = struct.unpack_from("<QI", data, offset)
    if _masked_crc(data[offset:offset + 8]) != length_crc:
      raise UserInputError(
          "TFRecord file %s is corrupt: the length header of record %d at byte offset %d fails "
          "its checksum. Copy or create the file again." % (path, count, offset))
    end = offset + 12 + length + 4
    if end > size:
      raise UserInputError(
          "TFRecord file %s is cut short: record %d at byte offset %d needs %d bytes, the file "
          "ends at byte %d. Copy or create the file again." % (path, count, offset, end, size))
    offset, count = end, count + 1
  return count


# (path, size, modification time) -> record count of the files found complete in this process:
# run_pretraining checks its files up front and reads them again for training and evaluation.
_COMPLETE = {}


def check_complete(files):
  """Every file's records end exactly at its end (length headers walked); returns record counts.

  Cheap: only the 12-byte headers are read (0.13 s for 100k records, 250 MB, here), once per
  file and version in a process. Local files are mapped into memory; other file systems
  (gs://, ...) are read once through tf.io.gfile.
  """
  started, counts = time.time(), []
  for path in files:
    try:
      stat = tf.io.gfile.stat(path)
      key = (path, stat.length, stat.mtime_nsec)
      if key in _COMPLETE:
        counts.append(_COMPLETE[key])
        continue
      if "://" in path:
        with tf.io.gfile.GFile(path, "rb") as f:
          counts.append(_record_count(path, f.read()))
      else:
        with open(path, "rb") as f:
          if not f.seek(0, 2):
            counts.append(0)
            continue
          with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            counts.append(_record_count(path, data))
      _COMPLETE[key] = counts[-1]
    except IsADirectoryError:
      raise UserInputError("TFRecord file %s is a folder; pass its files (a glob such as "
                           "%s/*.tfrecord)." % (path, path.rstrip("/"))) from None
    except (OSError, tf.errors.OpError) as e:
      raise UserInputError("Cannot read TFRecord file %s: %s" % (path, e)) from None
  if time.time() - started > 5:
    logging.info("Checked %d TFRecord files (%d records) in %.0f s", len(files), sum(counts),
                 time.time() - started)
  return counts


# Record feature names of the original -> the names the models read (TF Hub's).
# Records on disk keep the original's names, so files stay byte-compatible.
MODEL_INPUT_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}


def to_model_names(features):
  """A dict of parsed record features, renamed for the models (other keys unchanged)."""
  return {MODEL_INPUT_NAMES.get(k, k): v for k, v in features.items()}


def _parser(features):
  spec = {name: tf.io.FixedLenFeature([length], dtype)
          for name, (length, dtype) in features.items()}

  def parse(record):
    example = tf.io.parse_single_example(record, spec)
    return to_model_names({k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
                           for k, v in example.items()})

  return parse


def record_dataset(files, features, batch_size, is_training, seed=12345, num_cpu_threads=4,
                   input_context=None, repeat=False, drop_remainder=None):
  """Batched, parsed examples; training data is repeated and shuffled (deterministically).

  For evaluation the files are read in order; `repeat` and `drop_remainder`
  reproduce run_pretraining's eval input (repeated, whole batches). A file cut short
  stops here, before anything is read.
  """
  check_complete(files)
  parse = _parser(features)
  if is_training:
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(files))
    if input_context is not None:
      dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    dataset = dataset.repeat().shuffle(len(files), seed=seed)
    dataset = dataset.interleave(tf.data.TFRecordDataset,
                                 cycle_length=min(num_cpu_threads, len(files)),
                                 num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    dataset = dataset.shuffle(100, seed=seed)
  else:
    dataset = tf.data.TFRecordDataset(files)
    if repeat:
      dataset = dataset.repeat()
  dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if drop_remainder is None:
    drop_remainder = is_training
  dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
  return dataset.prefetch(tf.data.AUTOTUNE)
