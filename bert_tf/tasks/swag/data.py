"""SWAG multiple choice (paper section 4.4): reading, features and the task.

Each example becomes four sequences `[CLS] sent1 sent2 [SEP] ending_i [SEP]`
(sent2 is the start of the sentence the endings complete), each packed with the
original's pair truncation. The pooled [CLS] output of each sequence is scored by
one vector; a softmax over the four scores is trained with cross-entropy.
Features are cached as TFRecords: `input_ids`, `input_mask`, `segment_ids` of
NUM_CHOICES * max_seq_length values (choice-major), `label_ids`, `is_real_example`.
"""

import csv
import dataclasses
import io

from keras import ops

from bert_tf import example_codec, heads, packing, user_files
from bert_tf.errors import UserInputError
from bert_tf.modeling import encoder_inputs
from bert_tf.tasks import base

NUM_CHOICES = 4
_COLUMNS = ("video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0",
            "ending1", "ending2", "ending3")


@dataclasses.dataclass
class SwagExample:
  swag_id: str
  context: str
  endings: list
  label: int = None


def read_swag_examples(input_file, has_labels):
  """SwagExamples from a SWAG CSV (header row; test files have no label column)."""
  text = user_files.read_text(input_file, "SWAG file", "(check --data_dir)")
  rows = list(csv.DictReader(io.StringIO(text, newline="")))
  if not rows:
    raise UserInputError("SWAG file %s has no rows." % input_file)
  missing = [c for c in _COLUMNS + (("label",) if has_labels else ()) if c not in rows[0]]
  if missing:
    raise UserInputError("SWAG file %s lacks column(s) %s." % (input_file, ", ".join(missing)))
  examples = []
  for number, row in enumerate(rows, 2):  # line 1 is the header
    endings = [row["ending%d" % i] for i in range(NUM_CHOICES)]
    if any(e is None or not e.strip() for e in endings):
      raise UserInputError("%s line %d: an ending is missing or empty." % (input_file, number))
    label = None
    if has_labels:
      try:
        label = int(row["label"])
      except (TypeError, ValueError):
        label = -1
      if not 0 <= label < NUM_CHOICES:
        raise UserInputError("%s line %d: label %r is not 0-%d." %
                             (input_file, number, row["label"], NUM_CHOICES - 1))
    context = " ".join(t for t in (row["sent1"], row["sent2"]) if t)
    swag_id = "%s-%s" % (row["video-id"], row["fold-ind"])
    examples.append(SwagExample(swag_id, context, endings, label))
  return examples


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


def encode_features(features):
  input_ids, input_mask, segment_ids, label = features
  int64 = example_codec.int64_feature
  return example_codec.encode_example([
      ("input_ids", int64(input_ids)), ("input_mask", int64(input_mask)),
      ("segment_ids", int64(segment_ids)), ("label_ids", int64([label])),
      ("is_real_example", int64([1]))])


def feature_spec(max_seq_length):
  import tensorflow as tf
  length = NUM_CHOICES * max_seq_length
  return {"input_ids": (length, tf.int64), "input_mask": (length, tf.int64),
          "segment_ids": (length, tf.int64), "label_ids": (1, tf.int64),
          "is_real_example": (1, tf.int64)}


class MultipleChoiceModel(base.TaskModel):
  """BertModel run on every choice, scored by the MultipleChoiceHead."""

  def create_heads(self):
    self.choice = heads.MultipleChoiceHead(self.config, name="swag", dtype=self.dtype_policy)
    return [self.choice]

  def call(self, features, training=False):
    """features: [B, NUM_CHOICES * S], choice-major -> [B, NUM_CHOICES] scores."""
    seq_length = ops.shape(features["input_word_ids"])[-1] // NUM_CHOICES
    flat = {k: ops.reshape(v, (-1, seq_length)) for k, v in encoder_inputs(features).items()}
    pooled = self.encode(flat, training)["pooled_output"]
    return self.choice(pooled, num_choices=NUM_CHOICES)


class MultipleChoiceTask(base.Task):
  """Softmax over the choices' scores, cross-entropy on the gold choice."""

  model_class = MultipleChoiceModel
  loss_epsilons = {"choice": 0.0}

  def loss_weights(self, features):
    return {"choice": base.real_example_weights(features)}

  def per_example_losses(self, scores, features):
    _, loss = heads.mean_cross_entropy(ops.log_softmax(scores, axis=-1), features["label_ids"])
    return {"choice": loss}

  def metrics(self, scores, features, losses, weights):
    weights = weights["choice"]
    return {"eval_accuracy": base.accuracy_sum(scores, features["label_ids"], weights),
            "eval_loss": (ops.sum(weights * losses["choice"]), ops.sum(weights))}

  def predictions(self, scores, features):
    return {"probabilities": ops.softmax(scores, axis=-1)}
