"""The run_classifier model (Keras-serializable, with its loss) and the classification task."""

from keras import ops
import tensorflow as tf

from bert_tf import heads, layers
from bert_tf.tasks import base
from bert_tf.tasks.glue.windows import label_pooling

_ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


@layers.serializable
class ClassifierModel(base.TaskModel):
  """BertModel plus run_classifier's head (logits from the pooled output).

  The loss is cross-entropy (or, with `regression` and one output, the squared
  error), averaged over the real examples (is_real_example).

  With `window_pooling` (run_classifier --long_document=windows, training by document) it
  also takes documents as [batch, windows, seq]: the encoder runs on the non-empty windows
  only, and a document's logits pool its windows' as prediction pools them
  (glue/windows.py), so the loss is the document's.
  """

  loss_epsilons = {"classification": 0.0}
  multi_label = False  # True: each label's logit pools on its own (windows.label_pooling)

  def __init__(self, config, use_one_hot_embeddings=False, dtype=None, num_labels=2,
               regression=False, window_pooling=None, window_no_label=0, **kwargs):
    if regression and num_labels != 1:
      raise ValueError("A regression ClassifierModel has one output, got num_labels=%d."
                       % num_labels)
    self._num_labels = num_labels
    self.regression = bool(regression)
    self.window_pooling = window_pooling
    self.window_no_label = int(window_no_label)
    super().__init__(config, use_one_hot_embeddings, dtype=dtype, **kwargs)
    if window_pooling:
      self.supports_jit = False  # the batch's count of non-empty windows is dynamic

  def get_config(self):
    config = {**super().get_config(), "num_labels": self._num_labels,
              "regression": self.regression}
    if self.window_pooling:
      config["window_pooling"] = self.window_pooling
    if self.window_no_label:
      config["window_no_label"] = self.window_no_label
    return config

  def create_heads(self):
    self.classifier = heads.ClassificationHead(self.config, self._num_labels, name="classifier",
                                               dtype=self.dtype_policy)
    return [self.classifier]

  def call(self, features, training=False):
    """[B, S] inputs -> [B, num_labels] float32 logits; with window_pooling, [B, W, S]
    documents -> [B, num_labels] pooled logits too."""
    if len(features["input_word_ids"].shape) == 3:
      return self.call_documents(features, training)
    pooled = self.encode(features, training)["pooled_output"]
    return self.classifier(pooled, training=training)

  def call_documents(self, features, training):
    if not self.window_pooling:
      raise ValueError("A ClassifierModel takes [batch, windows, seq] documents only with "
                       "window_pooling.")
    inputs = {k: features[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    shape = tf.shape(inputs["input_mask"])
    flat = {k: tf.reshape(v, (-1, shape[2])) for k, v in inputs.items()}
    real = tf.reduce_any(flat["input_mask"] > 0, axis=-1)  # [B * W]
    kept = tf.where(real)
    logits = self.call({k: tf.gather_nd(v, kept) for k, v in flat.items()}, training)
    scattered = tf.scatter_nd(kept, logits, (shape[0] * shape[1], tf.shape(logits)[-1]))
    return pool_windows(tf.reshape(scattered, (shape[0], shape[1], -1)),
                        tf.reshape(real, shape[:2]), self.window_pooling, self.multi_label,
                        self.window_no_label)

  loss_weights = base.real_example_loss("classification")

  def per_example_losses(self, logits, features):
    if self.regression:
      labels = ops.reshape(ops.cast(features["label_ids"], "float32"), (-1,))
      loss = ops.square(ops.reshape(logits, (-1,)) - labels)
    else:
      loss = base.softmax_cross_entropy(logits, features["label_ids"])
    return {"classification": loss}


def pool_windows(logits, real, pooling, multi_label=False, no_label=0):
  """[B, W, C] window logits, [B, W] real windows -> [B, C]: their mean, their max per
  label, or (`any`) the real window least likely to be the label `no_label` (`multi_label`: the
  max of each label's logit, windows.label_pooling); a document has at least one real
  window. glue/windows.pool in graph ops."""
  pooling = label_pooling(pooling, multi_label)
  if pooling == "any":
    first = logits[..., no_label] - tf.reduce_logsumexp(logits, axis=-1)
    first = tf.where(real, first, tf.fill(tf.shape(first), float("inf")))
    return tf.gather(logits, tf.argmin(first, axis=1, output_type=tf.int32), batch_dims=1)
  if pooling == "max":
    floor = tf.fill(tf.shape(logits), float("-inf"))
    return tf.reduce_max(tf.where(real[..., None], logits, floor), axis=1)
  weights = tf.cast(real, logits.dtype)[..., None]
  return tf.reduce_sum(logits * weights, axis=1) / tf.reduce_sum(weights, axis=1)


class ClassificationTask(base.Task):
  """run_classifier's task: its model, eval metrics and test predictions."""

  model_class = ClassifierModel

  def __init__(self, config, num_labels, regression=False, windows=None, max_seq_length=None,
               **options):
    """windows: a WindowOptions training by document (its pooling and max_train_windows of
    `max_seq_length` each), else None."""
    super().__init__(config, **options)
    self.num_labels = 1 if regression else num_labels
    self.regression = regression
    self.windows = windows if windows is not None and windows.by_document else None
    self.max_seq_length = max_seq_length
    if self.windows and not max_seq_length:
      raise ValueError("Training by document needs the max_seq_length of its windows.")

  def model_args(self):
    args = {"num_labels": self.num_labels, "regression": self.regression}
    if self.windows:
      args.update(window_pooling=self.windows.pooling, window_no_label=self.windows.no_label)
    return args

  def model_features(self, features):
    """Training documents' records (windows end to end) as [batch, windows, seq]; records
    of one window (evaluation, prediction; a cap of one window) as they are."""
    windows = self.windows.max_train_windows if self.windows else 1
    if windows == 1 or features["input_word_ids"].shape[-1] != windows * self.max_seq_length:
      return features
    return {k: (tf.reshape(v, (-1, windows, self.max_seq_length)) if k in _ENCODER_INPUTS
                else v)
            for k, v in features.items()}

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
