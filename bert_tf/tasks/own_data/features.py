"""Rows of the user's file -> features, and their record layout (stated once, in
`feature_spec`): glue's (`input_ids`, `input_mask`, `segment_ids`, `label_ids`,
`is_real_example`), with `label_ids` a label id (single_label; -1 for a name the run does not
know), a 0/1 float per label (multi_label) or a float (regression)."""

import tensorflow as tf

from bert_tf import input_pipeline, packing


def feature_spec(max_seq_length, problem_type, num_labels):
  """name -> (length, dtype) of the records, in file order (bert_tf.input_pipeline)."""
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
  spec = feature_spec(max_seq_length, problem_type, len(labels or ()))
  return input_pipeline.encode_record(spec, {
      "input_ids": packed.input_ids, "input_mask": packed.input_mask,
      "segment_ids": packed.segment_ids,
      "label_ids": label_ids(row.label if with_label else None, problem_type, labels),
      "is_real_example": [1]})
