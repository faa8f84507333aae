"""Pretraining task: masked LM + next sentence prediction, as run_pretraining.py's model_fn.

A task tells the training loop three things:
* `create_model()`: a Keras model with `.encoder` and `.heads` (for checkpoints);
* the loss as weighted means: `loss_denominators(features)` (from the labels alone)
  and `loss_numerators(model, features, training)`, combined as
  sum(num / (den + eps)). The loop sums denominators over replicas and accumulated
  micro-batches before dividing, so the loss is the original's for the whole
  global batch, however it is split;
* `eval_batch(model, features)`: from one forward pass, (sum, count) pairs whose
  ratios are the metrics of the original metric_fn, and the loss numerators.
"""

import keras
from keras import ops

from bert_tf import heads
from bert_tf.modeling import BertModel


class PretrainingModel(keras.Model):
  """BertModel with the masked-LM and next-sentence heads."""

  def __init__(self, config, use_one_hot_embeddings=False, dtype=None, **kwargs):
    super().__init__(dtype=dtype, **kwargs)
    self.encoder = BertModel(config, use_one_hot_embeddings=use_one_hot_embeddings, dtype=dtype)
    self.masked_lm = heads.MaskedLMHead(config, self.encoder.get_embedding_table(),
                                        name="masked_lm", dtype=dtype)
    self.next_sentence = heads.NextSentenceHead(config, name="next_sentence", dtype=dtype)
    self.masked_lm.build()
    self.next_sentence.build()
    self.heads = [self.masked_lm, self.next_sentence]
    self.built = True

  def call(self, features, training=False):
    outputs = self.encoder({"input_ids": features["input_ids"],
                            "input_mask": features["input_mask"],
                            "token_type_ids": features["segment_ids"]}, training=training)
    return {
        "masked_lm_log_probs": self.masked_lm(outputs["sequence_output"],
                                              features["masked_lm_positions"]),
        "next_sentence_log_probs": self.next_sentence(outputs["pooled_output"]),
    }


class PretrainingTask:
  """Masked-LM loss sum(w*l)/(sum(w)+1e-5) plus the mean next-sentence loss."""

  loss_epsilons = {"masked_lm": 1e-5, "next_sentence": 0.0}

  def __init__(self, config, use_one_hot_embeddings=False, dtype=None):
    self.config = config
    self.use_one_hot_embeddings = use_one_hot_embeddings
    self.dtype = dtype

  def create_model(self):
    return PretrainingModel(self.config, self.use_one_hot_embeddings, dtype=self.dtype)

  def loss_denominators(self, features):
    weights = ops.cast(features["masked_lm_weights"], "float32")
    batch = ops.cast(ops.shape(features["next_sentence_labels"])[0], "float32")
    return {"masked_lm": ops.sum(weights), "next_sentence": batch}

  def _per_example(self, outputs, features):
    _, mlm_loss = heads.masked_lm_loss(outputs["masked_lm_log_probs"],
                                       features["masked_lm_ids"], features["masked_lm_weights"])
    _, nsp_loss = heads.mean_cross_entropy(outputs["next_sentence_log_probs"],
                                           features["next_sentence_labels"])
    return mlm_loss, nsp_loss

  def _numerators(self, mlm_loss, nsp_loss, weights):
    return {"masked_lm": ops.sum(weights * mlm_loss), "next_sentence": ops.sum(nsp_loss)}

  def loss_numerators(self, model, features, training):
    outputs = model(features, training=training)
    mlm_loss, nsp_loss = self._per_example(outputs, features)
    weights = ops.reshape(ops.cast(features["masked_lm_weights"], "float32"), (-1,))
    return self._numerators(mlm_loss, nsp_loss, weights)

  def eval_batch(self, model, features):
    """(sum, count) per metric as the original metric_fn's streaming metrics, and the
    loss numerators, from one forward pass."""
    outputs = model(features, training=False)
    mlm_loss, nsp_loss = self._per_example(outputs, features)
    weights = ops.reshape(ops.cast(features["masked_lm_weights"], "float32"), (-1,))
    mlm_ids = ops.reshape(ops.cast(features["masked_lm_ids"], "int32"), (-1,))
    mlm_predictions = ops.cast(ops.argmax(outputs["masked_lm_log_probs"], axis=-1), "int32")
    mlm_correct = ops.cast(mlm_predictions == mlm_ids, "float32")
    nsp_labels = ops.reshape(ops.cast(features["next_sentence_labels"], "int32"), (-1,))
    nsp_predictions = ops.cast(ops.argmax(outputs["next_sentence_log_probs"], axis=-1), "int32")
    nsp_correct = ops.cast(nsp_predictions == nsp_labels, "float32")
    count = ops.cast(ops.shape(nsp_labels)[0], "float32")
    sums = {
        "masked_lm_accuracy": (ops.sum(weights * mlm_correct), ops.sum(weights)),
        "masked_lm_loss": (ops.sum(weights * mlm_loss), ops.sum(weights)),
        "next_sentence_accuracy": (ops.sum(nsp_correct), count),
        "next_sentence_loss": (ops.sum(nsp_loss), count),
    }
    return sums, self._numerators(mlm_loss, nsp_loss, weights)
