"""The model of a run on the user's own file: run_classifier's classifier (same head, same
checkpoint names) with the loss of its problem type, and the task that trains it.

single_label: softmax cross-entropy, each example's loss times its label's class weight;
multi_label: one sigmoid per label, binary cross-entropy averaged over the labels, a label's
positive term times its weight (PyTorch's BCEWithLogitsLoss pos_weight); regression: the squared
error (STS-B's). The loss is then averaged over the real examples, as Keras' class_weight does.
With --long_document=windows trained by document, the loss (and its class weights) is on the
document's pooled logits (ClassifierModel.call_documents), a multi-label run pooling each
label's logit on its own. With `correct_class_weights`, inference (training=False) takes each
row's or window's logits back to the data's label shares (weights.logit_shift), and the eval
loss is the unweighted one of those logits.
"""

from keras import ops

from bert_tf import layers
from bert_tf.tasks import base
from bert_tf.tasks.glue.model import ClassificationTask, ClassifierModel
from bert_tf.tasks.own_data.weights import logit_shift


def weighted_softmax_cross_entropy(logits, label_ids, class_weights=None):
  """[N] cross-entropy of softmax(logits) against label ids, times the label's weight (a label
  id outside the labels, -1, contributes 0)."""
  loss = base.softmax_cross_entropy(logits, label_ids)
  if class_weights is None:
    return loss
  ids = ops.reshape(ops.cast(label_ids, "int32"), (-1,))
  weights = ops.take(ops.convert_to_tensor(class_weights, "float32"),
                     ops.clip(ids, 0, len(class_weights) - 1))
  return loss * weights


def weighted_sigmoid_cross_entropy(logits, targets, pos_weights=None):
  """[N] binary cross-entropy of sigmoid(logits) against 0/1 targets [N, labels], averaged over
  the labels, the positive term of label j times pos_weights[j]:
  -(w_j * y * log(sigmoid(x)) + (1 - y) * log(1 - sigmoid(x))), in a stable form."""
  logits = ops.cast(logits, "float32")
  targets = ops.cast(targets, "float32")
  log_weight = 1.0 if pos_weights is None else 1.0 + (
      ops.convert_to_tensor(pos_weights, "float32") - 1.0) * targets
  # -log(sigmoid(x)) = softplus(-x); -log(1 - sigmoid(x)) = x + softplus(-x).
  loss = (1.0 - targets) * logits + log_weight * ops.softplus(-logits)
  return ops.mean(loss, axis=-1)


@layers.serializable
class OwnDataModel(ClassifierModel):
  """ClassifierModel with the loss of `problem_type` and optional `class_weights` (one per
  label: single_label class weights, multi_label positive weights); `correct_class_weights`:
  inference logits shifted by weights.logit_shift."""

  def __init__(self, config, use_one_hot_embeddings=False, dtype=None, num_labels=2,
               problem_type="single_label", class_weights=None, correct_class_weights=False,
               **kwargs):
    kwargs.pop("regression", None)  # from get_config: problem_type says it
    self.problem_type = problem_type
    self.class_weights = None if class_weights is None else [float(w) for w in class_weights]
    self.correct_class_weights = bool(correct_class_weights)
    super().__init__(config, use_one_hot_embeddings, dtype=dtype, num_labels=num_labels,
                     regression=problem_type == "regression", **kwargs)

  @property
  def multi_label(self):
    return self.problem_type == "multi_label"

  @property
  def logit_shift(self):
    """What inference adds to the logits (None: nothing)."""
    return logit_shift(self.class_weights) if self.correct_class_weights else None

  def get_config(self):
    config = {**super().get_config(), "problem_type": self.problem_type,
              "class_weights": self.class_weights}
    if self.correct_class_weights:
      config["correct_class_weights"] = True
    return config

  def call(self, features, training=False):
    """ClassifierModel's logits; at inference with a logit_shift, shifted. Documents' windows
    come back through here (call_documents), so each window is shifted once, before pooling."""
    logits = super().call(features, training)
    shift = self.logit_shift
    if training or shift is None or len(features["input_word_ids"].shape) == 3:
      return logits
    return logits + ops.convert_to_tensor(shift, logits.dtype)

  def per_example_losses(self, logits, features, weighted=True):
    """The loss of each example; `weighted=False` leaves the class weights out."""
    weights = self.class_weights if weighted else None
    if self.problem_type == "multi_label":
      loss = weighted_sigmoid_cross_entropy(logits, features["label_ids"], weights)
    elif self.problem_type == "single_label":
      loss = weighted_softmax_cross_entropy(logits, features["label_ids"], weights)
    else:
      return super().per_example_losses(logits, features)
    return {"classification": loss}

  def eval_losses(self, logits, features):
    """With corrected logits, the unweighted loss: the weights were for training only."""
    return self.per_example_losses(logits, features, weighted=not self.correct_class_weights)


class OwnDataTask(ClassificationTask):
  """The task of a run on the user's file: eval_loss (and eval_accuracy for single_label),
  and each row's probabilities (sigmoid per label for multi_label) or prediction; `windows`
  and `max_seq_length` as ClassificationTask's (training by document)."""

  model_class = OwnDataModel

  def __init__(self, config, num_labels, problem_type, class_weights=None,
               correct_class_weights=False, **options):
    super().__init__(config, num_labels, problem_type == "regression", **options)
    self.problem_type = problem_type
    self.class_weights = class_weights
    self.correct_class_weights = correct_class_weights

  def model_args(self):
    args = {"num_labels": self.num_labels, "problem_type": self.problem_type,
            "class_weights": self.class_weights,
            "correct_class_weights": self.correct_class_weights}
    if self.windows:
      args.update(window_pooling=self.windows.pooling, window_no_label=self.windows.no_label)
    return args

  def metrics(self, logits, features, losses, weights):
    if self.problem_type != "multi_label":
      return super().metrics(logits, features, losses, weights)
    weights = weights["classification"]
    return {"eval_loss": (ops.sum(weights * losses["classification"]), ops.sum(weights))}

  def predictions(self, logits, features):
    if self.problem_type == "multi_label":  # the logits for --long_document=windows to pool
      logits = ops.cast(logits, "float32")
      return {"probabilities": ops.sigmoid(logits), "logits": logits}
    return super().predictions(logits, features)
