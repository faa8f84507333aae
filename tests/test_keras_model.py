"""BertModel, its layers and heads as Keras-native objects: configs, functional models, fit,
.keras files."""

import keras
import numpy as np
import pytest

from bert_tf import checkpoints, heads, layers
from bert_tf.modeling import BertModel, keras_inputs
from helpers import FIXTURES, FLOAT32_EPS, TINY, assert_float32_close, float32_approx, tiny_config

# The original code's outputs for the tiny checkpoint (set A: 3 sequences of 16, padded).
ORIGINAL = np.load(FIXTURES / "model_forward" / "pretrain_heads_forward.npz")


def _batch(rows=6, seq=12, seed=0):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(3, seq + 1, rows)
  mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int32)
  return {"input_word_ids": rng.integers(1, 100, (rows, seq)).astype(np.int32) * mask,
          "input_mask": mask,
          "input_type_ids":
              (np.arange(seq)[None, :] >= lengths[:, None] // 2).astype(np.int32) * mask}


def _cross_entropy(logits, labels):
  """Mean sparse softmax cross-entropy, in float64."""
  logits = np.asarray(logits, np.float64)
  top = logits.max(-1, keepdims=True)
  log_probs = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
  return float(-log_probs[np.arange(len(labels)), labels].mean())


def _classifier(config):
  """A functional Keras model on BertModel: Dense on pooled_output."""
  inputs = keras_inputs()
  encoder = BertModel(config)
  checkpoints.load_checkpoint(TINY.ckpt, encoder)
  pooled = encoder(inputs)["pooled_output"]
  logits = keras.layers.Dense(2, name="logits")(pooled)
  return keras.Model(inputs, logits)


@pytest.mark.parametrize("make", [
    lambda c: layers.BertEmbeddings(c, use_one_hot_embeddings=True, name="e"),
    lambda c: layers.SelfAttention(c, name="a"),
    lambda c: layers.TransformerBlock(c, name="t"),
    lambda c: layers.Pooler(c, name="p"),
    lambda c: heads.MaskedLMHead(c, name="m"),
    lambda c: heads.NextSentenceHead(c, name="n"),
    lambda c: heads.ClassificationHead(c, 3, dropout_rate=0.2, name="c"),
    lambda c: heads.SpanHead(c, name="s"),
    lambda c: heads.MultipleChoiceHead(c, name="mc"),
    lambda c: BertModel(c, use_one_hot_embeddings=True, name="b"),
])
def test_every_layer_round_trips_through_its_plain_config(make):
  layer = make(tiny_config())
  config = layer.get_config()
  assert config["config"] == tiny_config().to_dict()
  # Plain values only: the config is JSON as a .keras file stores it.
  import json
  config = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
  rebuilt = keras.saving.deserialize_keras_object(config)
  assert type(rebuilt) is type(layer)
  assert rebuilt.get_config() == layer.get_config()


def test_outputs_have_tf_hub_names_and_shapes():
  config = tiny_config()
  encoder = BertModel(config)
  outputs = encoder(_batch())
  assert set(outputs) >= {"sequence_output", "pooled_output", "encoder_outputs"}
  assert outputs["sequence_output"].shape == (6, 12, config.hidden_size)
  assert outputs["pooled_output"].shape == (6, config.hidden_size)
  assert len(outputs["encoder_outputs"]) == config.num_hidden_layers
  np.testing.assert_array_equal(outputs["encoder_outputs"][-1], outputs["sequence_output"])
  # pooled_output is the pooler's dense + tanh on each sequence's first position (float32 sums
  # of 32 products against float64 ones: a few ulps apart).
  kernel, bias = (np.asarray(v.numpy(), np.float64)
                  for v in (encoder.pooler.dense.kernel, encoder.pooler.dense.bias))
  first = np.asarray(outputs["sequence_output"], np.float64)[:, 0]
  assert_float32_close(outputs["pooled_output"], np.tanh(first @ kernel + bias), ulps=16)
  with pytest.raises(ValueError, match="input_word_ids"):
    encoder({"input_ids": _batch()["input_word_ids"]})


@pytest.mark.slow
def test_functional_model_fits_and_survives_a_keras_file(tmp_path):
  keras.utils.set_random_seed(1)
  model = _classifier(tiny_config())
  batch = _batch(rows=16)
  labels = (batch["input_mask"].sum(1) > 7).astype(np.int32)
  model.compile(optimizer=keras.optimizers.Adam(1e-3),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  # The compiled loss is the cross-entropy of the predicted logits, before and after fit.
  initial = model.evaluate(batch, labels, batch_size=16, verbose=0)
  assert initial == float32_approx(_cross_entropy(model.predict(batch, verbose=0), labels),
                                   ulps=16)
  history = model.fit(batch, labels, batch_size=8, epochs=8, verbose=0)
  losses = history.history["loss"]
  assert losses[-1] < losses[0]  # it learned something from the labels
  before = model.predict(batch, verbose=0)
  final = model.evaluate(batch, labels, batch_size=16, verbose=0)
  assert final == float32_approx(_cross_entropy(before, labels), ulps=16) and final < initial

  path = tmp_path / "classifier.keras"
  model.save(path)
  loaded = keras.saving.load_model(path)
  assert_float32_close(loaded.predict(batch, verbose=0), before)
  # The loaded encoder still speaks Google's checkpoint names.
  encoder = [l for l in loaded.layers if isinstance(l, BertModel)][0]
  names = checkpoints.variable_map(encoder)
  assert "bert/encoder/layer_1/attention/self/query/kernel" in names


def test_bert_model_alone_survives_a_keras_file(tmp_path):
  encoder = BertModel(tiny_config())
  checkpoints.load_checkpoint(TINY.ckpt, encoder)
  inputs = keras_inputs()
  model = keras.Model(inputs, encoder(inputs))
  batch = {"input_word_ids": ORIGINAL["A.in.input_ids"], "input_mask": ORIGINAL["A.in.input_mask"],
           "input_type_ids": ORIGINAL["A.in.segment_ids"]}
  want = model.predict(batch, verbose=0)
  # The functional model computes the original's numbers. Rounding in the hidden values (up to
  # about 4 after LayerNorm) carries into every output, the pooled one too, so one bound in
  # float32 ulps of the largest hidden value covers them all.
  atol = 16 * FLOAT32_EPS * float(np.abs(ORIGINAL["A.sequence_output"]).max())
  for got, original in ((want["sequence_output"], ORIGINAL["A.sequence_output"]),
                        (want["pooled_output"], ORIGINAL["A.pooled_output"]),
                        (np.stack(want["encoder_outputs"]), ORIGINAL["A.all_encoder_layers"])):
    assert_float32_close(got, original, ulps=0, atol=atol)
  model.save(tmp_path / "encoder.keras")
  got = keras.saving.load_model(tmp_path / "encoder.keras").predict(batch, verbose=0)
  assert_float32_close(got["pooled_output"], want["pooled_output"])
  for a, b in zip(got["encoder_outputs"], want["encoder_outputs"]):
    assert_float32_close(a, b)
