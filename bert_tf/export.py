"""SavedModel export: tokenizer, model weights and serving signatures in one folder.

The core (`ServingModule`, `save_serving_module`) is task-neutral: it saves a
tf.Module that owns a `BertTextTokenizer` (vocabulary and character tables are
graph constants, so no path to vocab.txt survives) and the models' variables,
with one tf.function per signature, plus `assets.extra/bert_tf_export.json`, a
small human-readable description. Each task adds one `export_<task>` function
that builds its signatures on that core (`export_classifier`, `export_squad`;
SWAG later).

Loading needs only `import tensorflow, tensorflow_text` (the latter registers the
tokenizer's ops); bert_tf is not needed. Tools that do not import
tensorflow_text (the plain `saved_model_cli run`, a TF Serving binary built
without tf-text ops) cannot load the graph at all, `serve_ids` included. Signatures
are traced with `jit_compile=False`: XLA clusters stored in a SavedModel are
tied to the exporting machine's compiler and CPU features, and the loader can
still JIT if it wants to.
"""

import json
import os
import platform
import unicodedata
import uuid

import tensorflow as tf

import bert_tf
from bert_tf.errors import UserInputError
from bert_tf.text import BertTextTokenizer

METADATA_DIR = "assets.extra"
METADATA_FILE = "bert_tf_export.json"
DEFAULT_SIGNATURE = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY  # "serving_default"
IDS_SIGNATURE = "serve_ids"
IDS_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


# ------------------------------------------------------------------------- core

class ServingModule(tf.Module):
  """Owns the tokenizer and the models' variables, so tf.saved_model.save saves them.

  The Keras models themselves are deliberately not tracked, only their underlying
  tf.Variables: a tracked Keras 3 variable is exported as a second tf.Variable
  beside the one the graph reads, and the TF1/C++ loader (TF Serving,
  `saved_model_cli run`) restores the checkpoint into that copy, leaving the read
  one uninitialized. Signature functions close over the models directly.
  """

  def __init__(self, tokenizer, models):
    super().__init__(name="bert_tf_export")
    self.tokenizer = tokenizer
    self.model_variables = _plain_variables(models)


def _plain_variables(models):
  """The tf.Variables behind the Keras models' weights, each once."""
  found, seen = [], set()
  for model in models:
    for weight in model.weights:
      variable = getattr(weight, "value", weight)
      if not isinstance(variable, tf.Variable):
        raise TypeError("Cannot export weight %s: not backed by a tf.Variable "
                        "(is the Keras backend TensorFlow?)." % weight.path)
      if id(variable) not in seen:
        seen.add(id(variable))
        found.append(variable)
  return found


def text_spec(name):
  """A batch of raw strings, one per example."""
  return tf.TensorSpec([None], tf.string, name=name)


def ids_specs():
  """The three packed int32 [batch, seq] inputs, named like the tokenizer's outputs."""
  return [tf.TensorSpec([None, None], tf.int32, name=n) for n in IDS_INPUTS]


def serving_function(fn, input_signature):
  """A signature tf.function: fixed input specs, no XLA, no AutoGraph (plain ops only)."""
  return tf.function(fn, input_signature=input_signature, jit_compile=False, autograph=False)


def check_seq_length(max_seq_length, encoder, min_length):
  """Fails at export time, not at the first request, on a length the encoder cannot take."""
  limit = encoder.config.max_position_embeddings
  if not isinstance(max_seq_length, int) or not min_length <= max_seq_length <= limit:
    raise UserInputError(
        "max_seq_length=%r must be an integer between %d and max_position_embeddings=%d."
        % (max_seq_length, min_length, limit))


def checked_ids(input_word_ids, input_mask, input_type_ids, max_length):
  """The encoder's input dict; a too-long batch fails with a message, not a shape error."""
  check = tf.debugging.assert_less_equal(
      tf.shape(input_word_ids)[1], max_length,
      message="Sequence longer than the model's max_position_embeddings.")
  with tf.control_dependencies([check]):
    return {"input_ids": tf.identity(input_word_ids), "input_mask": input_mask,
            "token_type_ids": input_type_ids}


