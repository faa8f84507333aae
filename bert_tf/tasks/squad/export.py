"""SavedModel export of a run_squad model: question and context in, the answer span out.

The graph reproduces run_squad's prediction path with tensor ops: the context's
words (split on `data.WHITESPACE_CODE_POINTS`, the same rule as
`data.split_context`), the windows of `features.doc_spans_for`, the max-context rule
of `features.check_is_max_context`, and write_predictions' choice of the best span.
tests/test_export_squad.py checks each against the Python functions.
"""

import tensorflow as tf

from bert_tf import checks, export, text_windows
from bert_tf.errors import UserInputError
from bert_tf.tasks.squad.data import WHITESPACE_CODE_POINTS

# Windows per encoder call in serving_default: bounds the memory of one request
# with a very long context (the windows are run in a loop of such chunks).
SQUAD_WINDOW_BATCH = 64


def _safe_gather(params, indices, fill=0):
  """params[indices] for a flat params that may be empty; indices are clipped."""
  params = tf.concat([params, tf.fill([1], tf.cast(fill, params.dtype))], axis=0)
  last = tf.cast(tf.size(params), indices.dtype) - 1
  return tf.gather(params, tf.clip_by_value(indices, 0, last))


def squad_windows(tokenizer, question, context, max_seq_length, doc_stride,
                  max_query_length):
  """run_squad's prediction features (convert_examples_to_features) as graph ops.

  Contexts are split into words on WHITESPACE_CODE_POINTS only, each word is tokenized
  on its own (so pieces map back to words), the question is cut to
  max_query_length pieces, and the pieces are cut into `[CLS] q [SEP] window [SEP]`
  windows exactly as the original (same order, so window i of the batch is the
  original's feature i).

  Args:
    tokenizer: a BertTextTokenizer.
    question, context: 1-D string tensors of the same length. Invalid UTF-8
      bytes of the context are dropped first (offsets index the cleaned text).
    max_seq_length, doc_stride, max_query_length: Python ints as in run_squad,
      with max_seq_length > max_query_length + 3 and doc_stride >= 1.

  Returns a dict:
    input_word_ids, input_mask, input_type_ids: int32 [windows, max_seq_length].
    window_row: int64 [windows], the batch row of each window.
    in_context: bool [windows, seq], the window's context pieces.
    is_max_context: bool [windows, seq], the original's token_is_max_context.
    token_word: int64 [windows, seq], the word (index into word_begin/word_end)
      of each context piece, -1 elsewhere.
    word_row: int64 [words], the batch row of each word.
    word_begin, word_end: int64 [words], each word's code point offsets in its
      row's context (end exclusive).
    context: the contexts without invalid UTF-8.
    num_rows: int64 scalar.
  """
  seq = int(max_seq_length)
  context = tf.strings.unicode_transcode(context, "UTF-8", "UTF-8", errors="ignore")
  num_rows = tf.size(context, out_type=tf.int64)

  # Words: maximal runs of non-whitespace code points, numbered across the batch.
  chars = tf.strings.unicode_decode(context, "UTF-8")
  chars = chars.with_row_splits_dtype(tf.int64)
  cps = chars.flat_values
  char_row = chars.value_rowids()
  flat_index = tf.range(tf.size(cps, out_type=tf.int64))
  char_pos = flat_index - tf.gather(chars.row_starts(), char_row)
  is_space = tf.reduce_any(
      tf.equal(cps[:, None], tf.constant(WHITESPACE_CODE_POINTS, tf.int32)[None, :]), axis=1)
  after_space = tf.logical_or(char_pos == 0,
                              tf.gather(is_space, tf.maximum(flat_index - 1, 0)))
  in_word = tf.logical_not(is_space)
  word_first = tf.logical_and(in_word, after_space)
  num_words = tf.reduce_sum(tf.cast(word_first, tf.int64))
  char_word = tf.boolean_mask(tf.cumsum(tf.cast(word_first, tf.int64)) - 1, in_word)
  word_row = tf.boolean_mask(char_row, word_first)
  word_begin = tf.boolean_mask(char_pos, word_first)
  word_end = tf.math.unsorted_segment_max(tf.boolean_mask(char_pos, in_word), char_word,
                                          num_words) + 1
  words = tf.strings.unicode_encode(
      tf.RaggedTensor.from_value_rowids(tf.boolean_mask(cps, in_word), char_word,
                                        nrows=num_words, validate=False), "UTF-8")

  # Pieces of every word; piece_word maps each context piece back to its word.
  pieces = tokenizer.tokenize(words).with_row_splits_dtype(tf.int64)
  piece_word = pieces.value_rowids()
  doc = tf.RaggedTensor.from_value_rowids(pieces.flat_values, tf.gather(word_row, piece_word),
                                          nrows=num_rows, validate=False)
  query = tokenizer.tokenize(question).with_row_splits_dtype(tf.int64)[:, :max_query_length]

  # Windows: the original's doc_spans, max_seq_length - 3 - query pieces long.
  query_len = query.row_lengths()
  windows = text_windows.doc_windows(doc.row_lengths(), seq - 3 - query_len, doc_stride)
  window_row, w_start, w_len = windows

  column = tf.range(seq, dtype=tf.int64)[None, :]
  w_query = tf.gather(query_len, window_row)[:, None]
  doc_offset = w_query + 2
  w_end = doc_offset + w_len[:, None]  # Column of the final [SEP].
  in_query = tf.logical_and(column >= 1, column <= w_query)
  in_context = tf.logical_and(column >= doc_offset, column < w_end)
  seps = tf.logical_or(column == w_query + 1, column == w_end)
  doc_pos = w_start[:, None] + column - doc_offset  # Piece index within the row's context.
  doc_flat = tf.gather(doc.row_starts(), window_row)[:, None] + doc_pos
  query_flat = tf.gather(query.row_starts(), window_row)[:, None] + column - 1
  zeros = tf.zeros_like(column, tf.int32)
  ids = tf.where(in_query, _safe_gather(query.flat_values, query_flat), zeros)
  ids = tf.where(in_context, _safe_gather(doc.flat_values, doc_flat), ids)
  ids = tf.where(seps, tf.constant(tokenizer.sep_id, tf.int32), ids)
  ids = tf.where(column == 0, tf.constant(tokenizer.cls_id, tf.int32), ids)
  token_word = tf.where(in_context, _safe_gather(piece_word, doc_flat, -1),
                        tf.constant(-1, tf.int64))

  # _check_is_max_context: the window that owns each piece.
  owner = text_windows.max_context_window(windows, window_row[:, None], doc_pos)
  is_max_context = tf.logical_and(
      in_context, owner == tf.range(tf.size(window_row, out_type=tf.int64))[:, None])

  mask = tf.cast(column <= w_end, tf.int32)
  return {
      "input_word_ids": ids,
      "input_mask": mask,
      "input_type_ids": tf.cast(tf.logical_or(in_context, column == w_end), tf.int32),
      "window_row": window_row,
      "in_context": in_context,
      "is_max_context": is_max_context,
      "token_word": token_word,
      "word_row": word_row,
      "word_begin": word_begin,
      "word_end": word_end,
      "context": context,
      "num_rows": num_rows,
  }


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


