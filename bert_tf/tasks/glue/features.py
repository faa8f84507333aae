"""GLUE examples -> features, and their record layout (stated once, in `feature_spec`).

Features are the original `convert_single_example` (via bert_tf.data.packing), cached
as TFRecords with `input_ids`, `input_mask`, `segment_ids`, `label_ids`,
`is_real_example` like `file_based_convert_examples_to_features`.
"""

import tensorflow as tf

from bert_tf.data import input_pipeline, packing
from bert_tf.errors import UserInputError
from bert_tf.tasks.glue.data import PaddingInputExample


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer):
  """The original's features: (input_ids, input_mask, segment_ids, label_id, is_real).

  label_id is a float for regression (label_list None), an int otherwise; the TPU
  padding examples keep that type, so their records have the layout of the others.
  """
  del ex_index  # the original used it only to log the first examples
  if isinstance(example, PaddingInputExample):
    zeros = [0] * max_seq_length
    return zeros, zeros, zeros, 0.0 if label_list is None else 0, 0
  label_id = label_id_of(example, label_list)
  tokens_a = tokenizer.tokenize(example.text_a)
  tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
  packed = packing.pack_tokens(tokens_a, tokens_b, max_seq_length, tokenizer)
  return packed.input_ids, packed.input_mask, packed.segment_ids, label_id, 1


def label_id_of(example, label_list):
  """The example's label as its record holds it: a float (regression) or an index."""
  if label_list is None:
    return float(example.label)
  try:
    return label_list.index(example.label)
  except ValueError:
    raise UserInputError("Example %s has label %r, which is not one of the task's labels %s." %
                         (example.guid, example.label, label_list)) from None


def feature_spec(max_seq_length, regression=False):
  """name -> (length, dtype) of the cached features, in file order (bert_tf.data.input_pipeline)."""
  return {**input_pipeline.encoder_features(max_seq_length),
          "label_ids": (1, tf.float32 if regression else tf.int64),
          "is_real_example": (1, tf.int64)}


def encode_features(features):
  """Serialized tf.train.Example of one feature tuple, in the layout of `feature_spec`."""
  input_ids, input_mask, segment_ids, label_id, is_real = features
  spec = feature_spec(len(input_ids), regression=isinstance(label_id, float))
  return input_pipeline.encode_record(spec, {
      "input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
      "label_ids": [label_id], "is_real_example": [is_real]})
