"""Serving edges of every export: empty batches, ids outside the model's tables, mismatched
batches, text that is not UTF-8 (the hostile passes of issue 23 and after)."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf.export import tfhub
from bert_tf.tasks import glue, squad, swag
from bert_tf.tasks.glue.export import export_classifier
from bert_tf.tasks.squad.export import export_squad
from bert_tf.tasks.swag.export import export_swag
from helpers import TINY, VOCAB_UNCASED, tiny_config

pytestmark = pytest.mark.slow  # each test writes and loads SavedModels

SEQ = 32


def _loaded(task_model, export, tmp_path, *args, **kwargs):
  model = task_model
  checkpoints.load_checkpoint(TINY.ckpt, model.encoder)
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


def _ids(width=4, **changes):
  """One row of ids (word id 1, type 0) with {name: (position, value)} changed."""
  ones = tf.ones([1, width], tf.int32)
  ids = {"input_word_ids": ones, "input_mask": ones, "input_type_ids": tf.zeros_like(ones)}
  for name, (position, value) in changes.items():
    ids[name] = tf.tensor_scatter_nd_update(ids[name], [[0, position]], [value])
  return ids


def _refused(serve, ids, message):
  """`serve(**ids)` fails with exactly `message` (one line) as the assertion's text."""
  with pytest.raises(tf.errors.InvalidArgumentError) as info:
    serve(**ids)
  assert "assertion failed: [%s]" % message in info.value.message, info.value.message


# The tiny model: vocab_size 30522, type_vocab_size 2, max_position_embeddings 64.
ID_CASES = [
    ({"input_word_ids": (1, 40000)}, "input_word_ids holds id 40000, the vocab has 30522 entries"),
    ({"input_word_ids": (1, 30522)}, "input_word_ids holds id 30522, the vocab has 30522 entries"),
    ({"input_word_ids": (1, -5)}, "input_word_ids holds id -5; ids must not be negative"),
    ({"input_type_ids": (1, 2)}, "input_type_ids holds type id 2, type_vocab_size is 2"),
    ({"input_type_ids": (1, -1)}, "input_type_ids holds type id -1; type ids must not be negative"),
]


@pytest.mark.parametrize("changes, message", ID_CASES)
def test_ids_outside_the_tables_are_refused_not_wrapped(classifier, changes, message):
  _refused(classifier.signatures["serve_ids"], _ids(**changes), message)


def test_ids_longer_than_the_position_table_say_both_lengths(classifier):
  serve = classifier.signatures["serve_ids"]
  _refused(serve, _ids(width=65), "sequence length 65 exceeds max_position_embeddings 64")
  assert serve(**_ids(width=64))["logits"].shape == (1, 2)  # the longest allowed


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
  for changes, message in ID_CASES:  # the one shared check, in every export's ids signature
    _refused(loaded.signatures["serve_ids"], _ids(**changes), message)
  _refused(loaded.signatures["serve_ids"], _ids(width=65),
           "sequence length 65 exceeds max_position_embeddings 64")


def test_swag_empty_batch(tmp_path):
  loaded = _loaded(swag.MultipleChoiceModel(tiny_config()), export_swag, tmp_path)
  empty = tf.constant([], tf.string)
  out = loaded.signatures["serving_default"](
      context=empty, **{"ending%d" % i: empty for i in range(swag.NUM_CHOICES)})
  assert out["probabilities"].shape == (0, swag.NUM_CHOICES)
  logits = loaded.signatures["serve_ids"](**_empty_ids())["logits"]  # rows [batch * 4, seq]
  assert logits.shape == (0, swag.NUM_CHOICES)
  four = {name: tf.tile(value, [swag.NUM_CHOICES, 1]) for name, value in
          _ids(input_word_ids=(2, 40000)).items()}
  _refused(loaded.signatures["serve_ids"], four,
           "input_word_ids holds id 40000, the vocab has 30522 entries")


