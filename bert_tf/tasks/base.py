"""The task interface: what the training loop, `keras.Model.fit`, the runners and the exports
ask of every task.

A task model (`TaskModel`: a BertModel plus heads) owns its loss, written as
weighted means; each model states only what differs:

* `create_heads`/`call`;
* `loss_weights(features)`: {term: [N] weights}, from the labels alone;
* `per_example_losses(outputs, features)`: {term: [N] losses};
* `loss_epsilons`: {term: epsilon added to the summed weights}.

The loss is sum over terms of sum(w * l) / (sum(w) + eps). `TaskModel.compute_loss`
takes it over one batch, so `model.compile(optimizer)` + `model.fit(features)`
trains on it; the `Task` hands the same terms to the training loop, which sums the
denominators over replicas and accumulated micro-batches before dividing, so the
loss is the original's for the whole global batch, however it is split.

A `Task` adds what the loop needs beyond the model: how to build it, metrics as
(sum, count) pairs whose ratios are the original metric_fn's, and per-example
predictions (test_results.tsv, answers).
"""

import contextlib

import keras
from keras import ops

from bert_tf import checkpoints, heads
from bert_tf.config import BertConfig
from bert_tf.modeling import BertModel, encoder_inputs, export_model, longest_length


def loss_numerators(losses, weights):
  """{term: sum(w * l)}."""
  return {k: ops.sum(weights[k] * losses[k]) for k in losses}


def loss_denominators(weights):
  """{term: sum(w)}."""
  return {k: ops.sum(w) for k, w in weights.items()}


class TaskModel(keras.Model):
  """BertModel (`encoder`) plus a task's heads (`heads`, in checkpoint order), and its loss.

  Features use the encoder's input names (`input_word_ids`, `input_mask`,
  `input_type_ids`) plus whatever the heads and the loss read (labels such as
  `label_ids`, `masked_lm_positions`).

  With `dynamic_length`, each batch is cut to its longest real sequence before
  the encoder runs (rounded up to a multiple of `length_bucket`, so XLA compiles
  a handful of shapes), for the tasks whose outputs read only real positions
  (`length_invariant`): their numbers equal the fixed-length ones.

  Keras-native: `get_config` (the BertConfig as a dict; Keras' `from_config`
  passes it back to the constructor), `.keras` files, and `compute_loss`, so
  `compile(optimizer=...)` + `fit` on batches of feature dicts trains on the
  task's loss.
  """

  # False for a task whose outputs also depend on padding positions (SQuAD's
  # softmax and n-best search run over all max_seq_length positions).
  length_invariant = True
  # term -> epsilon added to the summed weights before dividing (the original's
  # masked-LM loss adds 1e-5; the others are plain means).
  loss_epsilons = {}
  input_rank = 2  # [batch, length] inputs; multiple choice reads [batch, choices, length]

  def __init__(self, config, use_one_hot_embeddings=False, dtype=None, dynamic_length=False,
               length_bucket=1, **kwargs):
    super().__init__(dtype=dtype, **kwargs)
    self.dynamic_length = bool(dynamic_length) and self.length_invariant
    self.length_bucket = int(length_bucket)
    self._cut_length = None  # set by cut_to_length_of while a compiled step is traced
    self._pack_tokens = False  # set by packing_tokens while a serving signature is traced
    # Keras' own train_step would compute the cut inside XLA and compile at every batch
    # (cut_to_length_of is bert_tf's TrainStep's way out): `compile(jit_compile=True)` and
    # "auto" on a GPU fall back to graph mode. dynamic_length=False compiles fixed shapes.
    self.supports_jit = not self.dynamic_length
    self.config = BertConfig.coerce(config)
    self.encoder = BertModel(self.config, use_one_hot_embeddings=use_one_hot_embeddings,
                             dtype=dtype)
    self.heads = self.create_heads()
    for head in self.heads:
      head.build()
    self.built = True

  def get_config(self):
    return {"name": self.name, "trainable": self.trainable,
            "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
            "config": self.config.to_dict(),
            "use_one_hot_embeddings": self.encoder.use_one_hot_embeddings,
            "dynamic_length": self.dynamic_length, "length_bucket": self.length_bucket}

  def export(self, filepath, format="tf_saved_model", verbose=None, input_signature=None,
             **kwargs):
    """Keras' export (SavedModel, LiteRT, ONNX, OpenVINO) of the model, its inputs the
    encoder's three (modeling.export_model); the runners' --export_dir writes the serving
    SavedModel with raw-text signatures instead."""
    return export_model(self, filepath, format, verbose, input_signature, kwargs,
                        rank=self.input_rank)

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

  def cut_length(self, features):
    """The length `encode` cuts this batch to with dynamic_length: its longest real sequence
    rounded up to length_bucket, at least required_length (see modeling.trim_to_longest for
    why the numbers do not move). Multiple-choice masks ([B, C, S]) count every choice."""
    mask = features["input_mask"]
    return longest_length(ops.reshape(mask, (-1, ops.shape(mask)[-1])),
                          self.required_length(features), self.length_bucket)

  @contextlib.contextmanager
  def cut_to_length_of(self, carrier):
    """While a function is traced, `encode` cuts to the length of the 1-D `carrier` (made
    from cut_length outside the function) instead of computing it from the mask.

    For XLA: a length computed from the mask inside a compiled function is a compile-time
    constant, so XLA compiled the training step again for every batch; a shape is part of
    what it compiles for, so it compiles once per length."""
    self._cut_length = ops.shape(carrier)[0]
    try:
      yield
    finally:
      self._cut_length = None

  @contextlib.contextmanager
  def packing_tokens(self):
    """While a function is traced, `encode` runs the encoder on the real tokens' rows only
    (BertModel's pack_tokens), for a task whose outputs read only real positions.

    For the raw-text serving signatures: their tokenizer gives every sequence its [CLS], so
    each has a real token, and a batch of texts of unequal lengths skips the padding's
    rows. Training and the ids signatures keep the padded pass."""
    if not self.length_invariant:
      raise ValueError("%s reads padding positions; its encoder cannot skip them."
                       % type(self).__name__)
    self._pack_tokens = True
    try:
      yield
    finally:
      self._pack_tokens = False

  def encode(self, features, training):
    """The encoder's outputs for the features' three inputs (cut, with dynamic_length;
    packed, inside packing_tokens)."""
    inputs = encoder_inputs(features)
    if self.dynamic_length:
      length = self.cut_length(features) if self._cut_length is None else self._cut_length
      inputs = {name: value[:, :length] for name, value in inputs.items()}
    return self.encoder(inputs, training=training, pack_tokens=self._pack_tokens)

  # The loss: what a task model states.
  @staticmethod
  def loss_weights(features):
    """{term: [N] float32 weights}; static, as the loop sums them before the model runs."""
    raise NotImplementedError

  def per_example_losses(self, outputs, features):
    """{term: [N] float32 losses} of the model's outputs against the features' labels."""
    raise NotImplementedError

  def eval_losses(self, outputs, features):
    """The losses evaluation reports: the training loss, unless a model says otherwise."""
    return self.per_example_losses(outputs, features)

  def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
    """The task's loss over the batch `x` (features with labels; `y_pred` = self(x)).

    The labels and the weights (is_real_example, masked_lm_weights) are features,
    so `y` and `sample_weight` must be None: fit on a dataset of feature dicts.
    """
    if y is not None or sample_weight is not None:
      raise ValueError("%s reads its labels and weights from the features dict; pass the "
                       "batches as dicts only (no y or sample_weight)." % type(self).__name__)
    if y_pred is None:
      y_pred = self(x, training=training)
    weights = self.loss_weights(x)
    numerators = loss_numerators(self.per_example_losses(y_pred, x), weights)
    denominators = loss_denominators(weights)
    return sum(numerators[k] / (denominators[k] + self.loss_epsilons[k])
               for k in sorted(numerators))


