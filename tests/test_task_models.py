"""The four task models as Keras models: their loss is the original's and the training loop's,
`compile` + `fit` train on it, and they survive a .keras file.

Batches come from the original code's reference runs (tests/fixtures/model_forward) where
they exist, so the loss is checked against the number the original computed; SWAG (which
the original never shipped) uses a random batch.
"""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints, optimization, training
from bert_tf.config import BertConfig
from bert_tf.data import input_pipeline
from bert_tf.tasks import glue, pretraining, squad, swag
from helpers import FIXTURES, TINY, VOCAB_UNCASED, assert_float32_close, float32_approx, tiny_config

FORWARD = FIXTURES / "model_forward"
NODROPOUT_CONFIG = str(FIXTURES / "optimizer" / "bert_config_nodropout.json")
LOSS_ATOL = 1e-4  # against the original's numbers, as tests/test_modeling.py


def _classifier():
  ref = np.load(FORWARD / "classifier_head_forward.npz")
  batch = {"input_word_ids": ref["in.input_ids"], "input_mask": ref["in.input_mask"],
           "input_type_ids": ref["in.segment_ids"], "label_ids": ref["in.labels"][:, None],
           "is_real_example": np.ones((4, 1), np.int32)}
  head = FIXTURES / "checkpoint" / "classifier_head_3labels" / "head.ckpt"
  return glue.ClassificationTask(tiny_config(), 3), batch, head, float(ref["loss"])


def _regression():
  task, batch, _, _ = _classifier()
  batch = dict(batch, label_ids=np.array([[0.5], [4.0], [2.25], [1.0]], np.float32),
               is_real_example=np.array([[1], [1], [0], [1]], np.int32))
  return glue.ClassificationTask(tiny_config(), 1, regression=True), batch, None, None


def _squad():
  ref = np.load(FORWARD / "squad_head_forward.npz")
  k = "train_v2_first6.in."
  batch = {"input_word_ids": ref[k + "input_ids"], "input_mask": ref[k + "input_mask"],
           "input_type_ids": ref[k + "segment_ids"],
           "start_positions": ref[k + "start_position"][:, None],
           "end_positions": ref[k + "end_position"][:, None]}
  head = FIXTURES / "checkpoint" / "squad_head" / "head.ckpt"
  loss = float(ref["train_v2_first6.total_loss_model_fn_TRAIN_nodropout"])
  return squad.SquadTask(tiny_config()), batch, head, loss


def _swag():
  """Records as run_swag writes them: [B, NUM_CHOICES * S], choice-major."""
  rng = np.random.default_rng(5)
  lengths = rng.integers(4, 17, (3, swag.NUM_CHOICES))
  mask = (np.arange(16)[None, None, :] < lengths[:, :, None]).astype(np.int32)
  batch = {"input_word_ids": (rng.integers(1000, 2000, mask.shape) * mask).reshape(3, -1),
           "input_mask": mask.reshape(3, -1),
           "input_type_ids": ((np.arange(16) >= 5) * mask).reshape(3, -1).astype(np.int32),
           "label_ids": np.array([[0], [3], [1]], np.int32),
           "is_real_example": np.array([[1], [1], [0]], np.int32)}
  return swag.MultipleChoiceTask(tiny_config()), batch, None, None


def _pretraining():
  ref = np.load(FORWARD / "pretrain_heads_forward.npz")
  batch = input_pipeline.to_model_names(
      {k[len("A.in."):]: v for k, v in ref.items() if k.startswith("A.in.")})
  batch["next_sentence_labels"] = batch["next_sentence_labels"][:, None]
  loss = float(ref["A.mlm_loss"]) + float(ref["A.nsp_loss"])
  return pretraining.PretrainingTask(tiny_config()), batch, None, loss


CASES = {"classifier": _classifier, "regression": _regression, "squad": _squad, "swag": _swag,
         "pretraining": _pretraining}


