"""The run_classifier model (Keras-serializable, with its loss) and the classification task."""

from keras import ops

from bert_tf import heads, layers
from bert_tf.tasks import base


@layers.serializable
class ClassifierModel(base.TaskModel):
  """BertModel plus run_classifier's head (logits from the pooled output).

  The loss is cross-entropy (or, with `regression` and one output, the squared
  error), averaged over the real examples (is_real_example).
  """

  loss_epsilons = {"classification": 0.0}

  def __init__(self, config, use_one_hot_embeddings=False, dtype=None, num_labels=2,
               regression=False, **kwargs):
    if regression and num_labels != 1:
      raise ValueError("A regression ClassifierModel has one output, got num_labels=%d."
                       % num_labels)
    self._num_labels = num_labels
    self.regression = bool(regression)
    super().__init__(config, use_one_hot_embeddings, dtype=dtype, **kwargs)

  def get_config(self):
    return {**super().get_config(), "num_labels": self._num_labels,
            "regression": self.regression}

  def create_heads(self):
    self.classifier = heads.ClassificationHead(self.config, self._num_labels, name="classifier",
                                               dtype=self.dtype_policy)
    return [self.classifier]

  def call(self, features, training=False):
    """-> [B, num_labels] float32 logits."""
    pooled = self.encode(features, training)["pooled_output"]
    return self.classifier(pooled, training=training)

  loss_weights = base.real_example_loss("classification")

  def per_example_losses(self, logits, features):
    if self.regression:
      labels = ops.reshape(ops.cast(features["label_ids"], "float32"), (-1,))
      loss = ops.square(ops.reshape(logits, (-1,)) - labels)
    else:
      loss = base.softmax_cross_entropy(logits, features["label_ids"])
    return {"classification": loss}


class ClassificationTask(base.Task):
  """run_classifier's task: its model, eval metrics and test predictions."""

  model_class = ClassifierModel

  def __init__(self, config, num_labels, regression=False, **options):
    super().__init__(config, **options)
    self.num_labels = 1 if regression else num_labels
    self.regression = regression

  def model_args(self):
    return {"num_labels": self.num_labels, "regression": self.regression}

  def metrics(self, logits, features, losses, weights):
    """eval_loss and eval_accuracy, weighted by is_real_example as the original metric_fn."""
    weights = weights["classification"]
    sums = {"eval_loss": (ops.sum(weights * losses["classification"]), ops.sum(weights))}
    if not self.regression:
      sums["eval_accuracy"] = base.accuracy_sum(logits, features["label_ids"], weights)
    return sums

  def predictions(self, logits, features):
    """Per-example outputs for test_results.tsv and the GLUE metrics (the logits too, which
    --long_document=windows pools over an example's windows)."""
    if self.regression:
      return {"predictions": ops.reshape(logits, (-1,))}
    return {"probabilities": ops.softmax(logits, axis=-1), "logits": logits}