def _flat(tensor, dtype="float32"):
  return ops.reshape(ops.cast(tensor, dtype), (-1,))


class Task:
  """Builds a task model and hands its loss, metrics and predictions to the training loop."""

  model_class = None

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

  def model_features(self, features):
    """The model's inputs from a batch of parsed records (the same but for SWAG's choices)."""
    return features

  # The loss is the model's.
  @property
  def loss_epsilons(self):
    return self.model_class.loss_epsilons

  def loss_weights(self, features):
    return self.model_class.loss_weights(features)

  # What a task states besides.
  def metrics(self, outputs, features, losses, weights):
    """{name: (sum, count)}; the default is one `<term>_loss` per loss term."""
    return {"%s_loss" % k: (ops.sum(weights[k] * losses[k]), ops.sum(weights[k]))
            for k in losses}

  def predictions(self, outputs, features):
    raise NotImplementedError

  # What the loop calls.
  def loss_denominators(self, features):
    return loss_denominators(self.loss_weights(features))

  def loss_numerators(self, model, features, training):
    outputs = model(self.model_features(features), training=training)
    return loss_numerators(model.per_example_losses(outputs, features),
                           self.loss_weights(features))

  def eval_batch(self, model, features):
    """From one forward pass: metric (sum, count) pairs, loss numerators, predictions."""
    outputs = model(self.model_features(features), training=False)
    losses = model.eval_losses(outputs, features)
    weights = self.loss_weights(features)
    return (self.metrics(outputs, features, losses, weights), loss_numerators(losses, weights),
            self.predictions(outputs, features))

  def predict_batch(self, model, features):
    return self.predictions(model(self.model_features(features), training=False), features)


def real_example_weights(features):
  """1.0 for real examples, 0.0 for the TPU padding examples (is_real_example)."""
  return _flat(features["is_real_example"])


def real_example_loss(term):
  """A task model's `loss_weights` for one loss term averaged over the real examples."""
  return staticmethod(lambda features: {term: real_example_weights(features)})


def batch_weights(features, name="input_word_ids"):
  """1.0 per example: a plain mean over the batch."""
  return ops.ones((ops.shape(features[name])[0],), "float32")


def softmax_cross_entropy(logits, labels):
  """[N] cross-entropy of softmax(logits) against integer labels (the original's one-hot
  product, so an out-of-range label contributes 0)."""
  _, per_example_loss = heads.mean_cross_entropy(ops.log_softmax(logits, axis=-1), labels)
  return per_example_loss


def accuracy_sum(logits, labels, weights):
  """(sum of weights of correct argmax predictions, sum of weights)."""
  predictions = ops.cast(ops.argmax(logits, axis=-1), "int32")
  correct = ops.cast(predictions == _flat(labels, "int32"), "float32")
  return ops.sum(weights * correct), ops.sum(weights)
