"""Inference precision (bert_tf.utils.precision): float32 stays the faithful model itself; bfloat16
and int8 agree with it on real text within stated tolerances, in memory and exported."""

import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints, export
from bert_tf.errors import UserInputError
from bert_tf.modeling import BertModel
from bert_tf.tasks import glue
from bert_tf.tasks.glue.export import export_classifier
from bert_tf.text import BertTextTokenizer
from bert_tf.utils import precision
from helpers import FIXTURES, PRECISION_TOLERANCE, ROOT, TINY, VOCAB_UNCASED, tiny_config

HEAD_CKPT = str(FIXTURES / "checkpoint" / "classifier_head_3labels" / "head.ckpt")
CORPUS = pathlib.Path(ROOT) / "data" / "pretraining_corpus.txt"

TOLERANCE = PRECISION_TOLERANCE  # on the real sentences below


def _sentences(count=24):
  with open(CORPUS, encoding="utf-8") as f:
    return [line.strip() for line in f if len(line.split()) >= 6][:count]


@pytest.fixture(scope="module")
def classifier():
  model = glue.ClassifierModel(tiny_config(), num_labels=3)
  checkpoints.load_checkpoint(TINY.ckpt, model.encoder)
  checkpoints.load_checkpoint(HEAD_CKPT, heads=model.heads)
  return model


@pytest.fixture(scope="module")
def features():
  tokenizer = BertTextTokenizer(VOCAB_UNCASED, do_lower_case=True)
  return tokenizer.encode(tf.constant(_sentences()), seq_length=48)


def _max_diff(a, b):
  return float(np.max(np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32))))


def test_float32_is_the_model_itself_and_names_are_checked(classifier):
  assert precision.for_inference(classifier, "float32") is classifier
  assert precision.of(classifier) == "float32"
  with pytest.raises(UserInputError, match="float16.*float32, bfloat16, int8"):
    precision.for_inference(classifier, "float16")


@pytest.mark.parametrize("name", ["bfloat16", "int8"])
def test_classifier_agrees_with_float32_on_real_text(classifier, features, name):
  before = [w.copy() for w in classifier.get_weights()]
  reference = np.asarray(classifier(features, training=False))
  other = precision.for_inference(classifier, name)
  assert other is not classifier and precision.of(other) == name
  logits = other(features, training=False)
  assert logits.dtype == tf.float32
  diff = _max_diff(logits, reference)
  assert 0 < diff < TOLERANCE[name]["logits"]  # not float32 any more, but close
  assert np.array_equal(np.argmax(logits, -1), np.argmax(reference, -1))
  # The float32 model is untouched: same weights, same numbers.
  assert all(np.array_equal(a, b) for a, b in zip(before, classifier.get_weights()))
  assert np.array_equal(np.asarray(classifier(features, training=False)), reference)
  with pytest.raises(UserInputError, match="already computes in"):
    precision.for_inference(other, "int8" if name == "bfloat16" else "bfloat16")
  assert precision.for_inference(other, name) is other


