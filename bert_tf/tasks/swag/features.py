"""SwagExamples -> features, their record layout (stated once, in `feature_spec`) and the
model's layout of a batch.

Each example becomes four sequences `[CLS] sent1 sent2 [SEP] ending_i [SEP]`, each
packed with the original's pair truncation. Records hold `input_ids`, `input_mask`,
`segment_ids` of NUM_CHOICES * max_seq_length values (choice-major), `label_ids`,
`is_real_example`; `to_choices` turns a parsed batch into the [batch, choices, seq]
inputs MultipleChoiceModel takes.
"""

from keras import ops
import tensorflow as tf

from bert_tf.data import input_pipeline, packing
from bert_tf.modeling import INPUT_NAMES
from bert_tf.tasks.swag.data import NUM_CHOICES


def convert_example(example, max_seq_length, tokenizer):
  """(input_ids, input_mask, segment_ids) lists of NUM_CHOICES * max_seq_length, label."""
  context_tokens = tokenizer.tokenize(example.context)
  ids, mask, segments = [], [], []
  for ending in example.endings:
    packed = packing.pack_tokens(context_tokens, tokenizer.tokenize(ending), max_seq_length,
                                 tokenizer)
    ids += packed.input_ids
    mask += packed.input_mask
    segments += packed.segment_ids
  return ids, mask, segments, example.label if example.label is not None else 0


def feature_spec(max_seq_length):
  """name -> (length, dtype) of the cached features, in file order (bert_tf.data.input_pipeline)."""
  return {**input_pipeline.encoder_features(NUM_CHOICES * max_seq_length),
          "label_ids": (1, tf.int64), "is_real_example": (1, tf.int64)}


def encode_features(features):
  """Serialized tf.train.Example of one `convert_example` tuple, in the layout of `feature_spec`."""
  input_ids, input_mask, segment_ids, label = features
  spec = feature_spec(len(input_ids) // NUM_CHOICES)
  return input_pipeline.encode_record(spec, {
      "input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
      "label_ids": [label], "is_real_example": [1]})


def to_choices(features):
  """A parsed batch in the model's layout: each encoder input [B, NUM_CHOICES * S]
  (choice-major, as the records hold it) becomes [B, NUM_CHOICES, S]; labels stay."""

  def split(value):
    if len(value.shape) != 2:
      return value  # already [B, NUM_CHOICES, S]
    return ops.reshape(value, (-1, NUM_CHOICES, ops.shape(value)[-1] // NUM_CHOICES))

  return {k: split(v) if k in INPUT_NAMES else v for k, v in features.items()}
