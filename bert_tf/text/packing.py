"""BERT input packing as graph ops: `[CLS] a [SEP] b [SEP]`, like `bert_tf.data.packing`.

The in-graph twin of `packing.pack_tokens` (the original's convert_single_example and its
pair truncation) for token ids in ragged tensors, so `tf.data` pipelines and SavedModels
(`BertTextTokenizer.encode`, the TF-Hub preprocessor's `bert_pack_inputs`) pack inside the
graph, with the original's layout.
"""

import tensorflow as tf

from bert_tf.text.tf_shims import merge_words

# The code has no tensor-dependent Python control flow, and letting AutoGraph convert it
# makes every tf.function trace slower.
_plain_python = tf.autograph.experimental.do_not_convert


@_plain_python
def truncated_lengths(len_a, len_b, max_length):
  """Lengths the original `_truncate_seq_pair` leaves, without its loop.

  The loop pops from the longer side (b on ties) while la + lb > max_length, so
  a keeps max(ceil(m / 2), m - lb) tokens at most and b gets the rest of m.
  Works elementwise on integer tensors (or Python ints).
  """
  len_a = tf.convert_to_tensor(len_a)
  len_b = tf.cast(len_b, len_a.dtype)
  m = tf.cast(max_length, len_a.dtype)
  keep_a = tf.minimum(len_a, tf.maximum((m + 1) // 2, m - len_b))
  keep_b = tf.minimum(len_b, m - keep_a)
  fits = len_a + len_b <= m
  return tf.where(fits, len_a, keep_a), tf.where(fits, len_b, keep_b)


@_plain_python
def pack_inputs(segments_a, segments_b, seq_length, cls_id, sep_id):
  """Packs token ids like the original's convert_single_example.

  Per row: `[CLS] a [SEP]` (type 0), then `b [SEP]` (type 1) only if that row's
  b is non-empty after truncation (the original tests `if tokens_b:`); pairs are
  cut by `_truncate_seq_pair` to seq_length - 3, single segments to
  seq_length - 2; zero padding.

  Args:
    segments_a: int RaggedTensor [batch, (tokens)], or [batch, (words), (pieces)]
      as `tokenize_words` gives (a dense Tensor is taken as full rows).
    segments_b: like segments_a, or None.
    seq_length: the padded length: a Python int, or a scalar integer tensor (then
      the outputs' second dimension is not static).
    cls_id, sep_id: ids of [CLS] and [SEP].

  Returns:
    dict of int32 [batch, seq_length]: input_word_ids, input_mask, input_type_ids.
  """
  min_length = 2 if segments_b is None else 3
  message = "seq_length leaves no room for [CLS] and [SEP]."
  static_length = (tf.get_static_value(seq_length) if isinstance(seq_length, tf.Tensor)
                   else seq_length)
  checks = []
  if static_length is not None:
    seq_length = int(static_length)
    if seq_length < min_length:
      raise ValueError("seq_length=%d leaves no room for [CLS] and [SEP]." % seq_length)
  else:
    seq_length = tf.cast(seq_length, tf.int64)
    checks.append(tf.debugging.assert_greater_equal(seq_length, tf.constant(min_length, tf.int64),
                                                    message=message))
  segments_a = _as_ragged_ids(segments_a)
  if checks:
    with tf.control_dependencies(checks):
      seq_length = tf.identity(seq_length)
  if segments_b is None:
    return _pack_single(segments_a, seq_length, cls_id, sep_id)
  len_a = segments_a.row_lengths()
  segments_b = _as_ragged_ids(segments_b)
  len_b = segments_b.row_lengths()
  pair_a, pair_b = truncated_lengths(len_a, len_b, seq_length - 3)
  is_pair = len_b > 0
  keep_a = tf.where(is_pair, pair_a, tf.minimum(len_a, seq_length - 2))[:, None]
  keep_b = tf.where(is_pair, pair_b, 0)[:, None]
  # Dense layout by column arithmetic: column c of a row holds [CLS] (c = 0),
  # a[c - 1], [SEP] (c = ka + 1), b[c - ka - 2], then [SEP] (c = ka + kb + 2)
  # only if the truncated b is non-empty, as the original tests `if tokens_b:`.
  if checks:
    shape = tf.stack([segments_a.nrows(), seq_length])
  else:
    shape = [None, seq_length]
  dense_a = segments_a.to_tensor(0, shape=shape)
  dense_b = segments_b.to_tensor(0, shape=shape)
  column = tf.range(seq_length, dtype=tf.int64)[None, :]
  b_column = tf.clip_by_value(column - keep_a - 2, 0, seq_length - 1)
  in_a = tf.logical_and(column >= 1, column <= keep_a)
  in_b = tf.logical_and(column >= keep_a + 2, column < keep_a + 2 + keep_b)
  first_sep = column == keep_a + 1
  second_sep = tf.logical_and(column == keep_a + 2 + keep_b, keep_b > 0)
  zeros = tf.zeros_like(dense_a)
  word_ids = tf.where(in_a, tf.roll(dense_a, 1, axis=1), zeros)
  word_ids = tf.where(in_b, tf.gather(dense_b, b_column, batch_dims=1), word_ids)
  word_ids = tf.where(tf.logical_or(first_sep, second_sep), tf.cast(sep_id, tf.int32),
                      word_ids)
  word_ids = tf.where(column == 0, tf.cast(cls_id, tf.int32), word_ids)
  length = keep_a + 2 + tf.where(keep_b > 0, keep_b + 1, 0)
  return {
      "input_word_ids": word_ids,
      "input_mask": tf.cast(column < length, tf.int32),
      "input_type_ids": tf.cast(tf.logical_or(in_b, second_sep), tf.int32),
  }


def _pack_single(segments, seq_length, cls_id, sep_id):
  """`pack_inputs` of single segments: `[CLS] a [SEP]`, a cut to seq_length - 2, type 0.

  The same layout as the general path in far fewer graph ops, which every
  single-sentence request runs (benchmarks.serving_profile)."""
  keep = tf.minimum(segments.row_lengths(), tf.cast(seq_length - 2, tf.int64))[:, None]
  rows = segments.nrows()
  if isinstance(seq_length, tf.Tensor):
    shape = tf.stack([rows, seq_length - 2])
  else:
    shape = [None, seq_length - 2]
  word_ids = tf.concat([tf.fill(tf.stack([rows, 1]), tf.cast(cls_id, tf.int32)),
                        segments.to_tensor(0, shape=shape),
                        tf.zeros(tf.stack([rows, 1]), tf.int32)], axis=1)
  column = tf.range(tf.shape(word_ids, out_type=tf.int64)[1])[None, :]
  word_ids = tf.where(column == keep + 1, tf.cast(sep_id, tf.int32), word_ids)
  return {
      "input_word_ids": word_ids,
      "input_mask": tf.cast(column < keep + 2, tf.int32),
      "input_type_ids": tf.zeros_like(word_ids),
  }


def _as_ragged_ids(ids):
  """int32 values and int64 row splits, whatever the caller's dtypes; words merged."""
  if not isinstance(ids, tf.RaggedTensor):
    ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
  if ids.ragged_rank == 2:
    ids = merge_words(ids)
  if ids.ragged_rank != 1:
    raise ValueError("Expected token ids of shape [batch, (tokens)] or [batch, (words), "
                     "(pieces)], got %s." % ids.shape)
  return tf.cast(ids, tf.int32).with_row_splits_dtype(tf.int64)
