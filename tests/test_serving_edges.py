"""Serving edges of every export: empty batches, ids outside the model's tables, mismatched
batches (the hostile pass of issue 23)."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints, tfhub_export
from bert_tf.tasks import glue, squad, swag
from bert_tf.tasks.glue.export import export_classifier
from bert_tf.tasks.squad.export import export_squad
from bert_tf.tasks.swag.export import export_swag
from conftest import TINY_CKPT, VOCAB_UNCASED, tiny_config

pytestmark = pytest.mark.slow  # each test writes and loads SavedModels

SEQ = 32


def _loaded(task_model, export, tmp_path, *args, **kwargs):
  model = task_model
  checkpoints.load_checkpoint(TINY_CKPT, model.encoder)
  return tf.saved_model.load(export(str(tmp_path / "export"), model, VOCAB_UNCASED, True, SEQ,
                                    *args, **kwargs))


def _empty_ids(width=SEQ):
  zeros = tf.zeros([0, width], tf.int32)
  return {"input_word_ids": zeros, "input_mask": zeros, "input_type_ids": zeros}


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
  return _loaded(glue.ClassifierModel(tiny_config(), num_labels=2, dynamic_length=True),
                 export_classifier, tmp_path_factory.mktemp("cls"), ["0", "1"], text_pair=True)


def test_classifier_empty_batch_gives_empty_outputs(classifier):
  out = classifier.signatures["serving_default"](text_a=tf.constant([], tf.string),
                                                 text_b=tf.constant([], tf.string))
  assert out["probabilities"].shape == (0, 2) and out["labels"].shape == (0,)
  logits = classifier.signatures["serve_ids"](**_empty_ids())["logits"]
  assert logits.shape == (0, 2)


@pytest.mark.parametrize("name, value, words", [
    ("input_word_ids", -5, "input_word_ids must be >= 0"),
    ("input_word_ids", 30522, "input_word_ids must be < vocab_size"),
    ("input_type_ids", -1, "input_type_ids must be >= 0"),
    ("input_type_ids", 2, "input_type_ids must be < type_vocab_size"),
])
def test_ids_outside_the_tables_are_refused_not_wrapped(classifier, name, value, words):
  ids = {k: tf.ones([1, 4], tf.int32) for k in ("input_word_ids", "input_mask")}
  ids["input_type_ids"] = tf.zeros([1, 4], tf.int32)
  ids[name] = tf.tensor_scatter_nd_update(ids[name], [[0, 1]], [value])
  with pytest.raises(tf.errors.InvalidArgumentError, match=words):
    classifier.signatures["serve_ids"](**ids)


def test_text_a_and_text_b_of_different_batch_sizes_say_so(classifier):
  with pytest.raises(tf.errors.InvalidArgumentError, match="same batch size"):
    classifier.signatures["serving_default"](text_a=tf.constant(["a", "b"]),
                                             text_b=tf.constant(["c"]))


def test_squad_empty_batch(tmp_path):
  loaded = _loaded(squad.SquadModel(tiny_config()), export_squad, tmp_path, 8, 8, 10, 5)
  out = loaded.signatures["serving_default"](question=tf.constant([], tf.string),
                                             context=tf.constant([], tf.string))
  assert all(value.shape[0] == 0 for value in out.values()), {k: v.shape for k, v in out.items()}
  start = loaded.signatures["serve_ids"](**_empty_ids())["start_logits"]
  assert start.shape[0] == 0


def test_swag_empty_batch(tmp_path):
  loaded = _loaded(swag.MultipleChoiceModel(tiny_config()), export_swag, tmp_path)
  empty = tf.constant([], tf.string)
  out = loaded.signatures["serving_default"](
      context=empty, **{"ending%d" % i: empty for i in range(swag.NUM_CHOICES)})
  assert out["probabilities"].shape == (0, swag.NUM_CHOICES)
  logits = loaded.signatures["serve_ids"](**_empty_ids())["logits"]  # rows [batch * 4, seq]
  assert logits.shape == (0, swag.NUM_CHOICES)


def test_tfhub_encoder_and_preprocessor_empty_batch(tmp_path):
  from bert_tf.modeling import BertModel
  encoder = BertModel(tiny_config())
  checkpoints.load_checkpoint(TINY_CKPT, encoder)
  tfhub_export.export_encoder(str(tmp_path / "encoder"), encoder, VOCAB_UNCASED, True)
  tfhub_export.export_preprocessor(str(tmp_path / "pre"), VOCAB_UNCASED, True, seq_length=SEQ)
  hub_encoder = tf.saved_model.load(str(tmp_path / "encoder"))
  preprocessor = tf.saved_model.load(str(tmp_path / "pre"))
  packed = preprocessor(tf.constant([], tf.string))
  assert packed["input_word_ids"].shape == (0, SEQ)
  outputs = hub_encoder(packed)
  assert outputs["pooled_output"].shape == (0, 32)
  assert outputs["sequence_output"].shape == (0, SEQ, 32)
  np.testing.assert_array_equal(outputs["pooled_output"].numpy(), np.zeros((0, 32)))
