"""The short gradients the encoder trains with (LayerNorm, dropout, the tanh GELU, the
attention's batched matmuls and the residual sums in bert_tf.layers) against autodiff of
Keras's and TensorFlow's own ops: the same forward numbers bitwise, the same dropout masks,
gradients equal up to float32 rounding, and far fewer graph ops."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import layers
from bert_tf.modeling import BertModel
from helpers import tiny_config

# Relative to each gradient's largest entry: kernels of other CPUs sum in other orders, and a
# wrong formula is off by the gradient's own size. A gradient that is zero but for rounding
# (the key bias: softmax ignores a shift of every score) is measured against 1e-2 of the
# largest gradient of all.
GRADIENT_RTOL = 1e-5


def _assert_gradients_close(got, want):
  got = [tf.convert_to_tensor(g).numpy() for g in got]
  want = [tf.convert_to_tensor(w).numpy() for w in want]
  floor = 1e-2 * max(float(np.abs(w).max()) for w in want)
  for i, (g, w) in enumerate(zip(got, want)):
    scale = max(float(np.abs(w).max()), floor)
    assert np.abs(g - w).max() <= GRADIENT_RTOL * scale, (i, np.abs(g - w).max(), scale)


def _stock_layer_norm(x, gamma, beta, epsilon):
  return keras.ops.layer_normalization(x, gamma, beta, epsilon=epsilon)


def _stock_dropout(x, rate, seed):
  return tf.nn.experimental.stateless_dropout(x, rate, seed=seed)


def _weights(y):
  """Fixed pseudo-random loss weights of y's shape, so every gradient entry differs."""
  n = int(np.prod(y.shape))
  return tf.reshape(tf.sin(tf.range(n, dtype=tf.float32) * 0.37), y.shape)


def _output_and_gradients(call, x, sources):
  """call(x) and the gradients of a fixed weighted sum of it with respect to `sources`."""
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = call(x)
    loss = tf.reduce_sum(y * _weights(y))
  return y, tape.gradient(loss, sources)


def _stock_residual_sum(x, residual, training):
  return x + residual


@pytest.mark.parametrize("graph", [False, True])
def test_gelu_in_training_is_tensorflows_forward_with_autodiff_gradient(graph):
  """Across GELU's curved range, where a wrong derivative term shows. Traced, grappler
  rewrites the stock forward's ops (whose intermediates autodiff's gradient reads) otherwise
  than ours: there the forward is equal up to float32 rounding."""
  x = tf.constant((np.linspace(-6.0, 6.0, 97).reshape(1, 97) * [[1.0], [0.3]]).astype("float32"))

  def run(call):
    return _output_and_gradients(call, x, x)

  run = tf.function(run) if graph else run
  y_short, g_short = run(layers._gelu_with_gradient)
  y_stock, g_stock = run(layers.gelu)
  if graph:
    _assert_gradients_close([y_short], [y_stock])
  else:
    np.testing.assert_array_equal(y_short.numpy(), y_stock.numpy())
  _assert_gradients_close([g_short], [g_stock])


@pytest.mark.parametrize("graph", [False, True])
def test_second_derivatives_through_the_short_gradients_are_autodiffs(graph):
  """A tape around the gradient (a gradient penalty, a Hessian-vector product) sees how the
  written-out backward depends on the forward's intermediates, as with autodiff."""
  x = tf.constant(np.linspace(-3.0, 3.0, 8).reshape(2, 4).astype("float32"))
  gamma = tf.constant(np.linspace(0.5, 2.0, 4).astype("float32"))
  beta = tf.constant(np.linspace(-0.5, 0.5, 4).astype("float32"))

  def second(call):
    def run():
      with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
          inner.watch(x)
          y = call(x)
          loss = tf.reduce_sum(y * _weights(y))
        gradient = inner.gradient(loss, x)
        penalty = tf.reduce_sum(gradient * gradient)
      return gradient, outer.gradient(penalty, x)
    return (tf.function(run) if graph else run)()

  pairs = [(layers._gelu_with_gradient, layers.gelu),
           (lambda v: layers._layer_norm_with_gradient(v, gamma, beta, 1e-12),
            lambda v: _stock_layer_norm(v, gamma, beta, 1e-12))]
  for short, stock in pairs:
    _assert_gradients_close(second(short), second(stock))


@pytest.mark.parametrize("transpose_b", [False, True])
def test_batch_matmul_gradient_is_autodiffs(transpose_b):
  """The two matmuls autodiff builds, without its reduction over (absent) broadcast batch
  dimensions: the same numbers."""
  rng = np.random.default_rng(4)
  a = tf.constant(rng.normal(size=(2, 3, 5, 4)).astype("float32"))
  b = tf.constant(rng.normal(size=(2, 3, 6, 4) if transpose_b else (2, 3, 4, 6))
                  .astype("float32"))

  def run(matmul):
    with tf.GradientTape() as tape:
      tape.watch([a, b])
      y = matmul(a, b, transpose_b=transpose_b)
      loss = tf.reduce_sum(y * _weights(y))
    return y, tape.gradient(loss, [a, b])

  y_short, g_short = run(layers._batch_matmul_with_gradient)
  y_stock, g_stock = run(tf.linalg.matmul)
  np.testing.assert_array_equal(y_short.numpy(), y_stock.numpy())
  _assert_gradients_close(g_short, g_stock)


