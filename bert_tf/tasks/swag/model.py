"""The multiple-choice model (Keras-serializable, with its loss) and the SWAG task."""

from keras import ops

from bert_tf import heads, layers
from bert_tf.modeling import encoder_inputs
from bert_tf.tasks import base
from bert_tf.tasks.swag.features import to_choices


@layers.serializable
class MultipleChoiceModel(base.TaskModel):
  """BertModel run on every choice, scored by the MultipleChoiceHead (paper section 4.4).

  Takes the encoder inputs as [batch, choices, seq]; the pooled [CLS] output of
  each choice is scored by one vector. The loss is the cross-entropy of the softmax
  over the choices' scores on the gold choice (label_ids), averaged over the real
  examples.
  """

  loss_epsilons = {"choice": 0.0}
  input_rank = 3  # [batch, choices, length]

  def create_heads(self):
    self.choice = heads.MultipleChoiceHead(self.config, name="swag", dtype=self.dtype_policy)
    return [self.choice]

  def call(self, features, training=False):
    """features: [B, C, S] encoder inputs -> [B, C] float32 scores."""
    inputs = encoder_inputs(features)
    shape = inputs["input_word_ids"].shape
    if len(shape) != 3:
      raise ValueError("MultipleChoiceModel takes inputs shaped [batch, choices, seq], got %s; "
                       "records hold [batch, choices * seq]: convert them with "
                       "bert_tf.tasks.swag.to_choices." % (tuple(shape),))
    num_choices = shape[1] if shape[1] is not None else ops.shape(inputs["input_word_ids"])[1]
    flat = {k: ops.reshape(v, (-1, ops.shape(v)[-1])) for k, v in inputs.items()}
    pooled = self.encode(flat, training)["pooled_output"]
    return self.choice(pooled, num_choices=num_choices)

  loss_weights = base.real_example_loss("choice")

  def per_example_losses(self, scores, features):
    return {"choice": base.softmax_cross_entropy(scores, features["label_ids"])}


class MultipleChoiceTask(base.Task):
  """run_swag's task: its model on the records' choices, accuracy, choice probabilities."""

  model_class = MultipleChoiceModel

  def model_features(self, features):
    return to_choices(features)

  def metrics(self, scores, features, losses, weights):
    weights = weights["choice"]
    return {"eval_accuracy": base.accuracy_sum(scores, features["label_ids"], weights),
            "eval_loss": (ops.sum(weights * losses["choice"]), ops.sum(weights))}

  def predictions(self, scores, features):
    return {"probabilities": ops.softmax(scores, axis=-1)}
