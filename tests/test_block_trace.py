"""A traced training step runs the encoder's blocks through one trace of the first block
(BertModel._blocks_through_one_trace): the same dropout seed states as the layer-by-layer
calls, the loss and gradients up to float32 rounding, with one block traced instead of every
layer."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import layers
from bert_tf.modeling import BertModel
from helpers import tiny_config


@pytest.fixture(scope="module")
def encoder_and_inputs():
  config = tiny_config()
  config.num_hidden_layers = 3
  config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.2
  encoder = BertModel(config)
  rng = np.random.default_rng(5)
  ids = rng.integers(1, config.vocab_size, size=(3, 7)).astype("int32")
  mask = np.ones((3, 7), "int32")
  mask[0, 5:] = 0
  inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": mask * 0}
  encoder(inputs)
  return encoder, inputs


def _seed_states(encoder):
  weights = {id(v) for v in encoder.weights}
  return [v for v in encoder.variables if id(v) not in weights]


def _traced_step(encoder, inputs, monkeypatch):
  """(loss, gradients, seed states after, block traces) of one traced training pass from the
  encoder's current seed states, which are restored afterwards."""
  seeds = _seed_states(encoder)
  before = [v.numpy() for v in seeds]
  traced = []
  call = layers.TransformerBlock.call
  monkeypatch.setattr(layers.TransformerBlock, "call",
                      lambda self, *a, **k: traced.append(self.name) or call(self, *a, **k))

  @tf.function(autograph=False)
  def step():
    with tf.GradientTape() as tape:
      out = encoder(inputs, training=True)
      loss = tf.reduce_sum(out["sequence_output"] * tf.sin(
          tf.reshape(tf.range(tf.size(out["sequence_output"]), dtype=tf.float32) * 0.3,
                     tf.shape(out["sequence_output"]))))
    return loss, tape.gradient(loss, encoder.trainable_variables)

  loss, grads = step()
  after = [v.numpy() for v in seeds]
  for variable, value in zip(seeds, before):
    variable.assign(value)
  monkeypatch.setattr(layers.TransformerBlock, "call", call)
  grads = [np.zeros(v.shape) if g is None else tf.convert_to_tensor(g).numpy()
           for g, v in zip(grads, encoder.trainable_variables)]  # the pooler's: None
  return loss.numpy(), grads, after, traced


def test_one_block_trace_gives_the_layer_by_layer_step(encoder_and_inputs, monkeypatch):
  encoder, inputs = encoder_and_inputs
  before = [v.numpy() for v in _seed_states(encoder)]
  loss, grads, seeds, traced = _traced_step(encoder, inputs, monkeypatch)
  assert traced == ["layer_0"]  # one block traced, and its weights swapped per layer
  monkeypatch.setattr(BertModel, "_traces_one_block", lambda *args: False)
  ref_loss, ref_grads, ref_seeds, ref_traced = _traced_step(encoder, inputs, monkeypatch)
  assert ref_traced == ["layer_0", "layer_1", "layer_2"]
  # The same ops; grappler, optimizing the inlined calls, may order a few of them otherwise
  # (the GELU's cubic term): float32 rounding apart, relative to the largest value.
  assert abs(loss - ref_loss) <= 1e-5 * abs(ref_loss)
  scale = max(float(np.abs(g).max()) for g in ref_grads)
  for g, ref in zip(grads, ref_grads):
    np.testing.assert_allclose(g, ref, rtol=0, atol=1e-5 * scale)
  for got, want, start in zip(seeds, ref_seeds, before):
    np.testing.assert_array_equal(got, want)
  assert any((got != start).any() for got, start in zip(seeds, before))  # dropout drew


def test_frozen_block_keeps_the_layer_by_layer_calls(encoder_and_inputs, monkeypatch):
  encoder, inputs = encoder_and_inputs
  encoder.encoder_layers[1].trainable = False
  try:
    loss, _, _, traced = _traced_step(encoder, inputs, monkeypatch)
  finally:
    encoder.encoder_layers[1].trainable = True
  assert traced == ["layer_0", "layer_1", "layer_2"]
  assert np.isfinite(loss)