def _signature_io(concrete):
  """{"inputs": {name: spec}, "outputs": {name: spec}} of a concrete function, as strings."""

  def describe(spec):
    return {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}

  args, kwargs = concrete.structured_input_signature
  inputs = {s.name: describe(s) for s in tf.nest.flatten((args, kwargs))}
  outputs = {k: describe(tf.TensorSpec.from_tensor(v))
             for k, v in concrete.structured_outputs.items()}
  return {"inputs": inputs, "outputs": outputs}


def _is_nonempty_dir(path):
  return tf.io.gfile.isdir(path) and bool(tf.io.gfile.listdir(path))


def check_export_dir(export_dir, overwrite=False):
  """Fails early (e.g. before training) if an export to `export_dir` would be refused."""
  export_dir = os.fspath(export_dir)
  if tf.io.gfile.exists(export_dir) and not tf.io.gfile.isdir(export_dir):
    raise UserInputError("Export path %s is a file, not a folder." % export_dir)
  if not overwrite and _is_nonempty_dir(export_dir):
    raise UserInputError("Export folder %s already exists and is not empty; choose another "
                         "folder or pass overwrite=True to replace it." % export_dir)
  parent = os.path.dirname(export_dir.rstrip("/")) or "."
  if not tf.io.gfile.isdir(parent):
    raise UserInputError("Folder %s (for the export) does not exist." % parent)


