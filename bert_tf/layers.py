"""Keras layers reproducing the original `modeling.py` encoder, op for op.

Shapes in comments: B batch, S sequence length, H hidden size, N heads, D = H / N.
Every weight is created in `build` from the config alone (not from input shapes),
so a freshly constructed model already has all of Google's variables and a
checkpoint can be loaded before the first call.

Under a mixed-precision policy the matmuls run in float16/bfloat16 while
LayerNorm (its own float32 policy), the residual sums feeding it, and the
attention softmax (with its -10000 mask) run in float32, as in Google's
and Model Garden's mixed-precision BERT.
"""

import math
from typing import NamedTuple

import keras
from keras import ops
import tensorflow as tf
from tensorflow.python.eager import record

from bert_tf.config import BertConfig

_LAYER_NORM_EPSILON = 1e-12
_GELU_SQRT_2_OVER_PI = 0.7978845608028654  # tf.nn.gelu's tanh form: tanh(c * (x + a * x^3))
_GELU_CUBIC = 0.044715


# Training graphs: LayerNorm and dropout with their backward passes written out. Each forward
# builds the very ops Keras and TensorFlow build (the same numbers, the same dropout masks from
# the same seeds); only the gradient is built differently. With a dynamic sequence length,
# autodiff adds shape, broadcast-argument, sum and reshape ops to the gradient of every
# broadcasting op: about 80 graph ops for one LayerNorm's gradient, 14 for a dropout's, a
# fifth of a fine-tuning step's graph, which the first step pays in tracing, in grappler and
# in instantiating it. Written out, each gradient is a handful of ops, equal to autodiff's up
# to float32 rounding (tests/test_layer_gradients.py). Inference keeps Keras's ops. The same
# goes for the tanh GELU, the attention's two batched matmuls and the residual sums.

def _custom_gradient(fn):
  """tf.custom_gradient for the training graph's hand-differentiated ops: `fn(*tensors)` gives
  (output, backward) as there, and the gradient tape records the call as one op (it replaces
  the forward ops as the output's source; those stay recorded, so a tape around the backward
  sees how it depends on the forward's intermediates: higher derivatives stay right).
  TensorFlow's decorator also wraps outputs and inputs in an IdentityN (for tf.gradients,
  which then differentiates the forward ops), walks the graph for variables, and lets the
  tape build a zero gradient for each input's pass-through: about four graph ops per call,
  paid by the first step for the ~50 calls of a 6-layer encoder. Inputs must be tensors read
  outside (a variable's read is recorded where the tape sees it)."""

  def call(*inputs):
    output, backward = fn(*inputs)

    def gradients(dy):
      grads = backward(dy)
      return list(grads) if isinstance(grads, (list, tuple)) else [grads]

    record.record_operation(fn.__name__, [output], list(inputs), gradients)
    return output

  return call


def _layer_norm_with_gradient(x, gamma, beta, epsilon):
  """keras.ops.layer_normalization of float32 `x` over its last axis."""
  gamma, beta = tf.convert_to_tensor(gamma), tf.convert_to_tensor(beta)

  @_custom_gradient
  def forward(x, gamma, beta):
    mean, variance = tf.nn.moments(x, axes=[x.shape.rank - 1], keepdims=True)
    reciprocal_std = tf.math.rsqrt(variance + epsilon)
    inv = reciprocal_std * gamma
    y = x * inv + (-mean * inv + beta)

    def backward(dy):
      normalized = (x - mean) * reciprocal_std
      outer_axes = list(range(x.shape.rank - 1))
      d_gamma = tf.reduce_sum(dy * normalized, outer_axes)
      d_beta = tf.reduce_sum(dy, outer_axes)
      g = dy * gamma
      dx = reciprocal_std * (g - tf.reduce_mean(g, -1, keepdims=True)
                             - normalized * tf.reduce_mean(g * normalized, -1, keepdims=True))
      return dx, d_gamma, d_beta

    return y, backward

  return forward(x, gamma, beta)