@pytest.mark.parametrize("name", ["bfloat16", "int8"])
def test_encoder_layers_compute_in_the_precision(classifier, features, name):
  encoder = BertModel(tiny_config())
  encoder(features)
  encoder.set_weights(classifier.encoder.get_weights())
  reference = encoder(features)["sequence_output"]
  other = precision.for_inference(encoder, name)
  dense = [l for l in other._flatten_layers() if isinstance(l, keras.layers.Dense)]
  norms = [l for l in other._flatten_layers() if isinstance(l, keras.layers.LayerNormalization)]
  # 2 layers x (query, key, value, attention output, intermediate, output) + the pooler.
  assert len(dense) == 13 and norms
  assert all(l.dtype_policy.compute_dtype == "float32" for l in norms)
  if name == "bfloat16":
    assert all(l.compute_dtype == "bfloat16" and l.kernel.dtype == "bfloat16" for l in dense)
    assert all(l.gamma.dtype == "float32" for l in norms)
  else:
    assert all(l.quantization_mode == "int8" and l._kernel.dtype == "int8" for l in dense)
  outputs = other(features)
  assert outputs["sequence_output"].dtype == outputs["pooled_output"].dtype == tf.float32
  real = np.asarray(features["input_mask"], bool)
  diff = np.abs(np.asarray(outputs["sequence_output"]) - np.asarray(reference))[real]
  assert diff.max() < TOLERANCE[name]["sequence_output"]
  assert diff.mean() < TOLERANCE[name]["mean_sequence"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bfloat16", "int8"])
def test_export_computes_in_the_precision_and_says_so(classifier, name, tmp_path):
  other = precision.for_inference(classifier, name)
  out = export_classifier(tmp_path / name, other, VOCAB_UNCASED, True, 48,
                          ["a", "b", "c"], text_pair=False)
  assert export.read_metadata(out)["inference_precision"] == name
  texts = _sentences()
  served = tf.saved_model.load(out).signatures["serving_default"](text_a=tf.constant(texts))
  tokenizer = BertTextTokenizer(VOCAB_UNCASED, do_lower_case=True)
  # Compared with the model in graph mode, as served: eagerly, bfloat16 rounds each op's
  # output, while a graph fuses matmul, bias and activation (1e-3 apart here).
  graph = tf.function(lambda features: tf.nn.softmax(other(features)))
  expected = graph(tokenizer.encode(tf.constant(texts), seq_length=48))
  np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5)
  float32 = tf.nn.softmax(classifier(tokenizer.encode(tf.constant(texts), seq_length=48)))
  assert 0 < _max_diff(served["probabilities"], float32) < TOLERANCE[name]["logits"]
  loaded = tf.saved_model.load(out)
  int8_variables = [v for v in loaded.model_variables if v.dtype == tf.int8]
  assert len(int8_variables) == (13 if name == "int8" else 0)  # stored as int8, not float32


def test_int8_copy_cuts_to_xla_length_buckets_without_moving_a_number(classifier, features):
  dynamic = glue.ClassifierModel(tiny_config(), num_labels=3, dynamic_length=True)
  dynamic.set_weights(classifier.get_weights())
  int8 = precision.for_inference(dynamic, "int8")
  assert int8.length_bucket == precision.XLA_LENGTH_BUCKET == 16
  assert precision.for_inference(dynamic, "bfloat16").length_bucket == 1  # graph mode: no bucket
  longest = int(np.max(np.sum(features["input_mask"], axis=1)))
  assert longest % 16 and longest < 48  # so the bucket is a real cut, shorter than the padding
  cut = int8.encode(features, training=False)["sequence_output"]
  assert cut.shape[1] == -(-longest // 16) * 16
  # The padded int8 model (the fixture's copy, fixed length 48) gives the same logits.
  padded = precision.for_inference(classifier, "int8")
  np.testing.assert_allclose(int8(features, training=False), padded(features, training=False),
                             atol=1e-5)


def test_xla_is_the_default_only_where_it_measured_faster():
  assert precision.prefers_xla("int8")
  assert not precision.prefers_xla("float32") and not precision.prefers_xla("bfloat16")


def test_bfloat16_weights_give_the_numbers_of_mixed_precision(classifier, features):
  """The bfloat16 copy stores its weights rounded to bfloat16 once; mixed precision rounds
  float32 weights at every call. Same roundings, so the same numbers to the bit."""
  mixed = glue.ClassifierModel(tiny_config(), num_labels=3, dtype="mixed_bfloat16")
  mixed.set_weights(classifier.get_weights())
  other = precision.for_inference(classifier, "bfloat16")
  stored = {w.path: w.dtype for w in other.weights}
  assert all(w.dtype == "float32" for w in mixed.weights)
  assert {n for n, d in stored.items() if d == "float32"} == {
      n for n in stored if "layer_norm" in n or n.endswith("output_bias")}
  assert "bfloat16" in stored.values()
  np.testing.assert_array_equal(other(features, training=False),
                                mixed(features, training=False))