def _check_int_at_least(name, value, minimum):
  if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
    raise UserInputError("%s=%r must be an integer >= %d." % (name, value, minimum))


def export_squad(export_dir, model, vocab_file, do_lower_case, max_seq_length, doc_stride,
                 max_query_length, max_answer_length, n_best_size=20,
                 version_2_with_negative=False, overwrite=False,
                 window_batch_size=SQUAD_WINDOW_BATCH, strip_accents=None):
  """Exports a run_squad model that answers questions about raw text.

  Args:
    export_dir: destination folder (see `save_serving_module`).
    model: bert_tf.tasks.squad.SquadModel.
    vocab_file: vocab.txt of the checkpoint; its content is embedded.
    do_lower_case, strip_accents: as used for training.
    max_seq_length, doc_stride, max_query_length: windowing, as in run_squad.
    max_answer_length, n_best_size: span selection, as in write_predictions.
    version_2_with_negative: SQuAD 2.0 model (adds the null answer).
    overwrite: replace an existing non-empty export_dir.
    window_batch_size: windows per encoder call in serving_default (memory bound
      for long contexts; does not change the answers).

  Signatures:
    serving_default: question, context string [batch] (one pair per row) ->
      answer string [batch], a substring of the context: from the first
      character of the word holding the chosen start piece to the last
      character of the word holding the end piece (the original's "orig_doc"
      text, kept with the context's own whitespace);
      score float32 [batch]: start_logit + end_logit of that span;
      start_char, end_char int32 [batch]: code point offsets into the context
      (end exclusive), so context[start_char:end_char] == answer;
      v2 also null_score float32 [batch] and is_impossible bool [batch]: when the
      null answer wins, answer is "" and the offsets are -1, and score stays
      the best span's, so null_score - score is the original's null_odds value.
      A row without any candidate span (an empty context, or none of the
      n_best_size best starts and ends form a valid span: the original's
      "empty" nonce in v1, a crash in v2) gets "", -1 and score 0.0; in v2
      is_impossible True, and null_score 0.0 if the row has no window.
    serve_ids: input_word_ids, input_mask, input_type_ids int32 [batch, seq] ->
      start_logits, end_logits float32 [batch, seq].

  Differences from run_squad's predictions.json: the original then trims the
  word-level text to the predicted pieces with get_final_text (e.g. "1895" out
  of "(1895-1943)."), which is not done in the graph; so the served answer
  equals the original's prediction when the predicted span starts and ends on
  context word boundaries, and otherwise contains it. Words inside the span are
  joined by the context's whitespace, not by single spaces. Invalid UTF-8 bytes
  are dropped before anything else (offsets index the context without them).
  All valid (start, end) pairs among the n_best_size best starts and ends are
  searched, as in the original.

  Returns export_dir.
  """
  export.check_export_dir(export_dir, overwrite)
  _check_int_at_least("max_query_length", max_query_length, 0)
  _check_int_at_least("doc_stride", doc_stride, 1)
  _check_int_at_least("max_answer_length", max_answer_length, 1)
  _check_int_at_least("n_best_size", n_best_size, 1)
  _check_int_at_least("window_batch_size", window_batch_size, 1)
  checks.check_seq_length(max_seq_length, model.config, 3, flag="max_seq_length")
  if max_seq_length <= max_query_length + 3:
    raise UserInputError("The max_seq_length (%d) must be greater than max_query_length "
                         "(%d) + 3." % (max_seq_length, max_query_length))
  tokenizer = export.make_tokenizer(vocab_file, do_lower_case, strip_accents)
  if tokenizer.cls_id is None or tokenizer.sep_id is None:
    raise UserInputError("The vocabulary lacks [CLS] or [SEP]; it cannot pack inputs.")
  module = export.ServingModule(tokenizer, [model])
  v2 = bool(version_2_with_negative)

  def logits_of(features):
    outputs = model(features, training=False)
    return tf.cast(outputs["start_logits"], tf.float32), tf.cast(outputs["end_logits"], tf.float32)

  def window_logits(windows):
    """Start and end logits of all windows, window_batch_size windows per call."""
    ids, mask, types = (windows[k] for k in export.IDS_INPUTS)
    total = tf.shape(ids)[0]
    chunks = (total + window_batch_size - 1) // window_batch_size

    def body(i, starts, ends):
      rows = tf.range(i * window_batch_size, tf.minimum((i + 1) * window_batch_size, total))
      start, end = logits_of({"input_word_ids": tf.gather(ids, rows),
                              "input_mask": tf.gather(mask, rows),
                              "input_type_ids": tf.gather(types, rows)})
      return i + 1, starts.write(i, start), ends.write(i, end)

    def array():
      return tf.TensorArray(tf.float32, size=chunks, infer_shape=False,
                            element_shape=[None, max_seq_length])

    _, starts, ends = tf.while_loop(lambda i, *_: i < chunks, body,
                                    (tf.constant(0), array(), array()),
                                    parallel_iterations=1)
    return starts.concat(), ends.concat()

  def from_text(question, context):
    windows = squad_windows(module.tokenizer, question, context, max_seq_length, doc_stride,
                            max_query_length)
    start_logits, end_logits = window_logits(windows)
    best = squad_best_spans(windows, start_logits, end_logits, n_best_size, max_answer_length,
                            v2)
    answered = best["has_span"]
    if v2:
      answered = tf.logical_and(answered, tf.logical_not(best["is_impossible"]))
    start_char = _safe_gather(windows["word_begin"], best["start_word"], -1)
    end_char = _safe_gather(windows["word_end"], best["end_word"], -1)
    start_char = tf.cast(tf.where(answered, start_char, -1), tf.int32)
    end_char = tf.cast(tf.where(answered, end_char, -1), tf.int32)
    answer = tf.strings.substr(windows["context"], tf.maximum(start_char, 0),
                               tf.maximum(end_char - start_char, 0), unit="UTF8_CHAR")
    outputs = {"answer": answer, "score": tf.cast(best["score"], tf.float32),
               "start_char": start_char, "end_char": end_char}
    if v2:
      outputs["null_score"] = tf.cast(best["null_score"], tf.float32)
      outputs["is_impossible"] = best["is_impossible"]
    return outputs

  def from_ids(input_word_ids, input_mask, input_type_ids):
    start, end = logits_of(export.checked_ids(input_word_ids, input_mask, input_type_ids,
                                              model.config))
    return {"start_logits": start, "end_logits": end}

  signatures = {
      export.DEFAULT_SIGNATURE: export.serving_function(
          from_text, [export.text_spec("question"), export.text_spec("context")]),
      export.IDS_SIGNATURE: export.serving_function(from_ids, export.ids_specs()),
  }
  metadata = {
      "task": "squad",
      "version_2_with_negative": v2,
      "null_score_diff_threshold": 0.0 if v2 else None,
      "max_seq_length": max_seq_length,
      "doc_stride": doc_stride,
      "max_query_length": max_query_length,
      "max_answer_length": max_answer_length,
      "n_best_size": n_best_size,
      "answer_text": "word-level context span (no get_final_text trimming)",
  }
  return export.save_serving_module(export_dir, module, signatures, metadata,
                                    overwrite=overwrite)