def _dropout_with_gradient(x, rate, seed):
  """tf.nn.experimental.stateless_dropout(x, rate, seed=seed) for 0 < rate < 1."""
  scale = tf.constant(1 / (1 - rate), x.dtype)
  # tf.random.stateless_uniform's numbers ("auto_select" algorithm, [0, 1)) from its two
  # kernels: its scaling to [minval, maxval) multiplies by 1 and adds 0, three ops more.
  key, counter = tf.raw_ops.StatelessRandomGetKeyCounter(seed=seed)
  uniform = tf.raw_ops.StatelessRandomUniformV2(shape=tf.shape(x), key=key, counter=counter,
                                                alg=tf.random.Algorithm.AUTO_SELECT.value,
                                                dtype=x.dtype)
  keep = uniform >= rate
  zero = tf.constant(0, x.dtype)

  @_custom_gradient
  def forward(x):
    return tf.where(keep, x * scale, zero), lambda dy: tf.where(keep, dy, zero) * scale

  return forward(x)


def _batch_matmul_with_gradient(a, b, transpose_b=False):
  """tf.linalg.matmul(a, b, transpose_b=...) of [B, N, ., .] tensors of one batch shape, with
  the two matmuls of its gradient and nothing else: autodiff's also reduces over broadcast
  batch dimensions (there are none here), about fifteen shape, reshape and sum ops."""

  @_custom_gradient
  def forward(a, b):
    def backward(dy):
      if transpose_b:  # y = a b^T: da = dy b, db = dy^T a
        return tf.linalg.matmul(dy, b), tf.linalg.matmul(dy, a, transpose_a=True)
      return tf.linalg.matmul(dy, b, transpose_b=True), tf.linalg.matmul(a, dy, transpose_a=True)

    return tf.linalg.matmul(a, b, transpose_b=transpose_b), backward

  return forward(a, b)


def _residual_sum(x, residual, training):
  """x + residual of one shape. In training an AddN, whose gradient passes through: AddV2's
  adds shape, broadcast-argument, sum and reshape ops for both inputs."""
  return tf.add_n([x, residual]) if training else x + residual


def gelu(x):
  """The original's tanh approximation of GELU (not the exact erf form)."""
  return keras.activations.gelu(x, approximate=True)


def _gelu_with_gradient(x):
  """gelu(x) from the very ops of tf.nn.gelu's tanh form, with the derivative written out
  from the forward's tanh: autodiff's chains through the power, the tanh and six products,
  about thirty graph ops against ten."""

  @_custom_gradient
  def forward(x):
    half_x = 0.5 * x
    tanh = tf.math.tanh(_GELU_SQRT_2_OVER_PI * (x + tf.cast(_GELU_CUBIC, x.dtype)
                                                * tf.math.pow(x, 3)))
    one_plus_tanh = 1.0 + tanh

    def backward(dy):
      # (1 + t) / 2 + x / 2 * (1 - t^2) * c * (1 + 3 a x^2)
      slope = _GELU_SQRT_2_OVER_PI + (3 * _GELU_CUBIC * _GELU_SQRT_2_OVER_PI) * (x * x)
      return dy * (0.5 * one_plus_tanh + half_x * ((1.0 - tanh * tanh) * slope))

    return half_x * one_plus_tanh, backward

  return forward(x)


def gelu_exact(x):
  """The exact erf GELU (Hugging Face's "gelu"); bert_tf's name is "gelu_exact"."""
  return keras.activations.gelu(x, approximate=False)


def get_activation(name):
  """Maps a `hidden_act` string to a function, as the original `get_activation`."""
  if not isinstance(name, str):
    return name
  name = name.lower()
  if name in ("", "linear"):
    return None
  return {"gelu": gelu, "gelu_exact": gelu_exact, "relu": keras.activations.relu,
          "tanh": keras.activations.tanh}[name]


def truncated_normal(initializer_range):
  """The original `create_initializer`: truncated normal, stddev=initializer_range."""
  return keras.initializers.TruncatedNormal(stddev=initializer_range)


def serializable(cls):
  """Registers a bert_tf layer with Keras, so saved `.keras` models find it again."""
  return keras.saving.register_keras_serializable(package="bert_tf")(cls)


class ConfiguredLayer(keras.layers.Layer):
  """A layer built from a BertConfig; `get_config` stores the config as a plain dict."""

  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    self.config = BertConfig.coerce(config)

  def get_config(self):
    return {**super().get_config(), "config": self.config.to_dict()}


