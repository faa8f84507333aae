"""The fine-tuning approach of section 5.3: BERT with a token-classification head, end to end.

The loss is the cross-entropy of each word's first piece (label_weights 1.0),
averaged over those pieces in the (global) batch.
"""

from keras import ops

from bert_tf import heads, layers
from bert_tf.tasks import base


@layers.serializable
class TokenClassifierModel(base.TaskModel):
  """BertModel plus run_ner's TokenClassificationHead: [B, S] features -> [B, S, labels] logits."""

  loss_epsilons = {"ner": 1e-5}

  def __init__(self, config, use_one_hot_embeddings=False, dtype=None, num_labels=9, **kwargs):
    self.num_labels = int(num_labels)
    super().__init__(config, use_one_hot_embeddings, dtype=dtype, **kwargs)

  def get_config(self):
    return {**super().get_config(), "num_labels": self.num_labels}

  def create_heads(self):
    self.ner = heads.TokenClassificationHead(self.config, self.num_labels, name="ner",
                                             dtype=self.dtype_policy)
    return [self.ner]

  def call(self, features, training=False):
    sequence = self.encode(features, training)["sequence_output"]  # [B, S', H], S' <= S
    logits = self.ner(sequence, training=training)
    # A cut batch pads back to the features' length (those positions carry no label).
    missing = ops.shape(features["input_word_ids"])[1] - ops.shape(logits)[1]
    return ops.pad(logits, [[0, 0], [0, missing], [0, 0]])

  @staticmethod
  def loss_weights(features):
    return {"ner": ops.reshape(ops.cast(features["label_weights"], "float32"), (-1,))}

  def per_example_losses(self, logits, features):
    flat = ops.reshape(logits, (-1, self.num_labels))
    return {"ner": base.softmax_cross_entropy(flat, features["label_ids"])}


class NerTask(base.Task):
  """run_ner's fine-tuning task: token accuracy and loss over first pieces; probabilities."""

  model_class = TokenClassifierModel

  def __init__(self, config, num_labels, **options):
    super().__init__(config, **options)
    self.num_labels = num_labels

  def model_args(self):
    return {"num_labels": self.num_labels}

  def metrics(self, logits, features, losses, weights):
    weights = weights["ner"]
    flat = ops.reshape(logits, (-1, self.num_labels))
    return {"eval_loss": (ops.sum(weights * losses["ner"]), ops.sum(weights)),
            "eval_token_accuracy": base.accuracy_sum(flat, features["label_ids"], weights)}

  def predictions(self, logits, features):
    return {"probabilities": ops.softmax(logits, axis=-1)}
