"""In-graph SQuAD features: raw question and context to the original's prediction windows.

The SQuAD SavedModel takes raw question and context strings, so the graph itself splits the
context into words (on `data.WHITESPACE_CODE_POINTS`, the rule of `data.split_context`),
tokenizes them, and cuts the pieces into the windows of `features.doc_spans_for` with the
max-context rule of `features.check_is_max_context` (both from `bert_tf.text.windows`).
tests/test_export_squad.py checks the result against the original's features.
"""

import tensorflow as tf

from bert_tf.tasks.squad.data import WHITESPACE_CODE_POINTS
from bert_tf.text import windows as text_windows


def safe_gather(params, indices, fill=0):
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
  ids = tf.where(in_query, safe_gather(query.flat_values, query_flat), zeros)
  ids = tf.where(in_context, safe_gather(doc.flat_values, doc_flat), ids)
  ids = tf.where(seps, tf.constant(tokenizer.sep_id, tf.int32), ids)
  ids = tf.where(column == 0, tf.constant(tokenizer.cls_id, tf.int32), ids)
  token_word = tf.where(in_context, safe_gather(piece_word, doc_flat, -1),
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