@serializable
class LayerNorm(keras.layers.LayerNormalization):
  """Keras's LayerNormalization whose training call builds a short gradient
  (_layer_norm_with_gradient): the same weights and the same numbers."""

  def call(self, inputs, training=False):
    last_axis_only = list(self.axis) in ([-1], [len(inputs.shape) - 1])
    if (not training or not last_axis_only or self.rms_scaling or self.gamma is None
        or self.beta is None):
      return super().call(inputs)
    x = ops.cast(inputs, "float32")
    return ops.cast(_layer_norm_with_gradient(x, self.gamma, self.beta, self.epsilon),
                    self.compute_dtype)


@serializable
class Dropout(keras.layers.Dropout):
  """Keras's Dropout (the same masks from the same seed states) with a short gradient."""

  def call(self, inputs, training=False):
    if not training or not 0 < self.rate < 1 or self.noise_shape is not None:
      return super().call(inputs, training=training)
    seed = self.seed_generator.next()
    if seed.dtype != tf.int32:  # as Keras: stateless ops take int32 seeds
      seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
    return _dropout_with_gradient(inputs, self.rate, seed)


def layer_norm(name):
  """LayerNorm over the last axis with the original epsilon, always in float32."""
  return LayerNorm(axis=-1, epsilon=_LAYER_NORM_EPSILON, name=name, dtype="float32")


@serializable
class Dense(keras.layers.Dense):
  """Keras's Dense whose training call applies the tanh GELU with its short gradient
  (_gelu_with_gradient): the same weights, ops and numbers. Otherwise Keras's call."""

  def call(self, inputs, training=None):
    if not training or self.activation is not gelu or self.quantization_mode is not None:
      return super().call(inputs, training=training)
    x = ops.matmul(inputs, self.kernel)
    if self.bias is not None:
      x = ops.add(x, self.bias)
    return _gelu_with_gradient(x)

  def quantize(self, mode=None, type_check=True, config=None):
    """Keras's quantization: quantized, the layer runs Keras's quantized call, which this
    class leaves alone (Keras refuses subclasses unless told)."""
    return super().quantize(mode, type_check=False, config=config)


def dense(units, config, name, activation=None, dtype=None):
  return Dense(units, activation=activation, name=name, dtype=dtype,
               kernel_initializer=truncated_normal(config.initializer_range))


def attention_bias_from_mask(input_mask, dtype="float32"):
  """[B, T] 0/1 mask -> additive [B, 1, 1, T] bias: 0 where attended, -10000 elsewhere.

  The original builds a [B, F, T] mask of ones times the input mask and adds
  `(1 - mask) * -10000` to the scores; broadcasting over heads and query positions
  gives the same numbers without materialising [B, F, T].
  """
  # expand_dims, not [:, None, None, :]: LiteRT has no builtin for a new-axis strided slice
  # when batch and length are both dynamic.
  mask = ops.expand_dims(ops.expand_dims(ops.cast(input_mask, dtype), 1), 1)
  return (1.0 - mask) * -10000.0


def causal_attention_bias(seq_length):
  """[1, 1, S, S] additive bias: -10000 where a key comes after its query (a left-to-right
  model), with the padding mask's value, so both masks are alike."""
  positions = ops.arange(seq_length)
  future = ops.cast(positions[None, :] > positions[:, None], "float32")
  return (future * -10000.0)[None, None]


class PackedTokens(NamedTuple):
  """Where the real tokens of a padded [B, S] batch sit, for an encoder that keeps only their
  rows: the dense layers, LayerNorms and the FFN then compute nothing for padding, and only
  attention lays the rows out as [B, S] again (see `pack_tokens`)."""

  real: tf.Tensor  # [T] int32: each real token's position in the flat [B * S] batch
  spread: tf.Tensor  # [B * S] int32: the row each batch position reads (padding: a real row)


def pack_tokens(input_mask):
  """PackedTokens of a [B, S] 0/1 mask with at least one real token.

  A padding position reads the row of the real token before it (or the first row): its key
  enters a real query's softmax as exp(score - 10000 - max), exactly 0 in float32, and its
  value is weighted by that 0, as the original's padding rows are. So the real positions'
  outputs are the padded pass's, up to the summation order of the matmul kernels.
  """
  flat = ops.reshape(ops.cast(input_mask, "int32") > 0, (-1,))
  real = ops.cast(tf.where(flat)[:, 0], "int32")
  spread = ops.maximum(ops.cumsum(ops.cast(flat, "int32")) - 1, 0)
  return PackedTokens(real, spread)


