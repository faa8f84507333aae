"""Fast `tf.train.Example` encoding for the int64/float feature maps BERT writes,
the record layouts shared by writers and readers, and the one writer of TFRecord
feature files.

Building protobuf message objects per record dominated the original's writing
time; here the wire format is produced directly. The bytes parse to exactly the
Example the original builds (features in the given order, packed repeated values).
A layout (name -> (length, dtype)) is stated once: writers encode through
`encode_record` with it and `input_pipeline` parses with it, so they cannot drift.
TensorFlow is imported only to write or parse files, so processes that only encode
(Apache Beam workers) start without it; layouts here name their dtypes as strings
for the same reason.
"""

import functools
import struct
import types

from bert_tf.errors import UserInputError, io_reason
from bert_tf.utils.progress import Progress

_VARINT_CACHE_SIZE = 1 << 18


def _varint(value):
  if value < 0:
    value += 1 << 64  # int64 two's complement, as protobuf encodes negative int64
  out = bytearray()
  while True:
    bits = value & 0x7F
    value >>= 7
    if value:
      out.append(bits | 0x80)
    else:
      out.append(bits)
      return bytes(out)


_VARINTS = [_varint(i) for i in range(_VARINT_CACHE_SIZE)]


def _encode_varint(value):
  if 0 <= value < _VARINT_CACHE_SIZE:
    return _VARINTS[value]
  return _varint(value)


def _length_delimited(field_tag, payload):
  return field_tag + _encode_varint(len(payload)) + payload


_TAG_1 = b"\x0a"  # field 1, wire type 2 (length-delimited)
_TAG_2 = b"\x12"  # field 2
_FLOAT_LIST = b"\x12"  # Feature.float_list is field 2
_INT64_LIST = b"\x1a"  # Feature.int64_list is field 3


def int64_feature(values):
  payload = b"".join([_encode_varint(int(v)) for v in values])
  return _length_delimited(_INT64_LIST, _length_delimited(_TAG_1, payload) if values else b"")


def float_feature(values):
  payload = struct.pack("<%df" % len(values), *values)
  return _length_delimited(_FLOAT_LIST, _length_delimited(_TAG_1, payload) if values else b"")


def encode_example(features):
  """[(name, encoded feature)] -> serialized tf.train.Example bytes."""
  entries = []
  for name, feature in features:
    entry = _length_delimited(_TAG_1, name.encode("utf-8")) + _length_delimited(_TAG_2, feature)
    entries.append(_length_delimited(_TAG_1, entry))
  return _length_delimited(_TAG_1, b"".join(entries))


# The encoder's three inputs as every task's records hold them, under the original's names
# (input_pipeline.MODEL_INPUT_NAMES renames them for the models).
ENCODER_FEATURES = ("input_ids", "input_mask", "segment_ids")


def encoder_layout(length):
  """The three encoder inputs: name -> (length, "int64"), in file order."""
  return {name: (length, "int64") for name in ENCODER_FEATURES}


@functools.lru_cache(maxsize=None)
def pretraining_layout(max_seq_length, max_predictions_per_seq):
  """The 7 features of create_pretraining_data's records, in the original's file order.

  Cached (every record written looks it up), hence read-only.
  """
  return types.MappingProxyType({
      **encoder_layout(max_seq_length),
      "masked_lm_positions": (max_predictions_per_seq, "int64"),
      "masked_lm_ids": (max_predictions_per_seq, "int64"),
      "masked_lm_weights": (max_predictions_per_seq, "float32"),
      "next_sentence_labels": (1, "int64"),
  })


