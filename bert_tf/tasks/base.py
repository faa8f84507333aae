"""The task interface: what the training loop, the runners and the exports ask of every task.

A task is a model (`TaskModel`: a BertModel plus heads) and a loss written as
weighted means. Each task states only what differs:

* `model_class` and its `create_heads`/`call`;
* `loss_weights(features)`: {term: [N] weights}, from the labels alone;
* `per_example_losses(outputs, features)`: {term: [N] losses};
* `metrics(...)`: (sum, count) pairs whose ratios are the original metric_fn's;
* `predictions(outputs, features)`: per-example outputs (test_results.tsv, answers).

The base class turns these into what the loop needs. The loss is
sum over terms of sum(w * l) / (sum(w) + eps); the loop sums the denominators
over replicas and accumulated micro-batches before dividing, so the loss is the
original's for the whole global batch, however it is split.
"""

import keras
from keras import ops

from bert_tf import checkpoints
from bert_tf.config import BertConfig
from bert_tf.modeling import BertModel, encoder_inputs, trim_to_longest


class TaskModel(keras.Model):
  """BertModel (`encoder`) plus a task's heads (`heads`, in checkpoint order).

  Features use the encoder's input names (`input_word_ids`, `input_mask`,
  `input_type_ids`) plus whatever the heads read (e.g. `masked_lm_positions`).

  With `dynamic_length`, each batch is cut to its longest real sequence before
  the encoder runs (rounded up to a multiple of `length_bucket`, so XLA compiles
  a handful of shapes), for the tasks whose outputs read only real positions
  (`length_invariant`): their numbers equal the fixed-length ones.
  """

  # False for a task whose outputs also depend on padding positions (SQuAD's
  # softmax and n-best search run over all max_seq_length positions).
  length_invariant = True

  def __init__(self, config, use_one_hot_embeddings=False, dtype=None, dynamic_length=False,
               length_bucket=1, **kwargs):
    super().__init__(dtype=dtype, **kwargs)
    self.dynamic_length = bool(dynamic_length) and self.length_invariant
    self.length_bucket = int(length_bucket)
    self.config = BertConfig.coerce(config)
    self.encoder = BertModel(self.config, use_one_hot_embeddings=use_one_hot_embeddings,
                             dtype=dtype)
    self.heads = self.create_heads()
    for head in self.heads:
      head.build()
    self.built = True

  def create_heads(self):
    """Creates the heads as attributes and returns them as a list."""
    raise NotImplementedError

  def checkpoint_groups(self):
    """[(part, {Google name: variable})] of what goes into Google-layout checkpoints:
    the encoder, then each head (a head may be absent from a checkpoint)."""
    return checkpoints.variable_groups(self.encoder, self.heads)

  def required_length(self, features):
    """Positions the heads read beyond the real tokens (None: only real ones)."""
    return None

  def encode(self, features, training):
    """The encoder's outputs for the features' three inputs (cut, with dynamic_length)."""
    inputs = encoder_inputs(features)
    if self.dynamic_length:
      inputs = trim_to_longest(inputs, self.required_length(features), self.length_bucket)
    return self.encoder(inputs, training=training)


def _flat(tensor, dtype="float32"):
  return ops.reshape(ops.cast(tensor, dtype), (-1,))


class Task:
  """Shared model construction and loss/metric plumbing; subclasses state what differs."""

  model_class = None
  # term -> epsilon added to the summed weights before dividing (the original's
  # masked-LM loss adds 1e-5; the others are plain means).
  loss_epsilons = {}

  def __init__(self, config, use_one_hot_embeddings=False, dtype=None, dynamic_length=False,
               length_bucket=1):
    self.config = BertConfig.coerce(config)
    self.use_one_hot_embeddings = use_one_hot_embeddings
    self.dtype = dtype
    self.dynamic_length = dynamic_length
    self.length_bucket = length_bucket

  def model_args(self):
    """Extra constructor arguments of `model_class` (e.g. num_labels)."""
    return {}

  def create_model(self):
    return self.model_class(self.config, self.use_one_hot_embeddings, dtype=self.dtype,
                            dynamic_length=self.dynamic_length,
                            length_bucket=self.length_bucket, **self.model_args())

  # What a task states.
  def loss_weights(self, features):
    raise NotImplementedError

  def per_example_losses(self, outputs, features):
    raise NotImplementedError

  def metrics(self, outputs, features, losses, weights):
    """{name: (sum, count)}; the default is one `<term>_loss` per loss term."""
    return {"%s_loss" % k: (ops.sum(weights[k] * losses[k]), ops.sum(weights[k]))
            for k in losses}

  def predictions(self, outputs, features):
    raise NotImplementedError

  # What the loop calls.
  def loss_denominators(self, features):
    return {k: ops.sum(w) for k, w in self.loss_weights(features).items()}

  def _numerators(self, losses, weights):
    return {k: ops.sum(weights[k] * losses[k]) for k in losses}

  def loss_numerators(self, model, features, training):
    losses = self.per_example_losses(model(features, training=training), features)
    return self._numerators(losses, self.loss_weights(features))

  def eval_batch(self, model, features):
    """From one forward pass: metric (sum, count) pairs, loss numerators, predictions."""
    outputs = model(features, training=False)
    losses = self.per_example_losses(outputs, features)
    weights = self.loss_weights(features)
    return (self.metrics(outputs, features, losses, weights), self._numerators(losses, weights),
            self.predictions(outputs, features))

  def predict_batch(self, model, features):
    return self.predictions(model(features, training=False), features)


def real_example_weights(features):
  """1.0 for real examples, 0.0 for the TPU padding examples (is_real_example)."""
  return _flat(features["is_real_example"])


def batch_weights(features, name="input_word_ids"):
  """1.0 per example: a plain mean over the batch."""
  return ops.ones((ops.shape(features[name])[0],), "float32")


def accuracy_sum(logits, labels, weights):
  """(sum of weights of correct argmax predictions, sum of weights)."""
  predictions = ops.cast(ops.argmax(logits, axis=-1), "int32")
  correct = ops.cast(predictions == _flat(labels, "int32"), "float32")
  return ops.sum(weights * correct), ops.sum(weights)
