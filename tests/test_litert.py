"""LiteRT: Keras' own exporter on bert_tf's models, export_litert.py on every export bert_tf
writes (float32 equal to the SavedModel, int8 close to it), its errors, and (opt-in, with a
MediaPipe Python) MediaPipe's TextClassifier serving the .tflite from raw text."""

import json
import os
import subprocess
import zipfile

import numpy as np
import pytest

from conftest import TINY_CKPT, VOCAB_UNCASED, tiny_config
from helpers import run_script, run_script_cases

from bert_tf import checkpoints, export, litert_export
from bert_tf.errors import UserInputError

LABELS = ["contradiction", "entailment", "neutral"]
SEQ = 32
# int8 (dynamic range) against float32 on the tiny model: probabilities and embeddings near
# unit scale; logits of random heads (SQuAD, NER, SWAG) scaled to their magnitude.
INT8_TOLERANCE = 0.05


def ids_batch(shape, seed=0, vocab=30522):
  """Real-looking packed inputs: [CLS] ids [SEP], then padding."""
  rng = np.random.RandomState(seed)
  ids = np.zeros(shape, np.int32)
  mask = np.zeros(shape, np.int32)
  real = shape[-1] - 5
  ids[..., :real] = rng.randint(1000, vocab, size=shape[:-1] + (real,))
  ids[..., 0], ids[..., real - 1] = 101, 102
  mask[..., :real] = 1
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros(shape, np.int32)}


def close(got, want, tolerance):
  """|got - want| within `tolerance` times the values' magnitude (at least 1)."""
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  assert got.shape == want.shape
  scale = max(1.0, float(np.max(np.abs(want))))
  assert float(np.max(np.abs(got - want))) <= tolerance * scale


def run_tflite(path, inputs):
  runner = litert_export.interpreter(path).get_signature_runner()
  return runner(**inputs)


# ------------------------------------------------------------------------------ Keras' exporter

def keras_outputs(model, inputs):
  out = model(inputs, training=False)
  if not isinstance(out, dict):
    return {"output_0": out}
  out = dict(out)
  for index, value in enumerate(out.pop("encoder_outputs", [])):
    out["encoder_output_%d" % index] = value
  return out


def check_keras_litert(model, shape, tmp_path):
  path = str(tmp_path / "model.tflite")
  model.export(path, format="litert", verbose=False)
  inputs = ids_batch(shape, vocab=model.config.vocab_size)
  got, want = run_tflite(path, inputs), keras_outputs(model, inputs)
  assert sorted(got) == sorted(want)
  for name, value in want.items():
    close(got[name], value, 1e-5)


def test_keras_litert_export_of_the_encoder_and_the_classifier(tmp_path):
  from bert_tf.modeling import BertModel
  from bert_tf.tasks.glue.model import ClassifierModel
  encoder = BertModel(tiny_config())
  checkpoints.load_checkpoint(TINY_CKPT, encoder)
  check_keras_litert(encoder, (2, 12), tmp_path)  # encoder_outputs as encoder_output_<i>
  classifier = ClassifierModel(tiny_config(), num_labels=3, dynamic_length=True)
  checkpoints.load_checkpoint(TINY_CKPT, classifier.encoder)
  check_keras_litert(classifier, (3, 16), tmp_path)


@pytest.mark.slow
def test_keras_litert_export_of_the_other_task_models(tmp_path):
  from bert_tf.tasks.ner.model import TokenClassifierModel
  from bert_tf.tasks.squad.model import SquadModel
  from bert_tf.tasks.swag.model import MultipleChoiceModel
  for model, shape in ((SquadModel(tiny_config()), (2, 12)),
                       (TokenClassifierModel(tiny_config(), num_labels=5), (2, 12)),
                       (MultipleChoiceModel(tiny_config(), dynamic_length=True), (2, 4, 12))):
    checkpoints.load_checkpoint(TINY_CKPT, model.encoder)
    check_keras_litert(model, shape, tmp_path)


# ------------------------------------------------------------------------------ export_litert.py

