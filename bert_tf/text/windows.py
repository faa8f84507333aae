"""Sliding windows over long token sequences and their max-context rule, as graph ops.

The in-graph twin of `packing.doc_spans_for` and `packing.check_is_max_context` (the
original run_squad's rule), for exports that cut a long input into windows inside a
SavedModel (SQuAD contexts, NER documents). One implementation, so every export picks
the same window for a token as training did; scores are float64 like the original's
Python floats, so equal scores tie exactly and the first window wins.
"""

import collections

import tensorflow as tf

DocWindows = collections.namedtuple("DocWindows", ["row", "start", "length"])

# Positions are clipped into [-1, _POSITION_LIMIT] and keyed by row * _ROW_KEY + position,
# so a position never reaches into the next row's keys.
_POSITION_LIMIT = 2**31
_ROW_KEY = 2**32


def doc_windows(num_tokens, max_tokens, stride, at_least_one=False):
  """`packing.doc_spans_for` of every row of a batch, flattened in row order.

  Every window but a row's last holds max_tokens tokens, so starts advance by
  min(stride, max_tokens) and a row of n tokens has 1 + ceil(max(n - max_tokens, 0) /
  step) windows (none when n == 0).

  Args:
    num_tokens: integer tensor [rows], the length of each row.
    max_tokens, stride: integer scalars or [rows], each >= 1.
    at_least_one: give an empty row one window of length 0 (for exports that run the
      model once per row whatever its length).

  Returns:
    DocWindows of int64 [windows]: the row, first token and length of each window.
  """
  num_tokens = tf.cast(num_tokens, tf.int64)
  max_tokens = tf.broadcast_to(tf.cast(max_tokens, tf.int64), tf.shape(num_tokens))
  step = tf.minimum(tf.cast(stride, tf.int64), max_tokens)
  beyond = tf.maximum(num_tokens - max_tokens, 0)
  count = 1 + (beyond + step - 1) // step
  if not at_least_one:
    count = tf.where(num_tokens == 0, tf.zeros_like(count), count)
  row = tf.repeat(tf.range(tf.size(num_tokens, out_type=tf.int64)), count)
  index = tf.range(tf.size(row, out_type=tf.int64)) - tf.gather(
      tf.cumsum(count, exclusive=True), row)
  start = index * tf.gather(step, row)
  length = tf.minimum(tf.gather(num_tokens, row) - start, tf.gather(max_tokens, row))
  return DocWindows(row, start, length)


def max_context_window(windows, row, position):
  """`packing.check_is_max_context` asked the other way round: which window owns a token.

  A window scores a token it holds min(tokens left, tokens right) + 0.01 * its length;
  the highest score wins, the first window on ties.

  Args:
    windows: DocWindows in row order whose starts and ends never decrease within a row
      (as `doc_windows` gives).
    row, position: integer tensors of the same shape (or `row` broadcastable to it):
      a token's row and its index in that row.

  Returns:
    int64 tensor shaped like `position`: the index (into `windows`) of the window that
    gives the token the most context; -1 where no window holds it.
  """
  position = tf.convert_to_tensor(position)
  shape = tf.shape(position)
  position = tf.clip_by_value(tf.reshape(tf.cast(position, tf.int64), [-1]), -1,
                              _POSITION_LIMIT)
  row = tf.reshape(tf.broadcast_to(tf.cast(row, tf.int64), shape), [-1])
  end = windows.start + windows.length  # Exclusive.
  query = row * _ROW_KEY + position
  # Within a row starts and ends never decrease, so the windows holding a token are a
  # run: from the first that ends after it to the last that starts at or before it.
  first = tf.searchsorted(windows.row * _ROW_KEY + end, query, side="right",
                          out_type=tf.int64)
  last = tf.searchsorted(windows.row * _ROW_KEY + windows.start, query, side="right",
                         out_type=tf.int64) - 1
  holding = tf.maximum(last - first + 1, 0)
  offsets = tf.range(tf.reduce_max(tf.concat([[0], holding], axis=0)))[None, :]
  candidate = first[:, None] + offsets  # [tokens, offsets]
  held = offsets < holding[:, None]
  safe = tf.clip_by_value(candidate, 0, tf.maximum(tf.size(end, out_type=tf.int64) - 1, 0))
  start = tf.gather(windows.start, safe)
  length = tf.gather(windows.length, safe)
  at = position[:, None]
  score = (tf.cast(tf.minimum(at - start, start + length - 1 - at), tf.float64) +
           0.01 * tf.cast(length, tf.float64))
  score = tf.where(held, score, tf.constant(-float("inf"), tf.float64))
  best = tf.logical_and(held, score == tf.reduce_max(score, axis=1, keepdims=True))
  first_best = tf.reduce_min(tf.where(best, offsets, tf.shape(offsets, tf.int64)[1]), axis=1)
  owner = tf.where(holding > 0, first + first_best, tf.constant(-1, tf.int64))
  return tf.reshape(owner, shape)
