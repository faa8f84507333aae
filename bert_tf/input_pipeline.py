"""tf.data readers for the original TFRecord layouts.

Training input follows the original input_fn: files shuffled and repeated,
interleaved, records shuffled with a buffer of 100, parsed, int64 -> int32, batches
with drop_remainder. Unlike the original it is deterministic for a given seed
(the original interleaves "sloppily"), so a resumed run sees the same batches.

Files are checked before training starts: no match, no records, a feature that
is missing or of the wrong length, or a corrupt first record stop with a message
naming the file.
"""

import tensorflow as tf

from bert_tf.errors import UserInputError


def pretraining_features(max_seq_length, max_predictions_per_seq):
  """The 7 features create_pretraining_data writes: name -> (length, dtype)."""
  return {
      "input_ids": (max_seq_length, tf.int64),
      "input_mask": (max_seq_length, tf.int64),
      "segment_ids": (max_seq_length, tf.int64),
      "masked_lm_positions": (max_predictions_per_seq, tf.int64),
      "masked_lm_ids": (max_predictions_per_seq, tf.int64),
      "masked_lm_weights": (max_predictions_per_seq, tf.float32),
      "next_sentence_labels": (1, tf.int64),
  }


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
  """Reads the first record of each file and checks it against the expected features."""
  expected_kind = {tf.int64: "int64_list", tf.float32: "float_list"}
  for path in files:
    try:
      first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    except tf.errors.OpError as e:
      raise UserInputError("Cannot read TFRecord file %s: %s" % (path, e.message.splitlines()[0])) from None
    if first is None:
      raise UserInputError("TFRecord file %s has no records." % path)
    try:
      example = tf.train.Example.FromString(first.numpy())
    except Exception:  # protobuf's DecodeError
      raise UserInputError("TFRecord file %s does not hold tf.train.Example records." % path) from None
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


# Record feature names of the original -> the names the models read (TF Hub's).
# Records on disk keep the original's names, so files stay byte-compatible.
MODEL_INPUT_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}


def to_model_names(features):
  """A dict of parsed record features, renamed for the models (other keys unchanged)."""
  return {MODEL_INPUT_NAMES.get(k, k): v for k, v in features.items()}


def _parser(features):
  spec = {name: tf.io.FixedLenFeature([length], dtype) for name, (length, dtype) in features.items()}

  def parse(record):
    example = tf.io.parse_single_example(record, spec)
    return to_model_names({k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
                           for k, v in example.items()})

  return parse


def record_dataset(files, features, batch_size, is_training, seed=12345, num_cpu_threads=4,
                   input_context=None, repeat=False, drop_remainder=None):
  """Batched, parsed examples; training data is repeated and shuffled (deterministically).

  For evaluation the files are read in order; `repeat` and `drop_remainder`
  reproduce run_pretraining's eval input (repeated, whole batches).
  """
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
