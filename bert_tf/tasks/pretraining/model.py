"""Pretraining: masked LM + next sentence prediction, as run_pretraining.py's model_fn.

The records are create_pretraining_data's (`input_pipeline.pretraining_features`).
"""

from keras import ops

from bert_tf import heads, layers
from bert_tf.tasks import base


@layers.serializable
class PretrainingModel(base.TaskModel):
  """BertModel with the masked-LM (tied to the word embeddings) and next-sentence heads.

  The loss is the masked-LM loss sum(w*l)/(sum(w)+1e-5) plus the mean
  next-sentence loss.
  """

  loss_epsilons = {"masked_lm": 1e-5, "next_sentence": 0.0}

  def create_heads(self):
    policy = self.dtype_policy
    self.masked_lm = heads.MaskedLMHead(self.config, self.encoder.get_embedding_table(),
                                        name="masked_lm", dtype=policy)
    self.next_sentence = heads.NextSentenceHead(self.config, name="next_sentence", dtype=policy)
    return [self.masked_lm, self.next_sentence]

  def required_length(self, features):
    """Every masked position must survive the cut (padding entries point at 0)."""
    return ops.max(ops.cast(features["masked_lm_positions"], "int32")) + 1

  def call(self, features, training=False):
    outputs = self.encode(features, training)
    return {
        "masked_lm_log_probs": self.masked_lm(outputs["sequence_output"],
                                              features["masked_lm_positions"]),
        "next_sentence_log_probs": self.next_sentence(outputs["pooled_output"]),
    }

  @staticmethod
  def loss_weights(features):
    return {"masked_lm": ops.reshape(ops.cast(features["masked_lm_weights"], "float32"), (-1,)),
            "next_sentence": base.batch_weights(features, "next_sentence_labels")}

  def per_example_losses(self, outputs, features):
    _, mlm_loss = heads.masked_lm_loss(outputs["masked_lm_log_probs"],
                                       features["masked_lm_ids"], features["masked_lm_weights"])
    _, nsp_loss = heads.mean_cross_entropy(outputs["next_sentence_log_probs"],
                                           features["next_sentence_labels"])
    return {"masked_lm": mlm_loss, "next_sentence": nsp_loss}


class PretrainingTask(base.Task):
  """run_pretraining's task: its model, the metric_fn's four metrics, the predicted words."""

  model_class = PretrainingModel

  def metrics(self, outputs, features, losses, weights):
    """The original metric_fn's four streaming metrics as (sum, count) pairs."""
    sums = super().metrics(outputs, features, losses, weights)
    sums["masked_lm_accuracy"] = base.accuracy_sum(
        outputs["masked_lm_log_probs"], features["masked_lm_ids"], weights["masked_lm"])
    sums["next_sentence_accuracy"] = base.accuracy_sum(
        outputs["next_sentence_log_probs"], features["next_sentence_labels"],
        weights["next_sentence"])
    return sums

  def predictions(self, outputs, features):
    """Most likely word per masked position [B, P] and next-sentence probabilities [B, 2]."""
    positions = ops.shape(features["masked_lm_positions"])
    words = ops.argmax(outputs["masked_lm_log_probs"], axis=-1)
    return {"masked_lm_predictions": ops.reshape(ops.cast(words, "int32"), positions),
            "next_sentence_probabilities": ops.exp(outputs["next_sentence_log_probs"])}