@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  """A tiny export of each kind: classifier, SQuAD, SWAG, NER, text embedder."""
  from bert_tf import text_embedder
  from bert_tf.tasks.glue.export import export_classifier
  from bert_tf.tasks.glue.model import ClassifierModel
  from bert_tf.tasks.ner.export import export_ner
  from bert_tf.tasks.ner.model import TokenClassifierModel
  from bert_tf.tasks.squad.export import export_squad
  from bert_tf.tasks.squad.model import SquadModel
  from bert_tf.tasks.swag.export import export_swag
  from bert_tf.tasks.swag.model import MultipleChoiceModel
  root = tmp_path_factory.mktemp("litert_exports")
  made = {}

  def loaded(model):
    checkpoints.load_checkpoint(TINY_CKPT, model.encoder)
    for head in model.heads:  # heads away from zero, so their outputs mean something
      for weight in head.weights:
        weight.assign(np.random.RandomState(1).normal(0, 0.5, weight.shape).astype(np.float32))
    return model

  made["classifier"] = export_classifier(
      root / "classifier", loaded(ClassifierModel(tiny_config(), num_labels=3,
                                                  dynamic_length=True)),
      VOCAB_UNCASED, True, SEQ, LABELS, text_pair=False)
  made["squad"] = export_squad(root / "squad", loaded(SquadModel(tiny_config())), VOCAB_UNCASED,
                               True, SEQ, 8, 10, 5)
  made["swag"] = export_swag(root / "swag", loaded(MultipleChoiceModel(tiny_config(),
                                                                       dynamic_length=True)),
                             VOCAB_UNCASED, True, SEQ)
  made["ner"] = export_ner(root / "ner", loaded(TokenClassifierModel(tiny_config(),
                                                                     num_labels=5)),
                           VOCAB_UNCASED, True, SEQ, ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"],
                           stride=8)
  embedder = text_embedder.build(TINY_CKPT, "mean", True, SEQ, True, vocab_file=VOCAB_UNCASED,
                                 config=tiny_config())
  made["embedder"] = text_embedder.export_embedder(embedder, root / "embedder")
  return {kind: str(path) for kind, path in made.items()}


def savedmodel_ids(export_dir, inputs):
  import tensorflow as tf
  import tensorflow_text  # noqa: F401
  serve = tf.saved_model.load(export_dir).signatures[export.IDS_SIGNATURE]
  out = {k: v.numpy() for k, v in serve(**{k: tf.constant(v) for k, v in inputs.items()}).items()}
  if "logits" in out and export.read_metadata(export_dir)["task"] == "classification":
    logits = out.pop("logits")
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    out["probabilities"] = shifted / shifted.sum(-1, keepdims=True)
  return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["classifier", "squad", "swag", "ner", "embedder"])
def test_export_litert_matches_the_savedmodel(exports, kind, tmp_path):
  shape = (4, SEQ) if kind == "swag" else (1, SEQ)  # SWAG: one row per choice
  inputs = ids_batch(shape, seed=3)
  want = savedmodel_ids(exports[kind], inputs)
  float32 = litert_export.convert(exports[kind], tmp_path / "f32.tflite")
  assert float32.max_difference <= 1e-5
  got = run_tflite(float32.output_file, inputs)
  assert sorted(got) == sorted(want)
  for name, value in want.items():
    close(got[name], value, 1e-5)
  int8 = litert_export.convert(exports[kind], tmp_path / "int8.tflite", quantize="int8")
  assert int8.size_bytes < 0.6 * float32.size_bytes  # int8 weights
  got8 = run_tflite(int8.output_file, inputs)
  for name, value in want.items():
    close(got8[name], value, INT8_TOLERANCE)
  if kind in ("classifier", "embedder"):  # MediaPipe's fixed length: same numbers
    fixed = litert_export.convert(exports[kind], tmp_path / "fixed.tflite", seq_length=SEQ)
    assert fixed.inputs["input_word_ids"] == [1, SEQ]
    assert float32.inputs["input_word_ids"] == [1, -1]
    for name, value in want.items():
      close(run_tflite(fixed.output_file, inputs)[name], value, 1e-5)


def test_export_litert_refuses_what_it_cannot_convert(tmp_path):
  with pytest.raises(UserInputError, match=r"does not exist"):
    litert_export.read_export(tmp_path / "nope")
  (tmp_path / "plain").mkdir()
  with pytest.raises(UserInputError, match=r"is not a bert_tf export \(no assets.extra/"):
    litert_export.read_export(tmp_path / "plain")
  old = tmp_path / "old" / export.METADATA_DIR
  old.mkdir(parents=True)
  (old / export.METADATA_FILE).write_text(json.dumps({"task": "text_embedder",
                                                      "signatures": {"serving_default": {}}}))
  with pytest.raises(UserInputError, match=r"has no serve_ids signature .* export it again"):
    litert_export.read_export(tmp_path / "old")
  with pytest.raises(UserInputError, match=r"--quantize=int4 is not one of none, int8"):
    litert_export.convert(tmp_path / "old", tmp_path / "x.tflite", quantize="int4")


