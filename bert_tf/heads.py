"""Task heads on top of BertModel, and their losses exactly as the original computes them.

Each head creates the same variables (shapes, initializers) as the original code,
and declares its `checkpoint_kind`, whose row in bert_tf/checkpoints/names.py gives their
Google and Hugging Face names:

  kind        head                 Google names
  mlm         MaskedLMHead         cls/predictions/{transform/dense, transform/LayerNorm,
                                                    output_bias}
  nsp         NextSentenceHead     cls/seq_relationship/{output_weights, output_bias}
  classifier  ClassificationHead   output_weights, output_bias              (run_classifier.py)
  squad       SpanHead             cls/squad/{output_weights, output_bias}  (run_squad.py)
  swag        MultipleChoiceHead   cls/swag/output_weights [1, H]           (run_swag.py; not in
              the original code, which shipped no SWAG runner: the paper's one vector)
  ner         TokenClassificationHead  cls/ner/{output_weights, output_bias}  (run_ner.py; not in
              the original code either: section 5.3's token classifier)

Every head is Keras-serializable (`get_config` holds the BertConfig as a dict);
the masked-LM head's tied embedding table is not part of its config: whoever
builds it passes the encoder's table (PretrainingModel does).
Log-probabilities and losses are float32 under every dtype policy. Losses use the
original's one-hot products, so an out-of-range label contributes 0 as it did there.
"""

import keras
from keras import ops

from bert_tf import layers
from bert_tf.checkpoints import names
from bert_tf.config import BertConfig


class Head(layers.ConfiguredLayer):
  """A head whose weights go into checkpoints under the names of its `checkpoint_kind`."""

  checkpoint_kind = None

  def checkpoint_variables(self):
    """Google name -> variable (bert_tf/checkpoints/names.py's rows for this kind)."""
    return names.variables_of(self, names.head_names(self.checkpoint_kind))


@layers.serializable
class MaskedLMHead(Head):
  """transform (dense + act + LayerNorm), then logits against the tied word embeddings."""

  checkpoint_kind = "mlm"

  def __init__(self, config, embedding_table=None, **kwargs):
    super().__init__(config, **kwargs)
    config = self.config
    self.embedding_table = embedding_table
    self.transform = layers.dense(config.hidden_size, config, "transform_dense",
                                  activation=layers.get_activation(config.hidden_act),
                                  dtype=self.dtype_policy)
    self.layer_norm = layers.layer_norm("transform_layer_norm")

  def build(self, input_shape=None):
    self.transform.build((None, self.config.hidden_size))
    self.layer_norm.build((None, self.config.hidden_size))
    # A float32 variable, not autocast: the bias is added to float32 logits under every
    # policy (read in bfloat16 by an eager mixed-precision call, it would fail to add; a
    # bfloat16 inference copy would otherwise round it).
    self.output_bias = self.add_weight(name="output_bias", shape=(self.config.vocab_size,),
                                       initializer="zeros", dtype="float32", autocast=False)
    self.built = True

  def logits(self, sequence_output, positions):
    """[B, S, H] states, [B, P] positions -> [B*P, vocab] logits (float32)."""
    if self.embedding_table is None:
      raise ValueError("MaskedLMHead %s has no embedding table: pass the encoder's "
                       "get_embedding_table() when creating it." % self.name)
    gathered = ops.take_along_axis(sequence_output, ops.cast(positions, "int32")[:, :, None],
                                   axis=1)
    gathered = ops.reshape(gathered, (-1, self.config.hidden_size))
    hidden = self.layer_norm(self.transform(gathered))
    hidden = ops.cast(hidden, self.compute_dtype)
    table = ops.cast(self.embedding_table, self.compute_dtype)
    logits = ops.matmul(hidden, ops.transpose(table))
    return ops.cast(logits, "float32") + self.output_bias

  def call(self, sequence_output, positions):
    """[B, S, H] states, [B, P] positions -> [B*P, vocab] log-probs (float32)."""
    return ops.log_softmax(self.logits(sequence_output, positions), axis=-1)


class _PooledLogits(Head):
  """logits = x @ output_weights^T + output_bias, with weights stored [num_labels, H]."""

  def __init__(self, config, num_labels, stddev, **kwargs):
    super().__init__(config, **kwargs)
    self.num_labels = num_labels
    self.stddev = stddev

  def build(self, input_shape=None):
    self.output_weights = self.add_weight(
        name="output_weights", shape=(self.num_labels, self.config.hidden_size),
        initializer=keras.initializers.TruncatedNormal(stddev=self.stddev))
    self.output_bias = self.add_weight(name="output_bias", shape=(self.num_labels,),
                                       initializer="zeros", dtype="float32",
                                       autocast=False)  # as MaskedLMHead's
    self.built = True

  def logits(self, x):
    weights = ops.cast(self.output_weights, self.compute_dtype)
    logits = ops.matmul(ops.cast(x, self.compute_dtype), ops.transpose(weights))
    return ops.cast(logits, "float32") + self.output_bias