def _model(task, head_checkpoint):
  """The task's model with the tiny reference encoder (and the reference head, if any)."""
  model = task.create_model()
  checkpoints.load_checkpoint(TINY.ckpt, model.encoder,
                              model.heads if isinstance(task, pretraining.PretrainingTask) else ())
  if head_checkpoint is not None:
    checkpoints.load_checkpoint(head_checkpoint, heads=model.heads)
  return model


def _trainer_loss(task, model, batch):
  """The training loop's loss of one batch: sum over terms of numerator / (denominator + eps)."""
  numerators = task.loss_numerators(model, batch, training=False)
  denominators = task.loss_denominators(batch)
  return sum(float(numerators[k]) / (float(denominators[k]) + task.loss_epsilons[k])
             for k in numerators)


def _dataset(batch):
  return tf.data.Dataset.from_tensors({k: tf.constant(v) for k, v in batch.items()}).repeat()


@pytest.mark.parametrize("name", sorted(CASES))
def test_compute_loss_is_the_training_loops_loss_and_the_originals(name):
  task, batch, head, original = CASES[name]()
  model = _model(task, head)
  x = task.model_features(batch)
  loss = float(model.compute_loss(x=x, y_pred=model(x, training=False), training=False))
  # float32 against the loop's float64 division: an ulp or two apart (1e-6 at 11 is one ulp).
  assert loss == float32_approx(_trainer_loss(task, model, batch))
  if original is not None:
    assert loss == pytest.approx(original, abs=LOSS_ATOL)
  # Without y_pred it runs the model itself.
  assert float(model.compute_loss(x=x, training=False)) == float32_approx(loss)


def test_the_loss_weights_count_only_real_examples():
  """Hand-worked: a padding example (is_real_example=0) does not enter the mean."""
  task, batch, _, _ = _regression()
  model = _model(task, None)
  predictions = np.reshape(model(batch), -1)
  labels = batch["label_ids"][:, 0]
  want = np.mean(((predictions - labels) ** 2)[[0, 1, 3]])
  assert float(model.compute_loss(x=batch, y_pred=model(batch))) == pytest.approx(want, rel=1e-6)


def test_labels_and_weights_come_from_the_features():
  task, batch, _, _ = _classifier()
  model = _model(task, None)
  with pytest.raises(ValueError, match="features dict"):
    model.compute_loss(x=batch, y=batch["label_ids"], y_pred=model(batch))


def test_multiple_choice_model_takes_choices_and_rejects_the_record_layout():
  task, batch, _, _ = _swag()
  model = _model(task, None)
  x = task.model_features(batch)
  assert x["input_word_ids"].shape == (3, swag.NUM_CHOICES, 16)
  np.testing.assert_array_equal(x["input_mask"][1, 2], batch["input_mask"][1, 32:48])
  scores = model(x)
  assert scores.shape == (3, swag.NUM_CHOICES)
  # Choice by choice through the encoder and the head: the same scores.
  for choice in range(swag.NUM_CHOICES):
    pooled = model.encoder({k: x[k][:, choice] for k in ("input_word_ids", "input_mask",
                                                          "input_type_ids")})["pooled_output"]
    np.testing.assert_allclose(scores[:, choice], np.asarray(pooled) @ model.choice.output_weights
                               .numpy()[0], atol=1e-5)
  with pytest.raises(ValueError, match=r"\[batch, choices, seq\]"):
    model(batch)