def encode_record(spec, values):
  """Serialized tf.train.Example of `values` ({name: list}) in the layout `spec` declares.

  `spec` maps each name to (length, dtype), the dtype a tf.DType or its name. Features
  are written in the spec's order, float32 ones as float lists and the rest as int64
  lists, and each must have the spec's length: a record that the reader would reject
  (or, worse, read with another type) fails here, while it is written.
  """
  if len(values) != len(spec) or not all(name in values for name in spec):
    raise ValueError("Record features %s do not match the layout %s." %
                     (sorted(values), list(spec)))
  entries = []
  for name, (length, dtype) in spec.items():
    value = values[name]
    if len(value) != length:
      raise ValueError("Record feature %s has %d values; the layout declares %d." %
                       (name, len(value), length))
    is_float = getattr(dtype, "name", dtype) == "float32"
    entries.append((name, float_feature(value) if is_float else int64_feature(value)))
  return encode_example(entries)


def parse_example(serialized):
  """bytes -> {name: list of values}; for tests and diagnostics."""
  import tensorflow as tf
  example = tf.train.Example.FromString(serialized)
  out = {}
  for name, feature in example.features.feature.items():
    kind = feature.WhichOneof("kind")
    out[name] = list(getattr(feature, kind).value) if kind else []
  return out


class ExampleFileWriter:
  """Writes serialized examples round-robin over files, each under a temporary name.

  `commit()` renames them into place once all are complete, so an interrupted run
  never leaves a truncated file under a requested name. As a context manager it
  commits when the block ends normally and aborts when it raises (KeyboardInterrupt
  included), so every caller keeps that promise without writing it out.
  """

  def __init__(self, output_files, progress=None):
    import tensorflow as tf
    self._gfile, self._errors = tf.io.gfile, tf.errors
    self.output_files = list(output_files)
    self.temporary = [f + ".partial" for f in self.output_files]
    self.writers = []
    for final, tmp in zip(self.output_files, self.temporary):
      if self._gfile.isdir(final):
        self.abort()
        raise UserInputError("Output file %s is a folder; name a file (it is created)." % final)
      try:
        self.writers.append(tf.io.TFRecordWriter(tmp))
      except (OSError, self._errors.OpError) as e:
        self.abort()
        raise self._failed(e, final) from None
    self.progress = progress
    self.count = 0

  def _failed(self, error, path):
    """A write error (full disk, lost file system) as one message naming the file."""
    reason = io_reason(error)
    fix = ("free space or pick another output folder" if "space" in reason.lower()
           else "check that its folder exists and is writable")
    return UserInputError("Writing %s failed: %s. Nothing was kept; %s, then run the command "
                          "again." % (path, reason, fix))

  def write(self, serialized):
    index = self.count % len(self.writers)
    try:
      self.writers[index].write(serialized)
    except (OSError, self._errors.OpError) as e:
      raise self._failed(e, self.output_files[index]) from None
    self.count += 1
    if self.progress is not None:
      self.progress.update(1)

  def __enter__(self):
    return self

  def __exit__(self, exc_type, exc, traceback):
    if exc_type is None:
      self.commit()
    else:
      self.abort()

  def close(self):
    for writer in self.writers:
      writer.close()

  def abort(self):
    """Closes and deletes the temporary files: a failed run leaves nothing behind."""
    for writer in self.writers:
      try:
        writer.close()
      except (OSError, self._errors.OpError):
        pass  # the file is deleted next; its write error was already reported
    for tmp in self.temporary:
      if self._gfile.exists(tmp):
        self._gfile.remove(tmp)

  def commit(self):
    try:
      self.close()  # flushes the last buffered records
      for tmp, final in zip(self.temporary, self.output_files):
        self._gfile.rename(tmp, final, overwrite=True)
    except (OSError, self._errors.OpError) as e:
      self.abort()
      raise self._failed(e, ", ".join(self.output_files)) from None
    return self.count


def write_records(path, records, total=None, description="writing"):
  """Writes serialized records to one TFRecord file with progress; returns the count."""
  with ExampleFileWriter([path], Progress(total, "records", description)) as writer:
    for record in records:
      writer.write(record)
    if total is None:
      writer.progress.finish()
  return writer.count