@serializable
class BertEmbeddings(ConfiguredLayer):
  """word + token-type + position embeddings, then LayerNorm and dropout."""

  def __init__(self, config, use_one_hot_embeddings=False, **kwargs):
    super().__init__(config, **kwargs)
    self.use_one_hot_embeddings = use_one_hot_embeddings
    self.layer_norm = layer_norm("layer_norm")
    self.dropout = Dropout(self.config.hidden_dropout_prob, dtype=self.dtype_policy)

  def get_config(self):
    return {**super().get_config(), "use_one_hot_embeddings": self.use_one_hot_embeddings}

  def build(self, input_shape=None):
    c = self.config
    init = truncated_normal(c.initializer_range)
    self.word_embeddings = self.add_weight(name="word_embeddings", initializer=init,
                                           shape=(c.vocab_size, c.hidden_size))
    self.token_type_embeddings = self.add_weight(name="token_type_embeddings", initializer=init,
                                                 shape=(c.type_vocab_size, c.hidden_size))
    self.position_embeddings = self.add_weight(name="position_embeddings", initializer=init,
                                               shape=(c.max_position_embeddings, c.hidden_size))
    self.layer_norm.build((None, None, c.hidden_size))
    self.built = True

  def call(self, input_ids, token_type_ids, training=False):
    """[B, S] ids -> [B, S, H] embedding output (float32)."""
    c = self.config
    if self.use_one_hot_embeddings:
      one_hot = ops.one_hot(input_ids, c.vocab_size, dtype=self.word_embeddings.dtype)
      output = ops.matmul(one_hot, self.word_embeddings)
    else:
      output = ops.take(self.word_embeddings, input_ids, axis=0)
    # A gather gives exactly the original's one-hot matmul (all other terms are 0).
    output = output + ops.take(self.token_type_embeddings, token_type_ids, axis=0)
    seq_length = ops.shape(input_ids)[1]
    output = output + self.position_embeddings[None, :seq_length, :]
    output = self.layer_norm(output, training=training)
    return self.dropout(output, training=training)


@serializable
class SelfAttention(ConfiguredLayer):
  """Multi-head scaled dot-product self-attention with the additive -10000 mask.

  Variables: self/{query,key,value}/{kernel,bias} and output/dense/{kernel,bias}
  (the output projection is applied in TransformerBlock, as in the original).
  It takes and returns [B * S, H] rows, the original's 2-D layout (see TransformerBlock).
  """

  def __init__(self, config, **kwargs):
    super().__init__(config, **kwargs)
    config = self.config
    hidden, policy = config.hidden_size, self.dtype_policy
    self.query = dense(hidden, config, "query", dtype=policy)
    self.key = dense(hidden, config, "key", dtype=policy)
    self.value = dense(hidden, config, "value", dtype=policy)
    self.dropout = Dropout(config.attention_probs_dropout_prob, dtype=policy)

  def build(self, input_shape=None):
    shape = (None, self.config.hidden_size)
    for layer in (self.query, self.key, self.value):
      layer.build(shape)
    self.built = True

  def call(self, rows, input_mask, training=False, packed=None):
    """[B * S, H] rows, [B, S] 0/1 mask -> [B * S, H] context rows; with `packed`
    (PackedTokens), [T, H] rows of the real tokens -> [T, H].

    The mask arrives as integers and becomes the float32 bias here, because Keras
    would autocast a float bias argument to float16 under mixed precision.
    """
    c = self.config
    heads_shape = (-1, ops.shape(input_mask)[1], c.num_attention_heads, c.head_size)

    def split_heads(x):  # [B * S, H] (or [T, H] packed) -> [B, N, S, D]
      if packed is not None:
        x = tf.gather(x, packed.spread)
      return ops.transpose(ops.reshape(x, heads_shape), (0, 2, 1, 3))

    q = split_heads(self.query(rows))
    k = split_heads(self.key(rows))
    v = split_heads(self.value(rows))
    # transpose_b, as the original: the kernel reads K's rows, no transposed copy is made.
    matmul = _batch_matmul_with_gradient if training else tf.linalg.matmul
    scores = matmul(q, k, transpose_b=True)  # [B, N, S, S]
    scores = scores * ops.cast(1.0 / math.sqrt(c.head_size), scores.dtype)
    scores = ops.cast(scores, "float32") + attention_bias_from_mask(input_mask)
    if c.causal_attention:
      scores = scores + causal_attention_bias(ops.shape(scores)[-1])
    probs = ops.cast(ops.softmax(scores, axis=-1), q.dtype)
    probs = self.dropout(probs, training=training)
    context = ops.transpose(matmul(probs, v), (0, 2, 1, 3))  # [B, S, N, D]
    context = ops.reshape(context, (-1, c.hidden_size))
    return context if packed is None else tf.gather(context, packed.real)