def test_tfhub_encoder_and_preprocessor_empty_batch(tmp_path):
  from bert_tf.modeling import BertModel
  encoder = BertModel(tiny_config())
  checkpoints.load_checkpoint(TINY.ckpt, encoder)
  tfhub.export_encoder(str(tmp_path / "encoder"), encoder, VOCAB_UNCASED, True)
  tfhub.export_preprocessor(str(tmp_path / "pre"), VOCAB_UNCASED, True, seq_length=SEQ)
  hub_encoder = tf.saved_model.load(str(tmp_path / "encoder"))
  preprocessor = tf.saved_model.load(str(tmp_path / "pre"))
  packed = preprocessor(tf.constant([], tf.string))
  assert packed["input_word_ids"].shape == (0, SEQ)
  outputs = hub_encoder(packed)
  assert outputs["pooled_output"].shape == (0, 32)
  assert outputs["sequence_output"].shape == (0, SEQ, 32)
  np.testing.assert_array_equal(outputs["pooled_output"].numpy(), np.zeros((0, 32)))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"input_word_ids holds id 40000, the vocab has 30522 entries\]"):
    hub_encoder(_ids(input_word_ids=(1, 40000)))


@pytest.fixture(scope="module")
def ner_export(tmp_path_factory):
  """A NER export whose head tags every word I-LOC (so entities follow the word split)."""
  from bert_tf.tasks import ner
  from bert_tf.tasks.ner.export import export_ner
  model = ner.TokenClassifierModel(tiny_config(), num_labels=3)
  checkpoints.load_checkpoint(TINY.ckpt, model.encoder)
  kernel, bias = model.ner.weights
  kernel.assign(np.zeros(kernel.shape, np.float32))
  bias.assign(np.array([0.0, 0.0, 5.0], np.float32))
  path = export_ner(tmp_path_factory.mktemp("ner") / "export", model, VOCAB_UNCASED, True, 16,
                    ["O", "B-LOC", "I-LOC"], stride=4)
  return tf.saved_model.load(str(path))


def _entities(out, row):
  count = int(out["entity_count"][row])
  return [(out["entity_texts"][row][i].numpy(), int(out["entity_starts"][row][i]),
           int(out["entity_ends"][row][i]), out["entity_types"][row][i].numpy())
          for i in range(count)]


def test_ner_export_refuses_text_that_is_not_utf8_naming_the_row(ner_export):
  serve = ner_export.signatures["serving_default"]
  for bad in (b"Pa\xc3ris", b"New \xff York", b"\xed\xa0\x80 surrogate", b"cut \xe4\xb8"):
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
      serve(text=tf.constant([b"New York", bad]))
    assert ("assertion failed: [text row 1 is not valid UTF-8; send UTF-8 text (decoding with "
            "errors=ignore drops the bad bytes, as the other exports do)]") in info.value.message
  # Valid text is served as before: each word I-LOC, so one entity over the whole text.
  out = serve(text=tf.constant(["New York", "caf\u00e9 \u4e2d", ""]))
  assert _entities(out, 0) == [(b"New York", 0, 8, b"LOC")]
  assert _entities(out, 1) == [("caf\u00e9 \u4e2d".encode(), 0, 9, b"LOC")]
  assert _entities(out, 2) == []
  assert serve(text=tf.constant([], tf.string))["entity_count"].shape == (0,)


def test_ner_export_reads_past_a_nul_byte(ner_export):
  """The original's tokenizer deletes NUL; the raw-text split used to stop at it, dropping the
  rest of the row."""
  serve = ner_export.signatures["serving_default"]
  out = serve(text=tf.constant([b"New\x00York is big", b"NewYork is big"]))
  with_nul, without = _entities(out, 0), _entities(out, 1)
  assert with_nul == [(b"New\x00York is big", 0, 15, b"LOC")]
  assert without == [(b"NewYork is big", 0, 14, b"LOC")]
  # Two rows of one batch: a kernel's main and tail blocks may round the last bit apart.
  assert float(out["entity_scores"][0][0]) == pytest.approx(float(out["entity_scores"][1][0]),
                                                            abs=1e-6)
