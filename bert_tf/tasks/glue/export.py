"""SavedModel export of a run_classifier model: raw text in, labels and probabilities out.

With windows (run_classifier --long_document=windows) a long text_a is cut into windows
in-graph, by `text_windows.doc_windows` (the SQuAD and NER exports' windows) and
`windows.window_room` stated as graph ops, and each row's answer pools its windows' logits,
so a request gets the prediction run_classifier writes for it.
"""

import tensorflow as tf

from bert_tf import export
from bert_tf.checkpoints import checks
from bert_tf.errors import UserInputError
from bert_tf.tasks.glue import windows as glue_windows
from bert_tf.text import packing
from bert_tf.text import windows as text_windows


def export_classifier(export_dir, model, vocab_file, do_lower_case, max_seq_length, label_list,
                      text_pair, overwrite=False, strip_accents=None, windows=None):
  """Exports a ClassifierModel (classification, or regression with one output).

  Args:
    export_dir: destination folder (see `export.save_serving_module`).
    model: bert_tf.tasks.glue.ClassifierModel.
    vocab_file: vocab.txt of the checkpoint; its content is embedded.
    do_lower_case, strip_accents: as used for training.
    max_seq_length: packed length of raw-text inputs.
    label_list: label strings in label-id order, or None for regression (then the
      model must have one output).
    text_pair: whether the task takes sentence pairs (adds the `text_b` input).
    overwrite: replace an existing non-empty export_dir.
    windows: a glue.WindowOptions to read long texts as run_classifier
      --long_document=windows does; None truncates (the original).

  Signatures:
    serving_default: text_a (and text_b) string [batch] -> classification:
      probabilities float32 [batch, num_labels], label_ids int32 [batch], labels
      string [batch]; regression: predictions float32 [batch]. With `windows`, from
      the row's windows' logits pooled (a row's text_a of any length).
    serve_ids: input_word_ids, input_mask, input_type_ids int32 [batch, seq] ->
      logits float32 [batch, num_labels] (and predictions for regression).

  Returns export_dir.
  """
  num_labels = model.classifier.num_labels
  regression = label_list is None
  if regression and num_labels != 1:
    raise UserInputError("A regression export (label_list=None) needs a head with one "
                         "output, got num_labels=%d." % num_labels)
  if not regression:
    label_list = [str(label) for label in label_list]
    if len(label_list) != num_labels:
      raise UserInputError("label_list has %d labels but the head has num_labels=%d."
                           % (len(label_list), num_labels))
  export.check_export_dir(export_dir, overwrite)
  text_pair = bool(text_pair)
  min_length = glue_windows.min_seq_length(text_pair) if windows else 3 if text_pair else 2
  checks.check_seq_length(max_seq_length, model.config, min_length, flag="max_seq_length")
  if windows:
    checks.check_positive("doc_stride", windows.doc_stride)
    if windows.pooling not in glue_windows.POOLINGS:
      raise UserInputError("window_pooling=%r must be one of %s." %
                           (windows.pooling, ", ".join(glue_windows.POOLINGS)))
  tokenizer = export.make_tokenizer(vocab_file, do_lower_case, strip_accents)
  module = export.ServingModule(tokenizer, [model])

  def logits_of(features):
    return tf.cast(model(features, training=False), tf.float32)

  def answer(logits):
    if regression:
      return {"predictions": logits[:, 0]}
    label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "label_ids": label_ids,
            "labels": tf.gather(tf.constant(label_list), label_ids)}

  def from_text(text_a, text_b=None):
    with model.packing_tokens():
      if windows:
        return answer(windowed_logits(module.tokenizer, text_a, text_b, max_seq_length,
                                      windows, logits_of))
      return answer(logits_of(module.tokenizer.encode(text_a, text_b,
                                                      seq_length=max_seq_length)))

  def from_ids(input_word_ids, input_mask, input_type_ids):
    logits = logits_of(export.checked_ids(input_word_ids, input_mask, input_type_ids,
                                          model.config))
    outputs = {"logits": logits}
    if regression:
      outputs["predictions"] = logits[:, 0]
    return outputs

  if text_pair:
    serve_text = export.serving_function(from_text, [export.text_spec("text_a"),
                                                     export.text_spec("text_b")])
  else:

    def from_single_text(text_a):
      return from_text(text_a)

    serve_text = export.serving_function(from_single_text, [export.text_spec("text_a")])
  signatures = {export.DEFAULT_SIGNATURE: serve_text,
                export.IDS_SIGNATURE: export.serving_function(from_ids, export.ids_specs())}
  metadata = {
      "task": "regression" if regression else "classification",
      "labels": label_list,
      "num_labels": num_labels,
      "max_seq_length": max_seq_length,
      "dynamic_length": model.dynamic_length,
      "text_pair": text_pair,
  }
  if windows:
    metadata.update(long_document="windows", doc_stride=windows.doc_stride,
                    window_pooling=windows.pooling)
    if windows.no_label:
      metadata["window_no_label"] = label_list[windows.no_label]
  return export.save_serving_module(export_dir, module, signatures, metadata,
                                    overwrite=overwrite)