@serializable
class TransformerBlock(ConfiguredLayer):
  """One post-LayerNorm encoder layer: attention, add & norm, FFN, add & norm.

  Inside, hidden states are [B * S, H] rows, as the original's `reshape_to_matrix`
  keeps them: every dense layer is then one 2-D MatMul + BiasAdd, which oneDNN fuses
  into one kernel. A Keras Dense on [B, S, H] is a tensordot: about ten shape, reshape
  and transpose ops around its matmul, and a Reshape between matmul and bias that
  blocks the fusion (docs/performance.md, "Outside the matmuls").
  """

  def __init__(self, config, **kwargs):
    super().__init__(config, **kwargs)
    config = self.config
    policy = self.dtype_policy
    self.attention = SelfAttention(config, name="attention_self", dtype=policy)
    self.attention_output = dense(config.hidden_size, config, "attention_output_dense",
                                  dtype=policy)
    self.attention_norm = layer_norm("attention_output_layer_norm")
    self.intermediate = dense(config.intermediate_size, config, "intermediate_dense",
                              activation=get_activation(config.hidden_act), dtype=policy)
    self.output_dense = dense(config.hidden_size, config, "output_dense", dtype=policy)
    self.output_norm = layer_norm("output_layer_norm")
    self.attention_dropout = Dropout(config.hidden_dropout_prob, dtype=policy)
    self.output_dropout = Dropout(config.hidden_dropout_prob, dtype=policy)

  def build(self, input_shape=None):
    h, i = self.config.hidden_size, self.config.intermediate_size
    self.attention.build()
    self.attention_output.build((None, h))
    self.attention_norm.build((None, h))
    self.intermediate.build((None, h))
    self.output_dense.build((None, i))
    self.output_norm.build((None, h))
    self.built = True

  def call(self, hidden_states, input_mask, training=False, packed=None):
    """[B, S, H], [B, S] 0/1 mask -> [B, S, H] (float32); with `packed` (PackedTokens),
    the real tokens' [T, H] rows -> [T, H]."""
    rows = ops.reshape(hidden_states, (-1, self.config.hidden_size))
    context = self.attention(rows, input_mask, training=training, packed=packed)
    attention_out = self.attention_dropout(self.attention_output(context), training=training)
    attention_out = self.attention_norm(_residual_sum(
        ops.cast(attention_out, "float32"), ops.cast(rows, "float32"), training), training=training)
    ffn = self.output_dense(self.intermediate(attention_out, training=training))
    ffn = self.output_dropout(ffn, training=training)
    output = self.output_norm(_residual_sum(ops.cast(ffn, "float32"), attention_out, training),
                              training=training)
    return ops.reshape(output, tf.shape(hidden_states))


@serializable
class Pooler(ConfiguredLayer):
  """tanh dense layer on the first ([CLS]) token: pooler/dense/{kernel,bias}.

  A left-to-right model (causal_attention) reads the last real token instead: its [CLS]
  attends only to itself, so it would pool the same vector for every input. The paper
  does not say how its LTR model classified; the last token is what left-to-right
  models (OpenAI GPT) use.
  """

  def __init__(self, config, **kwargs):
    super().__init__(config, **kwargs)
    self.dense = dense(self.config.hidden_size, self.config, "dense", activation="tanh",
                       dtype=self.dtype_policy)

  def build(self, input_shape=None):
    self.dense.build((None, self.config.hidden_size))
    self.built = True

  def call(self, sequence_output, input_mask=None):
    """[B, S, H] (and [B, S] 0/1 mask, read only by a causal model) -> [B, H]."""
    if self.config.causal_attention and input_mask is not None:
      last = ops.maximum(ops.sum(ops.cast(input_mask, "int32"), axis=1) - 1, 0)
      token = ops.take_along_axis(sequence_output, last[:, None, None], axis=1)[:, 0, :]
      return self.dense(token)
    return self.dense(sequence_output[:, 0, :])