def save_serving_module(export_dir, module, signatures, metadata, overwrite=False):
  """Saves `module` as a SavedModel at `export_dir`, all or nothing.

  Args:
    export_dir: destination folder; an existing non-empty one is replaced only if
      `overwrite`.
    module: a ServingModule.
    signatures: {signature name: tf.function with an input_signature}, each
      returning a dict of named tensors; also kept as attributes of `module`.
    metadata: JSON-serialisable dict, written to assets.extra/bert_tf_export.json
      together with the signatures' inputs and outputs.
    overwrite: replace an existing non-empty export_dir.

  The SavedModel is written to a temporary folder beside export_dir and renamed,
  so readers (a model server watching the folder) never see half an export (on
  local disks; object stores such as GCS have no atomic folder rename).
  Returns export_dir.
  """
  export_dir = os.fspath(export_dir).rstrip("/") or "/"
  check_export_dir(export_dir, overwrite)
  concrete = {}
  for name, fn in signatures.items():
    setattr(module, name, fn)
    concrete[name] = fn.get_concrete_function()
  metadata = dict(metadata)
  metadata["signatures"] = {name: _signature_io(c) for name, c in concrete.items()}
  metadata.update({
      "bert_tf_version": bert_tf.__version__,
      "tensorflow_version": tf.__version__,
      # The tokenizer's character tables come from this Python's unicodedata.
      "unicode_version": unicodedata.unidata_version,
      "python_version": platform.python_version(),
  })

  suffix = uuid.uuid4().hex[:8]
  tmp = "%s.tmp-%s" % (export_dir, suffix)
  old = "%s.old-%s" % (export_dir, suffix)
  try:
    tf.saved_model.save(module, tmp, signatures=concrete)
    tf.io.gfile.makedirs(os.path.join(tmp, METADATA_DIR))
    with tf.io.gfile.GFile(os.path.join(tmp, METADATA_DIR, METADATA_FILE), "w") as f:
      f.write(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
    # Checked again: another process may have written export_dir meanwhile.
    check_export_dir(export_dir, overwrite)
    if tf.io.gfile.isdir(export_dir):
      tf.io.gfile.rename(export_dir, old)  # Empty, or overwrite=True; deleted below.
    try:
      tf.io.gfile.rename(tmp, export_dir)
    except Exception:
      if tf.io.gfile.exists(old):
        tf.io.gfile.rename(old, export_dir)
      raise
  finally:
    for leftover in (tmp, old):
      if tf.io.gfile.exists(leftover):
        tf.io.gfile.rmtree(leftover)
  return export_dir


def read_metadata(export_dir):
  """The bert_tf_export.json of an export, as a dict."""
  with tf.io.gfile.GFile(os.path.join(export_dir, METADATA_DIR, METADATA_FILE)) as f:
    return json.load(f)


# ------------------------------------------------------------------ classifier

def export_classifier(export_dir, encoder, head, vocab_file, do_lower_case, max_seq_length,
                      label_list, text_pair, overwrite=False):
  """Exports a run_classifier model (classification, or regression with one output).

  Args:
    export_dir: destination folder (see `save_serving_module`).
    encoder: bert_tf.modeling.BertModel.
    head: bert_tf.heads.ClassificationHead on the pooled output.
    vocab_file: vocab.txt of the checkpoint; its content is embedded.
    do_lower_case: as used for training.
    max_seq_length: packed length of raw-text inputs.
    label_list: label strings in label-id order, or None for regression (then the
      head must have num_labels == 1).
    text_pair: whether the task takes sentence pairs (adds the `text_b` input).
    overwrite: replace an existing non-empty export_dir.

  Signatures:
    serving_default: text_a (and text_b) string [batch] -> classification:
      probabilities float32 [batch, num_labels], label_ids int32 [batch], labels
      string [batch]; regression: predictions float32 [batch].
    serve_ids: input_word_ids, input_mask, input_type_ids int32 [batch, seq] ->
      logits float32 [batch, num_labels] (and predictions for regression).

  Returns export_dir.
  """
  num_labels = head.num_labels
  regression = label_list is None
  if regression and num_labels != 1:
    raise UserInputError("A regression export (label_list=None) needs a head with one "
                         "output, got num_labels=%d." % num_labels)
  if not regression:
    label_list = [str(label) for label in label_list]
    if len(label_list) != num_labels:
      raise UserInputError("label_list has %d labels but the head has num_labels=%d."
                           % (len(label_list), num_labels))
  check_export_dir(export_dir, overwrite)
  text_pair = bool(text_pair)
  check_seq_length(max_seq_length, encoder, 3 if text_pair else 2)
  tokenizer = BertTextTokenizer(os.fspath(vocab_file), do_lower_case=do_lower_case)
  module = ServingModule(tokenizer, [encoder, head])
  max_positions = encoder.config.max_position_embeddings

  def logits_of(inputs):
    pooled = encoder(inputs, training=False)["pooled_output"]
    return tf.cast(head(pooled, training=False), tf.float32)

  def answer(logits):
    if regression:
      return {"predictions": logits[:, 0]}
    label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "label_ids": label_ids,
            "labels": tf.gather(tf.constant(label_list), label_ids)}

  def from_text(text_a, text_b=None):
    features = module.tokenizer.encode(text_a, text_b, seq_length=max_seq_length)
    return answer(logits_of({"input_ids": features["input_word_ids"],
                             "input_mask": features["input_mask"],
                             "token_type_ids": features["input_type_ids"]}))

  def from_ids(input_word_ids, input_mask, input_type_ids):
    logits = logits_of(checked_ids(input_word_ids, input_mask, input_type_ids, max_positions))
    outputs = {"logits": logits}
    if regression:
      outputs["predictions"] = logits[:, 0]
    return outputs

  if text_pair:
    serve_text = serving_function(from_text, [text_spec("text_a"), text_spec("text_b")])
  else:

    def from_single_text(text_a):
      return from_text(text_a)

    serve_text = serving_function(from_single_text, [text_spec("text_a")])
  signatures = {DEFAULT_SIGNATURE: serve_text,
                IDS_SIGNATURE: serving_function(from_ids, ids_specs())}
  metadata = {
      "task": "regression" if regression else "classification",
      "labels": label_list,
      "num_labels": num_labels,
      "max_seq_length": max_seq_length,
      "do_lower_case": tokenizer.do_lower_case,
      "text_pair": text_pair,
      "vocab_size": tokenizer.vocab_size,
  }
  return save_serving_module(export_dir, module, signatures, metadata, overwrite=overwrite)


# ----------------------------------------------------------------------- squad