def window_room(len_a, len_b, max_seq_length):
  """`windows.window_room` of each row, as graph ops: (pieces of text_a per window, pieces
  of text_b kept), int64 [rows]; a row whose text_b has no pieces is a single text.

  An empty text_a beside a text_b that fills the room leaves text_a 0 pieces a window; that
  row has one empty window whatever the width, so the width is given as 1 (`doc_windows`
  steps by it: 0 would divide by zero and fail the whole batch)."""
  room = tf.constant(max_seq_length - 3, tf.int64)
  keep_b = tf.minimum(len_b, room - tf.minimum(len_a, (room + 1) // 2))
  single = tf.equal(len_b, 0)
  return (tf.where(single, room + 1, tf.maximum(room - keep_b, 1)),
          tf.where(single, tf.zeros_like(keep_b), keep_b))


def window_features(tokenizer, text_a, text_b, max_seq_length, doc_stride):
  """The packed windows of every row (`windows.example_windows` as graph ops): (dict of
  int32 [windows, max_seq_length] input_word_ids, input_mask, input_type_ids; int64
  [windows] row of each window). Every row has at least one window (an empty text_a gives
  `[CLS] [SEP] b [SEP]`), in row order."""
  if tokenizer.cls_id is None or tokenizer.sep_id is None:
    raise UserInputError("The vocabulary lacks [CLS] or [SEP]; it cannot pack inputs.")
  pieces_a = tokenizer.tokenize(text_a).with_row_splits_dtype(tf.int64)
  len_a = pieces_a.row_lengths()
  if text_b is None:
    per_window, keep_b = max_seq_length - 2, None
  else:
    pieces_b = tokenizer.tokenize(text_b).with_row_splits_dtype(tf.int64)
    same = tf.debugging.assert_equal(
        pieces_a.nrows(), pieces_b.nrows(),
        message="text_a and text_b must have the same batch size (one text_b per text_a; an "
                "empty string for a single sentence).")
    with tf.control_dependencies([same]):
      per_window, keep_b = window_room(len_a, pieces_b.row_lengths(), max_seq_length)
  row, start, length = text_windows.doc_windows(len_a, per_window, doc_stride,
                                                at_least_one=True)

  def pieces_of(pieces, first, count):
    first = tf.gather(pieces.row_starts(), row) + first
    return tf.gather(pieces.flat_values, tf.ragged.range(first, first + count))

  segments_b = None if text_b is None else pieces_of(pieces_b, 0, tf.gather(keep_b, row))
  features = packing.pack_inputs(pieces_of(pieces_a, start, length), segments_b,
                                      max_seq_length, tokenizer.cls_id, tokenizer.sep_id)
  return features, row


def windowed_logits(tokenizer, text_a, text_b, max_seq_length, windows, logits_of,
                    multi_label=False):
  """Per row, its windows' logits (`logits_of(features)`) pooled: [rows, labels] float32
  (`multi_label`: each label's on its own, windows.label_pooling)."""
  features, row = window_features(tokenizer, text_a, text_b, max_seq_length, windows.doc_stride)
  logits, rows = logits_of(features), tf.size(text_a)
  pooling = glue_windows.label_pooling(windows.pooling, multi_label)
  if pooling == "any":  # the window least likely to be the "no" label, the earliest
    first = tf.nn.log_softmax(logits)[:, windows.no_label]
    lowest = tf.gather(tf.math.unsorted_segment_min(first, row, rows), row)
    window = tf.range(tf.size(row, out_type=tf.int64))
    chosen = tf.math.unsorted_segment_min(tf.where(first <= lowest, window, tf.size(
        row, out_type=tf.int64)), row, rows)
    return tf.gather(logits, chosen)
  pool = (tf.math.unsorted_segment_max if pooling == "max"
          else tf.math.unsorted_segment_mean)
  return pool(logits, row, rows)