@pytest.mark.parametrize("make", [
    lambda **kw: glue.ClassifierModel(tiny_config(), num_labels=1, regression=True, **kw),
    lambda **kw: squad.SquadModel(tiny_config(), use_one_hot_embeddings=True, **kw),
    lambda **kw: swag.MultipleChoiceModel(tiny_config(), **kw),
    lambda **kw: pretraining.PretrainingModel(tiny_config(), **kw),
])
@pytest.mark.parametrize("dtype", [None, "mixed_bfloat16"])
def test_every_task_model_round_trips_through_its_plain_config(make, dtype):
  import json
  model = make(dtype=dtype, dynamic_length=True, length_bucket=16, name="m")
  config = json.loads(json.dumps(keras.saving.serialize_keras_object(model)))
  rebuilt = keras.saving.deserialize_keras_object(config)
  assert type(rebuilt) is type(model)
  assert rebuilt.get_config() == model.get_config()
  assert rebuilt.dtype_policy.name == model.dtype_policy.name == (dtype or "float32")
  assert rebuilt.encoder.dtype_policy.name == model.dtype_policy.name
  assert (rebuilt.dynamic_length, rebuilt.length_bucket) == (model.dynamic_length, 16)
  assert [h.name for h in rebuilt.heads] == [h.name for h in model.heads]


def _outputs(model, x):
  return [np.asarray(t) for t in tf.nest.flatten(model(x, training=False))]


def test_keras_compiles_only_fixed_length_models_with_xla():
  """A cut length computed from the mask inside Keras' XLA train_step would compile at every
  batch; so a dynamic-length model refuses jit_compile (graph mode) and a fixed one keeps it."""
  for dynamic, expected in ((True, False), (False, True)):
    model = glue.ClassifierModel(tiny_config(), num_labels=2, dynamic_length=dynamic)
    with warnings.catch_warnings(record=True):
      warnings.simplefilter("always")
      model.compile(optimizer=keras.optimizers.SGD(0.0), jit_compile=True)
    assert model.jit_compile is expected


@pytest.mark.slow
@pytest.mark.parametrize("name", ["classifier", "squad", "swag", "pretraining"])
def test_compile_fit_and_a_keras_file(name, tmp_path):
  keras.utils.set_random_seed(3)
  task, batch, head, _ = CASES[name]()
  model = _model(task, head)
  x = task.model_features(batch)
  trained = [model.encoder.embeddings.word_embeddings] + [w for h in model.heads
                                                           for w in h.weights]
  before = [w.numpy().copy() for w in trained]
  model.compile(optimizer=keras.optimizers.Adam(1e-3))
  history = model.fit(_dataset(x), steps_per_epoch=2, epochs=1, verbose=0, shuffle=False)
  assert len(history.history["loss"]) == 1 and np.isfinite(history.history["loss"][0])
  for weight, old in zip(trained, before):
    assert not np.array_equal(weight.numpy(), old), weight.path

  want = _outputs(model, x)
  path = tmp_path / ("%s.keras" % name)
  model.save(path)
  loaded = keras.saving.load_model(path)
  assert type(loaded) is type(model)
  assert loaded.get_config() == model.get_config()
  for got, expected in zip(_outputs(loaded, x), want):
    assert_float32_close(got, expected, atol=1e-6)
  # Still the training loop's model: Google names, and the same loss.
  assert checkpoints.variable_map(loaded.encoder, loaded.heads).keys() == \
      checkpoints.variable_map(model.encoder, model.heads).keys()
  assert _trainer_loss(task, loaded, batch) == float32_approx(_trainer_loss(task, model, batch))


@pytest.mark.slow
def test_fit_steps_on_the_training_loops_loss():
  """Without dropout, fit's first loss is the Trainer's first loss on the same batch."""
  task, batch, _, _ = _pretraining()
  config = BertConfig.from_json_file(NODROPOUT_CONFIG)
  task = pretraining.PretrainingTask(config)
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  with strategy.scope():
    model = _model(task, None)
    names = checkpoints.variable_map(model.encoder, model.heads)
    optimizer = optimization.create_optimizer(1e-3, 10, 2, names)
  step = training.TrainStep(strategy, task, model, optimizer)
  trainer_loss = float(step.step(iter(_dataset(batch)))["loss"])

  fitted = _model(task, None)
  fitted.compile(optimizer=keras.optimizers.SGD(0.0))
  history = fitted.fit(_dataset(batch), steps_per_epoch=1, epochs=1, verbose=0,
                       shuffle=False)
  assert history.history["loss"][0] == float32_approx(trainer_loss)


