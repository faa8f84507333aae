"""Pretraining: masked LM + next sentence prediction, as run_pretraining.py's model_fn, and
the paper's Table 5 ablations of the pre-training tasks.

The records are create_pretraining_data's (`input_pipeline.pretraining_features`).
Objectives (`OBJECTIVES`, run_pretraining's --pretraining_objective):
  mlm_nsp  the original: masked LM + next sentence prediction (PretrainingModel)
  mlm      "No NSP": the masked LM alone (MaskedLMModel)
  ltr      "LTR & No NSP": a left-to-right LM on a causal encoder, each position
           predicting the next token, no NSP (LeftToRightLMModel). It reads the same
           records with the masked tokens put back (masked_lm_ids at masked_lm_positions),
           and predicts with the masked-LM head's layers (transform, tied embeddings).
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


@layers.serializable
class MaskedLMModel(base.TaskModel):
  """Table 5's "No NSP": BertModel with the masked-LM head alone; the loss is its term."""

  loss_epsilons = {"masked_lm": 1e-5}

  def create_heads(self):
    self.masked_lm = heads.MaskedLMHead(self.config, self.encoder.get_embedding_table(),
                                        name="masked_lm", dtype=self.dtype_policy)
    return [self.masked_lm]

  required_length = PretrainingModel.required_length

  def call(self, features, training=False):
    outputs = self.encode(features, training)
    return {"masked_lm_log_probs": self.masked_lm(outputs["sequence_output"],
                                                  features["masked_lm_positions"])}

  @staticmethod
  def loss_weights(features):
    return {"masked_lm": ops.reshape(ops.cast(features["masked_lm_weights"], "float32"), (-1,))}

  def per_example_losses(self, outputs, features):
    _, loss = heads.masked_lm_loss(outputs["masked_lm_log_probs"], features["masked_lm_ids"],
                                   features["masked_lm_weights"])
    return {"masked_lm": loss}


def unmasked_ids(features):
  """[B, S] input ids with the masked positions' original tokens put back."""
  ids = ops.cast(features["input_word_ids"], "int32")
  positions = ops.cast(features["masked_lm_positions"], "int32")
  weights = ops.cast(features["masked_lm_weights"] > 0, "int32")
  hits = ops.one_hot(positions, ops.shape(ids)[1], dtype="int32") * weights[:, :, None]
  originals = ops.cast(features["masked_lm_ids"], "int32")[:, :, None]
  restored = ops.sum(hits * originals, axis=1)
  return ops.where(ops.sum(hits, axis=1) > 0, restored, ids)


def next_token_targets(features):
  """([B, S-1] next token at each position, [B, S-1] 1.0 where that token is real)."""
  return (unmasked_ids(features)[:, 1:],
          ops.cast(features["input_mask"], "float32")[:, 1:])


@layers.serializable
class LeftToRightLMModel(base.TaskModel):
  """Table 5's "LTR & No NSP": a causal encoder; position t predicts token t + 1.

  The config must have causal_attention (run_pretraining writes it into the
  bert_config.json it saves, so fine-tuning keeps the left-to-right mask, as the
  paper's LTR model did).
  """

  loss_epsilons = {"lm": 1e-5}

  def create_heads(self):
    if not self.config.causal_attention:
      raise ValueError("The left-to-right objective needs a causal encoder: set "
                       "causal_attention in the BERT config.")
    self.masked_lm = heads.MaskedLMHead(self.config, self.encoder.get_embedding_table(),
                                        name="masked_lm", dtype=self.dtype_policy)
    return [self.masked_lm]

  def call(self, features, training=False):
    inputs = dict(features, input_word_ids=unmasked_ids(features))
    hidden = self.encode(inputs, training)["sequence_output"]  # [B, S', H], S' <= S
    seq = ops.shape(features["input_word_ids"])[1]
    # Every position but the last predicts its successor; a cut batch pads back with zeros
    # (those positions have weight 0: their successor is padding).
    hidden = ops.pad(hidden, [[0, 0], [0, seq - ops.shape(hidden)[1]], [0, 0]])
    positions = ops.broadcast_to(ops.arange(seq - 1, dtype="int32")[None],
                                 (ops.shape(hidden)[0], seq - 1))
    return {"lm_log_probs": self.masked_lm(hidden, positions)}

  @staticmethod
  def loss_weights(features):
    return {"lm": ops.reshape(next_token_targets(features)[1], (-1,))}

  def per_example_losses(self, outputs, features):
    targets, weights = next_token_targets(features)
    _, loss = heads.masked_lm_loss(outputs["lm_log_probs"], targets, weights)
    return {"lm": loss}


OBJECTIVES = {"mlm_nsp": PretrainingModel, "mlm": MaskedLMModel, "ltr": LeftToRightLMModel}


class PretrainingTask(base.Task):
  """run_pretraining's task: its model, the metric_fn's metrics, the predicted words."""

  def __init__(self, config, objective="mlm_nsp", **options):
    super().__init__(config, **options)
    if objective not in OBJECTIVES:
      raise ValueError("Unknown pretraining objective %r (known: %s)." %
                       (objective, ", ".join(OBJECTIVES)))
    self.objective = objective
    self.model_class = OBJECTIVES[objective]

  def metrics(self, outputs, features, losses, weights):
    """The original metric_fn's streaming metrics (those of the objective's terms)."""
    sums = super().metrics(outputs, features, losses, weights)
    if "masked_lm" in weights:
      sums["masked_lm_accuracy"] = base.accuracy_sum(
          outputs["masked_lm_log_probs"], features["masked_lm_ids"], weights["masked_lm"])
    if "next_sentence" in weights:
      sums["next_sentence_accuracy"] = base.accuracy_sum(
          outputs["next_sentence_log_probs"], features["next_sentence_labels"],
          weights["next_sentence"])
    if "lm" in weights:
      sums["lm_accuracy"] = base.accuracy_sum(
          outputs["lm_log_probs"], next_token_targets(features)[0], weights["lm"])
    return sums

  def predictions(self, outputs, features):
    """Most likely word per masked position [B, P] (LTR: per next position [B, S-1]) and
    next-sentence probabilities [B, 2]."""
    if "lm_log_probs" in outputs:
      words = ops.argmax(outputs["lm_log_probs"], axis=-1)
      return {"lm_predictions": ops.reshape(ops.cast(words, "int32"),
                                            ops.shape(next_token_targets(features)[0]))}
    positions = ops.shape(features["masked_lm_positions"])
    words = ops.argmax(outputs["masked_lm_log_probs"], axis=-1)
    out = {"masked_lm_predictions": ops.reshape(ops.cast(words, "int32"), positions)}
    if "next_sentence_log_probs" in outputs:
      out["next_sentence_probabilities"] = ops.exp(outputs["next_sentence_log_probs"])
    return out