# run_squad's `is_whitespace`: the only characters that split a context into words.
SQUAD_WHITESPACE = (0x20, 0x09, 0x0D, 0x0A, 0x202F)
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

  Contexts are split into words on SQUAD_WHITESPACE only, each word is tokenized
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
      tf.equal(cps[:, None], tf.constant(SQUAD_WHITESPACE, tf.int32)[None, :]), axis=1)
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

  # Windows: the original's doc_spans. Every window but the last has length
  # max_tokens_for_doc, so starts advance by min(doc_stride, max_tokens_for_doc).
  query_len = query.row_lengths()
  doc_len = doc.row_lengths()
  max_doc = seq - 3 - query_len
  stride = tf.minimum(tf.cast(doc_stride, tf.int64), max_doc)
  num_windows = tf.where(doc_len == 0, tf.zeros_like(doc_len),
                         1 + tf.maximum(doc_len - max_doc + stride - 1, 0) // stride)
  window_row = tf.repeat(tf.range(num_rows), num_windows)
  total = tf.size(window_row, out_type=tf.int64)
  window_index = tf.range(total) - tf.gather(tf.cumsum(num_windows, exclusive=True),
                                             window_row)
  w_stride = tf.gather(stride, window_row)
  w_max = tf.gather(max_doc, window_row)
  w_start = window_index * w_stride
  w_len = tf.minimum(tf.gather(doc_len, window_row) - w_start, w_max)

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

  # _check_is_max_context: windows start on multiples of the stride, so two
  # windows holding the same piece are at most (max_doc - 1) // stride apart; each
  # window compares with its neighbours within that distance, and the first
  # window with the best score owns the piece.
  reach = tf.reduce_max(tf.concat([[0], (w_max - 1) // w_stride], axis=0))
  shift = tf.range(-reach, reach + 1)
  other = tf.range(total)[:, None] + shift[None, :]  # [windows, shifts]
  safe_other = tf.clip_by_value(other, 0, tf.maximum(total - 1, 0))
  valid = tf.logical_and(tf.logical_and(other >= 0, other < total),
                         tf.gather(window_row, safe_other) == window_row[:, None])
  o_start = tf.gather(w_start, safe_other)[:, :, None]
  o_len = tf.gather(w_len, safe_other)[:, :, None]
  o_last = o_start + o_len - 1
  position = doc_pos[:, None, :]
  holds = tf.logical_and(valid[:, :, None],
                         tf.logical_and(position >= o_start, position <= o_last))
  # Same float64 arithmetic as the original, so equal scores tie exactly.
  score = (tf.cast(tf.minimum(position - o_start, o_last - position), tf.float64) +
           0.01 * tf.cast(o_len, tf.float64))
  own = score[:, reach, :][:, None, :]
  beats = tf.where((shift < 0)[None, :, None], score >= own, score > own)
  is_max_context = tf.logical_and(
      in_context, tf.logical_not(tf.reduce_any(tf.logical_and(holds, beats), axis=1)))

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


def export_squad(export_dir, encoder, head, vocab_file, do_lower_case, max_seq_length,
                 doc_stride, max_query_length, max_answer_length, n_best_size=20,
                 version_2_with_negative=False, overwrite=False,
                 window_batch_size=SQUAD_WINDOW_BATCH):
  """Exports a run_squad model that answers questions about raw text.

  Args:
    export_dir: destination folder (see `save_serving_module`).
    encoder: bert_tf.modeling.BertModel.
    head: bert_tf.heads.SpanHead on the sequence output.
    vocab_file: vocab.txt of the checkpoint; its content is embedded.
    do_lower_case: as used for training.
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
  check_export_dir(export_dir, overwrite)
  _check_int_at_least("max_query_length", max_query_length, 0)
  _check_int_at_least("doc_stride", doc_stride, 1)
  _check_int_at_least("max_answer_length", max_answer_length, 1)
  _check_int_at_least("n_best_size", n_best_size, 1)
  _check_int_at_least("window_batch_size", window_batch_size, 1)
  check_seq_length(max_seq_length, encoder, 3)
  if max_seq_length <= max_query_length + 3:
    raise UserInputError("The max_seq_length (%d) must be greater than max_query_length "
                         "(%d) + 3." % (max_seq_length, max_query_length))
  tokenizer = BertTextTokenizer(os.fspath(vocab_file), do_lower_case=do_lower_case)
  if tokenizer.cls_id is None or tokenizer.sep_id is None:
    raise UserInputError("The vocabulary lacks [CLS] or [SEP]; it cannot pack inputs.")
  module = ServingModule(tokenizer, [encoder, head])
  max_positions = encoder.config.max_position_embeddings
  v2 = bool(version_2_with_negative)

  def logits_of(inputs):
    start, end = head(encoder(inputs, training=False)["sequence_output"])
    return tf.cast(start, tf.float32), tf.cast(end, tf.float32)

  def window_logits(windows):
    """Start and end logits of all windows, window_batch_size windows per call."""
    ids, mask, types = (windows[k] for k in IDS_INPUTS)
    total = tf.shape(ids)[0]
    chunks = (total + window_batch_size - 1) // window_batch_size

    def body(i, starts, ends):
      rows = tf.range(i * window_batch_size, tf.minimum((i + 1) * window_batch_size, total))
      start, end = logits_of({"input_ids": tf.gather(ids, rows),
                              "input_mask": tf.gather(mask, rows),
                              "token_type_ids": tf.gather(types, rows)})
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
    start, end = logits_of(checked_ids(input_word_ids, input_mask, input_type_ids,
                                       max_positions))
    return {"start_logits": start, "end_logits": end}

  signatures = {
      DEFAULT_SIGNATURE: serving_function(from_text,
                                          [text_spec("question"), text_spec("context")]),
      IDS_SIGNATURE: serving_function(from_ids, ids_specs()),
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
      "do_lower_case": tokenizer.do_lower_case,
      "vocab_size": tokenizer.vocab_size,
      "answer_text": "word-level context span (no get_final_text trimming)",
  }
  return save_serving_module(export_dir, module, signatures, metadata, overwrite=overwrite)


# ------------------------------------------------------------------------ swag

def export_swag(export_dir, encoder, head, vocab_file, do_lower_case, max_seq_length,
                overwrite=False, num_choices=4):
  """Exports a run_swag model (bert_tf.heads.MultipleChoiceHead on the pooled output).

  Signatures:
    serving_default: context, ending0..ending3 string [batch] -> probabilities
      float32 [batch, 4], label_ids int32 [batch] (the most likely ending).
    serve_ids: input_word_ids, input_mask, input_type_ids int32 [batch * 4, seq]
      (choice-major within each example) -> logits float32 [batch, 4].
  Each choice is packed like run_swag: `[CLS] context [SEP] ending_i [SEP]`.
  """
  check_export_dir(export_dir, overwrite)
  check_seq_length(max_seq_length, encoder, 3)
  tokenizer = BertTextTokenizer(os.fspath(vocab_file), do_lower_case=do_lower_case)
  module = ServingModule(tokenizer, [encoder, head])
  max_positions = encoder.config.max_position_embeddings

  def scores_of(inputs):
    pooled = encoder(inputs, training=False)["pooled_output"]
    return tf.cast(head(pooled, num_choices=num_choices), tf.float32)

  def from_text(context, *endings):
    # Rows of all choices, choice-major per example: [batch, choices] -> [batch * choices].
    contexts = tf.reshape(tf.repeat(context[:, None], num_choices, axis=1), [-1])
    flat_endings = tf.reshape(tf.stack(endings, axis=1), [-1])
    features = module.tokenizer.encode(contexts, flat_endings, seq_length=max_seq_length)
    logits = scores_of({"input_ids": features["input_word_ids"],
                        "input_mask": features["input_mask"],
                        "token_type_ids": features["input_type_ids"]})
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "label_ids": tf.argmax(logits, axis=-1, output_type=tf.int32)}

  def from_ids(input_word_ids, input_mask, input_type_ids):
    return {"logits": scores_of(checked_ids(input_word_ids, input_mask, input_type_ids,
                                            max_positions))}

  names = ["context"] + ["ending%d" % i for i in range(num_choices)]
  serve_text = serving_function(from_text, [text_spec(name) for name in names])
  signatures = {DEFAULT_SIGNATURE: serve_text,
                IDS_SIGNATURE: serving_function(from_ids, ids_specs())}
  metadata = {"task": "multiple_choice", "num_choices": num_choices,
              "max_seq_length": max_seq_length, "do_lower_case": tokenizer.do_lower_case,
              "vocab_size": tokenizer.vocab_size}
  return save_serving_module(export_dir, module, signatures, metadata, overwrite=overwrite)