@pytest.mark.slow
def test_export_litert_command_and_its_mediapipe_checks(exports, tmp_path):
  out = tmp_path / "clf.tflite"
  failures = (
      (["--export_dir=%s" % exports["squad"], "--mediapipe_python=/bin/true"],
       "MediaPipe serves classifiers and text embedders; this export is a squad model"),
      (["--export_dir=%s" % exports["classifier"], "--mediapipe_python=/no/python"],
       "--mediapipe_python=/no/python does not exist"),
      (["--export_dir=%s" % exports["classifier"], "--mediapipe_python=/bin/false"],
       "MediaPipe's metadata writer failed in /bin/false"),
      (["--export_dir=%s" % tmp_path, "--quantize=int8"], "is not a bert_tf export"))
  # The five commands one after another in one process; each failure its own output file.
  outputs = [tmp_path / ("y%d.tflite" % index) for index in range(len(failures))]
  result, *results = run_script_cases("export_litert.py", [
      ["--export_dir=%s" % exports["classifier"], "--output_file=%s" % out, "--quantize=int8"],
      *[["--output_file=%s" % output, *extra] for output, (extra, _) in zip(outputs, failures)]])
  assert result.returncode == 0, result.stderr[-2000:]
  assert "Wrote %s (int8" % out in result.stdout and out.exists()
  for (extra, message), result, output in zip(failures, results, outputs):
    assert result.returncode != 0 and "Traceback" not in result.stderr, extra
    assert message in result.stderr, (extra, result.stderr[-1500:])
    assert not output.exists()
  # The vocab the metadata carries is the export's own, by id.
  vocab = (open(os.path.join(exports["classifier"], export.METADATA_DIR, "vocab.txt"))
           .read().splitlines())
  assert vocab[:4] == open(VOCAB_UNCASED).read().splitlines()[:4] and len(vocab) == 30522


MEDIAPIPE_PYTHON = os.environ.get("BERT_TF_MEDIAPIPE_PYTHON")

_CLASSIFY = """
import json, sys
from mediapipe.tasks import python as mp_python
from mediapipe.tasks.python import text as mp_text
options = mp_text.TextClassifierOptions(
    base_options=mp_python.BaseOptions(model_asset_path=sys.argv[1]), max_results=-1)
with mp_text.TextClassifier.create_from_options(options) as classifier:
  out = []
  for text in json.loads(sys.argv[2]):
    categories = classifier.classify(text).classifications[0].categories
    out.append({c.category_name: c.score for c in categories})
print(json.dumps(out))
"""


@pytest.mark.skipif(not MEDIAPIPE_PYTHON, reason="opt-in: BERT_TF_MEDIAPIPE_PYTHON=a Python with "
                    "mediapipe==0.10.21 (docs/serving.md)")
def test_mediapipe_serves_the_classifier_from_raw_text(exports, tmp_path):
  import tensorflow as tf
  import tensorflow_text  # noqa: F401
  out = tmp_path / "clf.tflite"
  result = run_script("export_litert.py", "--export_dir=%s" % exports["classifier"],
                      "--output_file=%s" % out, "--mediapipe_python=%s" % MEDIAPIPE_PYTHON)
  assert result.returncode == 0, result.stderr[-2000:]
  with zipfile.ZipFile(out) as packed:  # associated files ride in a zip appended to the model
    assert packed.read("vocab.txt").decode().splitlines()[:4] == ["[PAD]", "[unused0]",
                                                                  "[unused1]", "[unused2]"]
  texts = ["The quick brown fox jumps over the lazy dog.", "Hello World! THIS Is Upper Case.",
           "a long sentence " * 12, ""]
  served = subprocess.run([MEDIAPIPE_PYTHON, "-c", _CLASSIFY, str(out), json.dumps(texts)],
                          capture_output=True, text=True, timeout=120)
  assert served.returncode == 0, served.stderr[-2000:]
  got = json.loads(served.stdout.strip().splitlines()[-1])
  want = tf.saved_model.load(exports["classifier"]).signatures["serving_default"](
      text_a=tf.constant(texts))["probabilities"].numpy()
  for row, scores in enumerate(got):
    np.testing.assert_allclose([scores[label] for label in LABELS], want[row], atol=1e-4)