@layers.serializable
class NextSentenceHead(_PooledLogits):
  """Is-next / not-next classifier on the pooled output (label 0 = is next)."""

  checkpoint_kind = "nsp"

  def __init__(self, config, **kwargs):
    config = BertConfig.coerce(config)
    super().__init__(config, 2, config.initializer_range, **kwargs)

  def call(self, pooled_output):
    """[B, H] -> [B, 2] log-probs."""
    return ops.log_softmax(self.logits(pooled_output), axis=-1)


class _DropoutLogits(_PooledLogits):
  """Dropout on the hidden states, then the logits of `num_labels` labels (stddev 0.02)."""

  def __init__(self, config, num_labels, dropout_rate, **kwargs):
    super().__init__(config, num_labels, 0.02, **kwargs)
    self.dropout_rate = dropout_rate
    self.dropout = layers.Dropout(dropout_rate, dtype=self.dtype_policy)

  def get_config(self):
    return {**super().get_config(), "num_labels": self.num_labels,
            "dropout_rate": self.dropout_rate}

  def call(self, hidden, training=False):
    """[..., H] -> [..., num_labels] logits."""
    return self.logits(self.dropout(hidden, training=training))


@layers.serializable
class ClassificationHead(_DropoutLogits):
  """run_classifier's head: dropout on the pooled output [B, H], then a linear layer.

  Quirk kept from the original: the dropout rate is 0.1 in training whatever the
  config's hidden_dropout_prob says, and the weights use stddev 0.02 whatever its
  initializer_range says.
  """

  checkpoint_kind = "classifier"

  def __init__(self, config, num_labels, dropout_rate=0.1, **kwargs):
    super().__init__(config, num_labels, dropout_rate, **kwargs)


@layers.serializable
class SpanHead(_PooledLogits):
  """run_squad's head: per-token start and end logits from the sequence output."""

  checkpoint_kind = "squad"

  def __init__(self, config, **kwargs):
    super().__init__(config, 2, 0.02, **kwargs)

  def call(self, sequence_output):
    """[B, S, H] -> ([B, S] start logits, [B, S] end logits)."""
    logits = self.logits(sequence_output)  # [B, S, 2]
    return logits[:, :, 0], logits[:, :, 1]


@layers.serializable
class TokenClassificationHead(_DropoutLogits):
  """run_ner's head (paper section 5.3): dropout on each position's final hidden state
  [B, S, H] (the config's hidden_dropout_prob), then per-label logits. The paper feeds only
  each word's first sub-token to it; which positions count is the task's (its loss and
  predictions), not the head's."""

  checkpoint_kind = "ner"

  def __init__(self, config, num_labels, dropout_rate=None, **kwargs):
    config = BertConfig.coerce(config)
    super().__init__(config, num_labels,
                     config.hidden_dropout_prob if dropout_rate is None else dropout_rate,
                     **kwargs)


@layers.serializable
class MultipleChoiceHead(Head):
  """Paper section 4.4: one vector V; a choice's score is V . C (C its pooled [CLS] output).

  No bias: the paper introduces only this vector (a shared bias would cancel in
  the softmax over choices anyway).
  """

  checkpoint_kind = "swag"

  def build(self, input_shape=None):
    self.output_weights = self.add_weight(
        name="output_weights", shape=(1, self.config.hidden_size),
        initializer=keras.initializers.TruncatedNormal(stddev=0.02))
    self.built = True

  def call(self, pooled_output, num_choices):
    """[B * num_choices, H] -> [B, num_choices] scores."""
    weights = ops.cast(self.output_weights, self.compute_dtype)
    scores = ops.matmul(ops.cast(pooled_output, self.compute_dtype), ops.transpose(weights))
    return ops.reshape(ops.cast(scores, "float32"), (-1, num_choices))


def _negative_log_likelihood(log_probs, labels):
  depth = ops.shape(log_probs)[-1]
  one_hot = ops.one_hot(ops.reshape(ops.cast(labels, "int32"), (-1,)), depth, dtype="float32")
  return -ops.sum(ops.reshape(log_probs, (-1, depth)) * one_hot, axis=-1)


def masked_lm_loss(log_probs, label_ids, label_weights):
  """Returns (loss, per_example_loss) with loss = sum(w * l) / (sum(w) + 1e-5)."""
  per_example_loss = _negative_log_likelihood(log_probs, label_ids)
  weights = ops.reshape(ops.cast(label_weights, "float32"), (-1,))
  loss = ops.sum(weights * per_example_loss) / (ops.sum(weights) + 1e-5)
  return loss, per_example_loss


def mean_cross_entropy(log_probs, labels):
  """Returns (mean loss, per_example_loss); next-sentence and classifier losses."""
  per_example_loss = _negative_log_likelihood(log_probs, labels)
  return ops.mean(per_example_loss), per_example_loss
