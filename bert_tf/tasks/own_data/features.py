"""Rows of the user's file -> features, and their record layout (stated once, in
`feature_spec`): glue's (`input_ids`, `input_mask`, `segment_ids`, `label_ids`,
`is_real_example`), with `label_ids` a label id (single_label; -1 for a name the run does not
know), a 0/1 float per label (multi_label) or a float (regression). With
--long_document=windows, a record per window of the row (glue/windows.py's windows), or for
training by document a record per row holding its first windows end to end."""

import tensorflow as tf

from bert_tf.data import input_pipeline, packing
from bert_tf.tasks.glue import windows as glue_windows


def feature_spec(max_seq_length, problem_type, num_labels):
  """name -> (length, dtype) of the records, in file order (bert_tf.data.input_pipeline)."""
  label = {"single_label": (1, tf.int64), "regression": (1, tf.float32),
           "multi_label": (num_labels, tf.float32)}[problem_type]
  return {**input_pipeline.encoder_features(max_seq_length), "label_ids": label,
          "is_real_example": (1, tf.int64)}


def label_ids(label, problem_type, labels):
  """The record's label_ids of a row's label (None: a predict row without one)."""
  if problem_type == "regression":
    return [0.0 if label is None else float(label)]
  index = {name: i for i, name in enumerate(labels)}
  if problem_type == "multi_label":
    names = set(label or ())
    return [1.0 if name in names else 0.0 for name in labels]
  return [index.get(label, -1) if label is not None else 0]


def encode_row(row, max_seq_length, tokenizer, problem_type, labels, with_label=True):
  """Serialized tf.train.Example of one row (`with_label` False: the label is not read)."""
  tokens_a = tokenizer.tokenize(row.text_a)
  tokens_b = tokenizer.tokenize(row.text_b) if row.text_b else None
  packed = packing.pack_tokens(tokens_a, tokens_b, max_seq_length, tokenizer)
  return _record((packed.input_ids, packed.input_mask, packed.segment_ids), row, problem_type,
                 labels, with_label)


def _record(inputs, row, problem_type, labels, with_label):
  """The serialized record of (input_ids, input_mask, segment_ids) `inputs` and the row's
  label (a document's inputs are its windows end to end, a length the spec takes from them)."""
  spec = feature_spec(len(inputs[0]), problem_type, len(labels or ()))
  return input_pipeline.encode_record(spec, {
      "input_ids": inputs[0], "input_mask": inputs[1], "segment_ids": inputs[2],
      "label_ids": label_ids(row.label if with_label else None, problem_type, labels),
      "is_real_example": [1]})


def encode_windows(row, max_seq_length, tokenizer, problem_type, labels, with_label,
                   doc_stride):
  """The records of each window of the row (glue/windows.py's), each with the row's label."""
  return [_record(inputs, row, problem_type, labels, with_label)
          for inputs in glue_windows.window_inputs(row, max_seq_length, tokenizer, doc_stride)]


def encode_document(row, max_seq_length, tokenizer, problem_type, labels, doc_stride,
                    max_windows):
  """(record of a training document, windows the row has): its first `max_windows` windows
  end to end, empty windows after its last (glue/windows.document_inputs), the row's label
  once; the layout of feature_spec(max_windows * max_seq_length, ...)."""
  windows = glue_windows.window_inputs(row, max_seq_length, tokenizer, doc_stride)
  inputs = glue_windows.document_inputs(windows, max_seq_length, max_windows)
  return _record(inputs, row, problem_type, labels, True), len(windows)