@pytest.mark.parametrize("shape", [(7, 32), (2, 5, 32)])
@pytest.mark.parametrize("graph", [False, True])
def test_layer_norm_in_training_is_keras_forward_with_autodiff_gradient(shape, graph):
  rng = np.random.default_rng(1)
  x = tf.constant(rng.normal(3.0, 2.5, size=shape).astype("float32"))
  norm = layers.layer_norm("norm")
  norm.build(shape)
  norm.gamma.assign(rng.normal(1.0, 0.5, size=32).astype("float32"))
  norm.beta.assign(rng.normal(0.0, 0.5, size=32).astype("float32"))
  sources = [x, norm.gamma, norm.beta]

  def run(training):
    return _output_and_gradients(lambda v: norm(v, training=training), x, sources)

  run = tf.function(run) if graph else run
  y_train, grads_train = run(True)
  y_stock, grads_stock = run(False)  # inference: Keras's own ops, differentiated by autodiff
  np.testing.assert_array_equal(y_train.numpy(), y_stock.numpy())
  _assert_gradients_close(grads_train, grads_stock)


@pytest.mark.parametrize("graph", [False, True])
def test_dropout_draws_kerass_masks_and_passes_gradient_through_them(graph):
  x = tf.constant(np.random.default_rng(2).normal(size=(4, 6, 16)).astype("float32"))
  ours, stock = layers.Dropout(0.3, seed=11), keras.layers.Dropout(0.3, seed=11)
  assert type(stock) is keras.layers.Dropout

  def run(layer):
    return _output_and_gradients(lambda v: layer(v, training=True), x, x)

  for _ in range(2):  # the second call draws from the advanced seed state
    (y_ours, g_ours), (y_stock, g_stock) = [
        (tf.function(run) if graph else run)(layer) for layer in (ours, stock)]
    np.testing.assert_array_equal(y_ours.numpy(), y_stock.numpy())
    np.testing.assert_array_equal(g_ours.numpy(), g_stock.numpy())
    kept = y_ours.numpy() != 0
    assert 0.5 < kept.mean() < 0.9
    np.testing.assert_allclose(g_ours.numpy(), np.where(kept, _weights(x) / 0.7, 0), rtol=1e-6)
  assert layers.Dropout(0.3)(x, training=False) is x


def _encoder_gradients(encoder, seed_states, inputs, graph):
  for variable, value in seed_states:
    variable.assign(value)

  def run():
    with tf.GradientTape() as tape:
      out = encoder(inputs, training=True)
      loss = tf.reduce_sum(out["sequence_output"] * _weights(out["sequence_output"]))
      loss += tf.reduce_sum(out["pooled_output"])
    return loss, tape.gradient(loss, encoder.trainable_variables)

  return (tf.function(run, autograph=False) if graph else run)()


@pytest.fixture(scope="module")
def dropout_encoder():
  config = tiny_config()
  config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.2
  encoder = BertModel(config)
  rng = np.random.default_rng(3)
  ids = rng.integers(1, config.vocab_size, size=(3, 9)).astype("int32")
  mask = np.ones((3, 9), "int32")
  mask[1, 6:] = mask[2, 4:] = 0
  inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": mask * 0}
  encoder(inputs)
  weights = {id(v) for v in encoder.weights}
  seed_states = [(v, v.numpy()) for v in encoder.variables if id(v) not in weights]
  assert seed_states
  return encoder, seed_states, inputs


@pytest.mark.parametrize("graph", [False, True])
def test_encoder_training_gradients_equal_autodiff_of_the_stock_layers(dropout_encoder,
                                                                      monkeypatch, graph):
  """Eagerly and traced as the trainer traces its step. Traced, grappler's arithmetic
  optimizer may order a sum of the forward otherwise around the custom gradients' boundaries
  (AddN for AddV2, GELU's ops): the loss is then equal up to float32 rounding."""
  encoder, seed_states, inputs = dropout_encoder
  short_loss, short_grads = _encoder_gradients(encoder, seed_states, inputs, graph)
  # Keras's and TensorFlow's own ops, differentiated by autodiff, where the short gradients are
  monkeypatch.setattr(layers, "_layer_norm_with_gradient", _stock_layer_norm)
  monkeypatch.setattr(layers, "_dropout_with_gradient", _stock_dropout)
  monkeypatch.setattr(layers, "_gelu_with_gradient", layers.gelu)
  monkeypatch.setattr(layers, "_batch_matmul_with_gradient", tf.linalg.matmul)
  monkeypatch.setattr(layers, "_residual_sum", _stock_residual_sum)
  stock_loss, stock_grads = _encoder_gradients(encoder, seed_states, inputs, graph)
  if graph:  # the same masks: another mask would move the loss by far more
    assert short_loss.numpy() == pytest.approx(stock_loss.numpy(), rel=1e-6)
  else:  # the same forward, the same masks
    assert short_loss.numpy() == stock_loss.numpy()
  assert all(g is not None for g in short_grads)
  _assert_gradients_close(short_grads, stock_grads)


def test_training_gradient_graph_is_much_smaller():
  """The reason for the short gradients: ops in the traced gradient of one LayerNorm."""
  norm = layers.layer_norm("norm")
  norm.build((None, 32))

  def count(training):
    @tf.function(input_signature=[tf.TensorSpec([None, 32], tf.float32)])
    def grad(x):
      with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(norm(x, training=training))
      return tape.gradient(loss, [x, norm.gamma, norm.beta])
    return len(grad.get_concrete_function().graph.as_graph_def().node)

  assert count(True) < 0.5 * count(False)
