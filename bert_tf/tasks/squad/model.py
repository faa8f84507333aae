"""The run_squad model (Keras-serializable, with its loss) and the SQuAD task."""

from keras import ops

from bert_tf import heads, layers
from bert_tf.tasks import base


@layers.serializable
class SquadModel(base.TaskModel):
  """BertModel plus run_squad's span head.

  The loss is run_squad's model_fn: (start loss + end loss) / 2, each a mean
  cross-entropy over the batch. Always full length: the original's loss is a
  softmax over all max_seq_length positions and write_predictions ranks padding
  positions in its n-best lists too, so cutting the padding could move both.
  """

  length_invariant = False
  loss_epsilons = {"span": 0.0}

  def create_heads(self):
    self.span = heads.SpanHead(self.config, name="squad", dtype=self.dtype_policy)
    return [self.span]

  def call(self, features, training=False):
    """-> {"start_logits", "end_logits"}: [B, S] float32 each."""
    start, end = self.span(self.encode(features, training)["sequence_output"])
    return {"start_logits": start, "end_logits": end}

  @staticmethod
  def loss_weights(features):
    return {"span": base.batch_weights(features)}

  def per_example_losses(self, outputs, features):
    start_loss = base.softmax_cross_entropy(outputs["start_logits"], features["start_positions"])
    end_loss = base.softmax_cross_entropy(outputs["end_logits"], features["end_positions"])
    return {"span": (start_loss + end_loss) / 2.0}


class SquadTask(base.Task):
  """run_squad's task: its model and the per-window logits write_predictions reads."""

  model_class = SquadModel

  def predictions(self, outputs, features):
    return {"unique_ids": ops.reshape(features["unique_ids"], (-1,)),
            "start_logits": outputs["start_logits"], "end_logits": outputs["end_logits"]}
