"""write_predictions' choice of the answer span, as graph ops over the windows' logits.

The SQuAD SavedModel answers in one call, so the n-best search of `postprocess` (without
get_final_text's trimming) runs in the graph; tests/test_export_squad.py checks it against
the original's predictions, ties included.
"""

import tensorflow as tf


def squad_best_spans(windows, start_logits, end_logits, n_best_size, max_answer_length,
                     version_2_with_negative=False):
  """write_predictions' choice of answer per row, from the windows' logits.

  A span (s, e) of a window is a candidate as in the original: s and e are
  context pieces of that window, s owns its piece (max context), e >= s,
  e - s + 1 <= max_answer_length, and s, e are among the window's n_best_size
  highest start / end logits (over all max_seq_length positions, padding
  included, ties to the lower position, like the original's stable sort). The
  answer is the candidate with the highest start_logit + end_logit (in float64,
  like the original's Python floats) over all windows of the row; ties go where
  the original's stable sort puts them (first window, then higher start logit,
  then lower start, then lower end). The original dedups n-best texts
  afterwards, which never changes its first entry, so this is its prediction.

  v2: null_score is the lowest start_logits[0] + end_logits[0] over the row's
  windows, and the null answer wins when null_score - start - end > 0 (the
  original's null_score_diff_threshold=0.0).

  Returns a dict per row: has_span (bool, a candidate exists), window (index
  into the windows), start_index, end_index (positions in that window),
  start_word, end_word (int64, all -1 without a span), start_logit, end_logit,
  score (float64, 0.0 without a span, as the original's "empty" nonce) and for
  v2 null_score (float64, 0.0 for a row without windows) and is_impossible
  (bool, also True without a span, where the original crashes).
  """
  num_rows = windows["num_rows"]
  window_row = windows["window_row"]
  total = tf.size(window_row, out_type=tf.int64)
  seq = windows["input_word_ids"].shape[1]
  span = min(int(max_answer_length), seq)
  start64 = tf.cast(start_logits, tf.float64)
  end64 = tf.cast(end_logits, tf.float64)

  def top_positions(logits):
    top = tf.math.top_k(logits, k=min(int(n_best_size), seq)).indices
    return tf.reduce_any(tf.equal(top[:, :, None], tf.range(seq)[None, None, :]), axis=1)

  in_context = windows["in_context"]
  start_ok = tf.logical_and(tf.logical_and(in_context, windows["is_max_context"]),
                            top_positions(start_logits))
  end_ok = tf.logical_and(in_context, top_positions(end_logits))
  # Candidates as a band [window, start, length - 1]: end = start + offset.
  end_col = tf.range(seq)[:, None] + tf.range(span)[None, :]
  safe_end = tf.minimum(end_col, seq - 1)
  pair_ok = tf.logical_and(
      tf.logical_and(start_ok[:, :, None], (end_col < seq)[None]),
      tf.gather(end_ok, safe_end, axis=1))
  neg_inf = tf.constant(-float("inf"), tf.float64)
  pair_score = tf.where(pair_ok, start64[:, :, None] + tf.gather(end64, safe_end, axis=1),
                        neg_inf)

  # Best score per row, then the original's tie order.
  window_best = tf.reduce_max(pair_score, axis=[1, 2])
  window_has = tf.reduce_any(pair_ok, axis=[1, 2])
  has_span = tf.math.unsorted_segment_max(tf.cast(window_has, tf.int32), window_row,
                                          num_rows) > 0
  row_best = tf.math.unsorted_segment_max(window_best, window_row, num_rows)
  tied = tf.logical_and(pair_ok, pair_score == tf.gather(row_best, window_row)[:, None, None])
  window_ids = tf.range(total)
  first_window = tf.math.unsorted_segment_min(
      tf.where(tf.reduce_any(tied, axis=[1, 2]), window_ids, total), window_row, num_rows)
  chosen = tf.logical_and(window_has, window_ids == tf.gather(first_window, window_row))
  tied_start = tf.reduce_any(tied, axis=2)
  top_start = tf.reduce_max(tf.where(tied_start, start64, neg_inf), axis=1, keepdims=True)
  tied_start = tf.logical_and(tied_start, start64 == top_start)
  columns = tf.range(seq)[None, :]
  start_col = tf.reduce_min(tf.where(tied_start, columns, seq), axis=1)
  start_col = tf.minimum(start_col, seq - 1)  # Windows without candidates: unused.
  offsets = tf.gather(tied, start_col, axis=1, batch_dims=1)  # [window, span]
  offset = tf.reduce_min(tf.where(offsets, tf.range(span)[None, :], span), axis=1)
  end_col = tf.minimum(start_col + offset, seq - 1)

  def per_row(values, fill):
    """The chosen window's value for each row, `fill` for rows without a span."""
    values = tf.where(chosen, values, tf.cast(fill, values.dtype))
    picked = tf.math.unsorted_segment_max(values, window_row, num_rows)
    return tf.where(has_span, picked, tf.cast(fill, values.dtype))

  token_word = windows["token_word"]
  start_logit = per_row(tf.gather(start64, start_col, axis=1, batch_dims=1), neg_inf)
  end_logit = per_row(tf.gather(end64, end_col, axis=1, batch_dims=1), neg_inf)
  result = {
      "has_span": has_span,
      "window": per_row(window_ids, -1),
      "start_index": per_row(tf.cast(start_col, tf.int64), -1),
      "end_index": per_row(tf.cast(end_col, tf.int64), -1),
      "start_word": per_row(tf.gather(token_word, start_col, axis=1, batch_dims=1), -1),
      "end_word": per_row(tf.gather(token_word, end_col, axis=1, batch_dims=1), -1),
      "start_logit": tf.where(has_span, start_logit, 0.0),
      "end_logit": tf.where(has_span, end_logit, 0.0),
  }
  result["score"] = result["start_logit"] + result["end_logit"]
  if version_2_with_negative:
    null = tf.math.unsorted_segment_min(start64[:, 0] + end64[:, 0], window_row, num_rows)
    has_window = tf.math.unsorted_segment_max(tf.ones_like(window_row), window_row,
                                              num_rows) > 0
    null = tf.where(has_window, null, 0.0)
    result["null_score"] = null
    diff = null - result["start_logit"] - result["end_logit"]
    result["is_impossible"] = tf.logical_or(tf.logical_not(has_span), diff > 0.0)
  return result
