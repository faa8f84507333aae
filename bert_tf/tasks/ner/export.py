"""SavedModel export of a run_ner model: raw text in, entities (text, type, offsets, score) out.

The words are the original BasicTokenizer's, found in the raw input with their offsets
(the tokenizer's own split: whitespace, punctuation and CJK characters), so every entity
points back into the string it came from; each word is tagged by its first WordPiece, as
in training. Long texts are cut into windows of max_seq_length - 2 pieces, `stride` apart,
and each word is tagged from the window that gives it the most context (training's rule),
so nothing is dropped. Entities are the IOB2 chunks of the tags: a chunk opens at B-X, or
at I-X after a word that is not of type X.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import export
from bert_tf.checkpoints import checks
from bert_tf.errors import UserInputError
from bert_tf.text import windows as text_windows


def export_ner(export_dir, model, vocab_file, do_lower_case, max_seq_length, label_list,
               stride=None, overwrite=False, strip_accents=None):
  """Exports a TokenClassifierModel.

  Args:
    export_dir: destination folder (see `export.save_serving_module`).
    model: bert_tf.tasks.ner.TokenClassifierModel.
    vocab_file: vocab.txt of the checkpoint; its content is embedded.
    do_lower_case, strip_accents: as used for training.
    max_seq_length: the length of each window ([CLS] + pieces + [SEP]).
    label_list: the IOB2 labels in label-id order ("O", "B-PER", "I-PER", ...).
    stride: pieces between window starts (run_ner's --doc_stride; at most a window;
      default half a window).
    overwrite: replace an existing non-empty export_dir.

  Signatures:
    serving_default: text string [batch] -> entity_count int32 [batch] and, padded to the
      most entities in the batch ("" / 0 beyond a row's count): entity_texts string,
      entity_types string, entity_starts / entity_ends int32 (UTF-8 byte offsets into the
      input: text[start:end] is the entity; character offsets for ASCII text) and
      entity_scores float32 (the mean probability of the entity's word tags), all
      [batch, entities]. A row that is not valid UTF-8 fails the call with an
      InvalidArgumentError naming the row (the offsets could not index it).
    serve_ids: input_word_ids, input_mask, input_type_ids int32 [batch, seq] ->
      logits float32 [batch, seq, num_labels].

  Returns export_dir.
  """
  label_list = [str(label) for label in label_list]
  num_labels = model.ner.num_labels
  if len(label_list) != num_labels:
    raise UserInputError("label_list has %d labels but the head has num_labels=%d." %
                         (len(label_list), num_labels))
  if "O" not in label_list:
    raise UserInputError("label_list must hold the O label, got %s." % ",".join(label_list))
  export.check_export_dir(export_dir, overwrite)
  checks.check_seq_length(max_seq_length, model.config, 3, flag="max_seq_length")
  window = max_seq_length - 2
  stride = min(int(stride or window // 2 or 1), window)  # as packing.doc_spans_for
  if stride < 1:
    raise UserInputError("stride must be positive, got %d." % stride)
  tokenizer = export.make_tokenizer(vocab_file, do_lower_case, strip_accents)
  module = export.ServingModule(tokenizer, [model])
  types = [label[2:] if label != "O" else "" for label in label_list]
  type_names = sorted(set(t for t in types if t))
  # Per label: its type's index (-1 for O) and whether it is a B- label.
  label_type = tf.constant([type_names.index(t) if t else -1 for t in types], tf.int32)
  label_begins = tf.constant([label.startswith("B-") for label in label_list])
  type_table = tf.constant(type_names + [""])

  def logits_of(features):
    return tf.cast(model(features, training=False), tf.float32)

  # The BasicTokenizer's split (whitespace; punctuation and CJK kept as words), applied to
  # the raw text so that the offsets index it; each word is cleaned and cased on its own.
  split_pattern, keep_pattern = tokenizer.split_patterns

  def words_of(text):
    """[batch, (words)] raw words and their byte offsets, split like BasicTokenizer.

    tensorflow_text's regex split stops at a NUL byte (the rest of the row was lost), so
    NULs become \\x01 first: the same length, so the offsets still index the input, and
    like NUL a control character that the tokenizer deletes from the words."""
    text = tf.strings.regex_replace(text, r"\x00", "\x01")
    return tf_text.regex_split_with_offsets(text, split_pattern, keep_pattern)

  def checked_utf8(text):
    """`text`, once every row is valid UTF-8. The other exports drop invalid bytes, as the
    original's tokenizer does; here that would shift the offsets off the input's bytes, and
    keeping them gives entity texts that are not UTF-8 and cuts an entity at a lone bad byte
    (a word the original never sees), so invalid UTF-8 is refused, naming the first bad row."""
    valid = tf.equal(tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="ignore"), text)
    first_bad = tf.reduce_min(tf.where(tf.logical_not(valid))[:, 0])  # int64 max if none
    check = tf.debugging.Assert(tf.reduce_all(valid), [tf.strings.format(
        "text row {} is not valid UTF-8; send UTF-8 text (decoding with errors=ignore drops the "
        "bad bytes, as the other exports do)", first_bad)])
    with tf.control_dependencies([check]):
      return tf.identity(text)

  def tag_words(pieces_per_word):
    """Probabilities [words in the batch, labels] of each word's first piece (uniform rows
    stay for words without pieces, e.g. only control characters; they become O below).

    `pieces_per_word`: int32 RaggedTensor [batch, (words), (pieces)]."""
    counts = pieces_per_word.row_lengths(axis=2)  # [batch, (words)]
    pieces = pieces_per_word.merge_dims(1, 2)  # [batch, (pieces)]
    word_row = tf.cast(counts.value_rowids(), tf.int32)  # the string of each word
    # Each word's first piece, as a position in its string's pieces.
    word_first = tf.cast(tf.cumsum(counts.flat_values, exclusive=True)
                         - tf.gather(pieces.row_splits, word_row), tf.int32)
    # Windows: per string, starts 0, stride, ... until one reaches the end; an empty string
    # gets one empty window.
    windows = text_windows.doc_windows(pieces.row_lengths(), window, stride, at_least_one=True)
    window_row, window_start, window_length = (tf.cast(t, tf.int32) for t in windows)
    starts = tf.gather(pieces.row_splits, window_row) + tf.cast(window_start, tf.int64)
    flat_ids = pieces.flat_values
    index = tf.ragged.range(starts, starts + tf.cast(window_length, tf.int64))
    window_ids = tf.gather(flat_ids, index)  # [windows, (pieces)]
    count = tf.shape(window_row)[0]
    cls = tf.fill([count, 1], tf.cast(tokenizer.cls_id, tf.int32))
    sep = tf.fill([count, 1], tf.cast(tokenizer.sep_id, tf.int32))
    ids = tf.concat([cls, window_ids, sep], axis=1)
    input_word_ids = ids.to_tensor(0)
    input_mask = tf.ones_like(ids).to_tensor(0)
    with model.packing_tokens():  # every window holds its [CLS]; padding is never read
      logits = logits_of({"input_word_ids": input_word_ids, "input_mask": input_mask,
                          "input_type_ids": tf.zeros_like(input_word_ids)})
    probabilities = tf.nn.softmax(logits, axis=-1)  # [windows, seq, labels]

    # For each word: the window that gives its first piece the most context, as in training
    # (-1 for a word without pieces at a string's end: any window will do, it becomes O).
    has_piece = counts.flat_values > 0
    best_window = tf.cast(tf.maximum(
        text_windows.max_context_window(windows, word_row, word_first), 0), tf.int32)
    best_position = word_first - tf.gather(window_start, best_window) + 1  # after [CLS]
    # A word without pieces points past its string's pieces: any row will do (it becomes O).
    best_position = tf.clip_by_value(best_position, 0, tf.shape(probabilities)[1] - 1)
    rows = tf.gather_nd(probabilities, tf.stack([best_window, best_position], axis=1))
    uniform = tf.fill(tf.shape(rows), 1.0 / num_labels)
    return tf.where(has_piece[:, None], rows, uniform), has_piece, word_row

  def entities(text):
    text = checked_utf8(text)
    words, starts, ends = words_of(text)
    pieces_per_word = tokenizer.tokenize_words(words.flat_values).merge_dims(1, 2)
    pieces_per_word = tf.RaggedTensor.from_row_splits(pieces_per_word, words.row_splits)
    rows, has_piece, word_row = tag_words(pieces_per_word)
    label = tf.argmax(rows, axis=-1, output_type=tf.int32)
    word_type = tf.where(has_piece, tf.gather(label_type, label), -1)
    word_score = tf.reduce_max(rows, axis=-1)
    # A chunk opens at B-X, or at I-X after a word of another type or another string.
    previous_type = tf.concat([[-1], word_type[:-1]], axis=0)
    previous_row = tf.concat([[-1], word_row[:-1]], axis=0)
    opens = (word_type >= 0) & (tf.gather(label_begins, label) | (previous_type != word_type)
                                | (previous_row != word_row))
    in_chunk = word_type >= 0
    chunk = tf.cumsum(tf.cast(opens, tf.int32)) - 1  # the chunk of each word in a chunk
    member = tf.where(in_chunk)[:, 0]
    chunk_of = tf.gather(chunk, member)
    num_chunks = tf.reduce_sum(tf.cast(opens, tf.int32))
    flat_starts = tf.cast(starts.flat_values, tf.int32)
    flat_ends = tf.cast(ends.flat_values, tf.int32)
    start = tf.math.unsorted_segment_min(tf.gather(flat_starts, member), chunk_of, num_chunks)
    end = tf.math.unsorted_segment_max(tf.gather(flat_ends, member), chunk_of, num_chunks)
    score = tf.math.unsorted_segment_mean(tf.gather(word_score, member), chunk_of, num_chunks)
    kind = tf.math.unsorted_segment_max(tf.gather(word_type, member), chunk_of, num_chunks)
    row = tf.math.unsorted_segment_max(tf.gather(word_row, member), chunk_of, num_chunks)
    batch = tf.shape(text)[0]
    entity_text = tf.strings.substr(tf.gather(text, row), start, end - start)

    def padded(values, default):
      return tf.RaggedTensor.from_value_rowids(values, row, nrows=batch).to_tensor(default)

    return {"entity_count": tf.math.bincount(row, minlength=batch, maxlength=batch,
                                             dtype=tf.int32),
            "entity_texts": padded(entity_text, ""),
            "entity_types": padded(tf.gather(type_table, kind), ""),
            "entity_starts": padded(start, 0), "entity_ends": padded(end, 0),
            "entity_scores": padded(score, 0.0)}

  def from_ids(input_word_ids, input_mask, input_type_ids):
    return {"logits": logits_of(export.checked_ids(input_word_ids, input_mask, input_type_ids,
                                                   model.config))}

  signatures = {
      export.DEFAULT_SIGNATURE: export.serving_function(entities, [export.text_spec("text")]),
      export.IDS_SIGNATURE: export.serving_function(from_ids, export.ids_specs())}
  metadata = {"task": "ner", "labels": label_list, "num_labels": num_labels,
              "entity_types": type_names, "max_seq_length": max_seq_length, "stride": stride,
              "dynamic_length": model.dynamic_length}
  return export.save_serving_module(export_dir, module, signatures, metadata,
                                    overwrite=overwrite)