# The record layouts: each task states its spec once and encodes through it.

def _read_back(tmp_path, records, spec):
  """The records written to a file and read by the runners' data path, as numpy."""
  from bert_tf.data import example_codec
  path = str(tmp_path / "records.tf_record")
  example_codec.write_records(path, records)
  input_pipeline.check_record_files([path], spec)
  batch = next(iter(input_pipeline.record_dataset([path], spec, 8, is_training=False)))
  return {k: v.numpy() for k, v in batch.items()}


def _tokenizer():
  from bert_tf import tokenization
  return tokenization.FullTokenizer(VOCAB_UNCASED)


def test_glue_records_of_both_kinds_and_the_tpu_padding_read_back(tmp_path):
  tokenizer = _tokenizer()
  for labels, label, want in ((["0", "1"], "1", 1), (None, "3.25", 3.25)):
    examples = [glue.InputExample("x", "the cat sat", "on the mat", label),
                glue.PaddingInputExample()]
    records = [glue.encode_features(glue.convert_single_example(i, e, labels, 12, tokenizer))
               for i, e in enumerate(examples)]
    got = _read_back(tmp_path, records, glue.feature_spec(12, regression=labels is None))
    assert got["label_ids"][:, 0].tolist() == [want, 0]
    assert got["is_real_example"][:, 0].tolist() == [1, 0]
    assert got["input_mask"].sum(axis=1).tolist() == [9, 0]


def test_squad_and_swag_records_read_back(tmp_path):
  tokenizer = _tokenizer()
  example = squad.SquadExample("q", "who sat", ["the", "cat", "sat"], "cat", 1, 1)
  for is_training in (True, False):
    features = []
    squad.convert_examples_to_features([example], tokenizer, 16, 8, 4, is_training,
                                       features.append)
    got = _read_back(tmp_path, [squad.encode_feature(f, is_training) for f in features],
                     squad.feature_spec(16, is_training))
    assert got["unique_ids"][:, 0].tolist() == [squad.FIRST_UNIQUE_ID]
    assert ("start_positions" in got) == is_training
    if is_training:  # [CLS] who sat [SEP] the cat sat [SEP]: "cat" is position 5
      assert (got["start_positions"][0, 0], got["end_positions"][0, 0]) == (5, 5)
  swag_example = swag.SwagExample("s", "the cat", ["sat", "ran", "ate", "slept"], 2)
  got = _read_back(tmp_path, [swag.encode_features(swag.convert_example(swag_example, 8,
                                                                        tokenizer))],
                   swag.feature_spec(8))
  choices = swag.to_choices(got)
  assert choices["input_word_ids"].shape == (1, swag.NUM_CHOICES, 8)
  assert tokenizer.convert_ids_to_tokens(list(np.asarray(choices["input_word_ids"][0, 3])))[:6] \
      == ["[CLS]", "the", "cat", "[SEP]", "slept", "[SEP]"]
  assert got["label_ids"][0, 0] == 2


def test_a_record_that_does_not_fit_its_layout_is_not_written():
  spec = glue.feature_spec(4)
  values = {"input_ids": [1, 2, 0, 0], "input_mask": [1, 1, 0, 0], "segment_ids": [0] * 4,
            "label_ids": [1], "is_real_example": [1]}
  assert input_pipeline.encode_record(spec, values)
  with pytest.raises(ValueError, match="input_mask has 3 values; the layout declares 4"):
    input_pipeline.encode_record(spec, dict(values, input_mask=[1, 1, 0]))
  with pytest.raises(ValueError, match="do not match the layout"):
    input_pipeline.encode_record(spec, dict(values, label=[1]))
