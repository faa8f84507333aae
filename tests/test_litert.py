"""LiteRT: Keras' own exporter on bert_tf's models, export_litert.py on every export bert_tf
writes (float32 equal to the SavedModel, int8 close to it), its errors, and (opt-in, with a
MediaPipe Python) MediaPipe's TextClassifier serving the .tflite from raw text."""

import functools
import json
import os
import shutil
import zipfile

import numpy as np
import pytest

from bert_tf import checkpoints, export
from bert_tf.errors import UserInputError
from bert_tf.export import litert
from helpers import (
  PROGRAMS,
  TINY,
  VOCAB_UNCASED,
  printed_json,
  run_script,
  tiny_config,
  with_tiny_weights,
)

LABELS = ["contradiction", "entailment", "neutral"]
# An own-data multi-label run's names: spaces, punctuation and non-ASCII are names too.
MULTI_LABELS = ["billing", "bug report", "débit, carte"]
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
  runner = litert.interpreter(path).get_signature_runner()
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
  checkpoints.load_checkpoint(TINY.ckpt, encoder)
  check_keras_litert(encoder, (2, 12), tmp_path)  # encoder_outputs as encoder_output_<i>
  classifier = ClassifierModel(tiny_config(), num_labels=3, dynamic_length=True)
  checkpoints.load_checkpoint(TINY.ckpt, classifier.encoder)
  check_keras_litert(classifier, (3, 16), tmp_path)


@pytest.mark.slow
def test_keras_litert_export_of_the_other_task_models(tmp_path):
  from bert_tf.tasks.ner.model import TokenClassifierModel
  from bert_tf.tasks.squad.model import SquadModel
  from bert_tf.tasks.swag.model import MultipleChoiceModel
  for model, shape in ((SquadModel(tiny_config()), (2, 12)),
                       (TokenClassifierModel(tiny_config(), num_labels=5), (2, 12)),
                       (MultipleChoiceModel(tiny_config(), dynamic_length=True), (2, 4, 12))):
    checkpoints.load_checkpoint(TINY.ckpt, model.encoder)
    check_keras_litert(model, shape, tmp_path)


# ------------------------------------------------------------------------------ export_litert.py

with_weights = functools.partial(with_tiny_weights, head_scale=0.5)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  """A tiny export of each kind: classifier, SQuAD, SWAG, NER, text embedder."""
  from bert_tf.inference import text_embedder, text_embedder_export
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
  loaded = with_weights
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
  embedder = text_embedder.build(TINY.ckpt, "mean", True, SEQ, True, vocab_file=VOCAB_UNCASED,
                                 config=tiny_config())
  made["embedder"] = text_embedder_export.export_embedder(embedder, root / "embedder")
  return {kind: str(path) for kind, path in made.items()}


@functools.lru_cache(maxsize=None)
def serve_ids(export_dir):
  """The export's ids signature, loaded once per export."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401
  return tf.saved_model.load(export_dir).signatures[export.IDS_SIGNATURE]


def savedmodel_ids(export_dir, inputs):
  import tensorflow as tf
  serve = serve_ids(export_dir)
  out = {k: v.numpy() for k, v in serve(**{k: tf.constant(v) for k, v in inputs.items()}).items()}
  if "logits" in out and export.read_metadata(export_dir)["task"] == "classification":
    logits = out.pop("logits")
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    out["probabilities"] = shifted / shifted.sum(-1, keepdims=True)
  return out


def check_ids_outside_the_tables(export_dir, tflite, inputs):
  """An id or type id outside the model's tables: the SavedModel refuses the request, the
  .tflite answers NaN (LiteRT has no Assert op), never another token's numbers."""
  import tensorflow as tf
  serve = serve_ids(export_dir)
  tflite = litert.interpreter(tflite).get_signature_runner()
  for name, position, value in (("input_word_ids", 3, -1), ("input_word_ids", 3, 30522),
                                ("input_word_ids", 3, 10 ** 9), ("input_type_ids", 2, 2),
                                ("input_type_ids", 2, -1)):
    bad = {k: v.copy() for k, v in inputs.items()}
    bad[name][..., position] = value
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"input_(word|type)_ids holds"):
      serve(**{k: tf.constant(v) for k, v in bad.items()})
    got = tflite(**bad)
    assert got and all(np.isnan(v).all() for v in got.values()), (name, value)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["classifier", "squad", "swag", "ner", "embedder"])
def test_export_litert_matches_the_savedmodel(exports, kind, tmp_path):
  shape = (4, SEQ) if kind == "swag" else (1, SEQ)  # SWAG: one row per choice
  inputs = ids_batch(shape, seed=3)
  want = savedmodel_ids(exports[kind], inputs)
  float32 = litert.convert(exports[kind], tmp_path / "f32.tflite")
  assert float32.max_difference <= 1e-5  # absolute: SQuAD logits are a few units
  got = run_tflite(float32.output_file, inputs)
  assert sorted(got) == sorted(want)
  for name, value in want.items():
    close(got[name], value, 1e-6)
  record, made = (litert.read_tflite_metadata(float32.output_file),
                  export.read_metadata(exports[kind]))
  assert record["task"] == made["task"] and record.get("labels") == made.get("labels")
  assert "signatures" not in record and record["litert"]["seq_length"] is None
  check_ids_outside_the_tables(exports[kind], float32.output_file, inputs)
  int8 = litert.convert(exports[kind], tmp_path / "int8.tflite", quantize="int8")
  assert int8.size_bytes < 0.6 * float32.size_bytes  # int8 weights
  got8 = run_tflite(int8.output_file, inputs)
  for name, value in want.items():
    close(got8[name], value, INT8_TOLERANCE)
  if kind in ("classifier", "embedder"):  # MediaPipe's fixed length: same numbers
    fixed = litert.convert(exports[kind], tmp_path / "fixed.tflite", seq_length=SEQ)
    assert fixed.inputs["input_word_ids"] == [1, SEQ]
    assert float32.inputs["input_word_ids"] == [1, -1]
    for name, value in want.items():
      close(run_tflite(fixed.output_file, inputs)[name], value, 1e-6)


MULTI_SEQ = 16
MULTI_THRESHOLD = 0.45
TEXTS = ["The quick brown fox jumps over the lazy dog.", "my card was charged twice",
         "the app crashes when I open settings", "Hello World! THIS Is Upper Case.",
         "a long sentence " * 12, ""]


@pytest.fixture(scope="module")
def multi_label_export(tmp_path_factory):
  """A tiny own-data multi-label export, as run_classifier --export_dir writes one."""
  from bert_tf.tasks.own_data.export import export_own_data
  from bert_tf.tasks.own_data.labels import Schema
  from bert_tf.tasks.own_data.model import OwnDataModel
  model = with_weights(OwnDataModel(tiny_config(), num_labels=3, problem_type="multi_label",
                                    dynamic_length=True))
  return str(export_own_data(tmp_path_factory.mktemp("litert_own") / "multi", model,
                             VOCAB_UNCASED, True, MULTI_SEQ, Schema("multi_label", MULTI_LABELS),
                             text_pair=False, threshold=MULTI_THRESHOLD))


def packed_ids(texts, seq_length):
  """Each text's ids as bert_tf's tokenizer packs them, one request of one row a text."""
  from bert_tf import tokenization
  from bert_tf.data import packing
  tokenizer = tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case=True)
  for text in texts:
    packed = packing.pack_tokens(tokenizer.tokenize(text), None, seq_length, tokenizer)
    pad = [0] * (seq_length - len(packed.input_ids))
    yield {name: np.array([list(row) + pad], np.int32) for name, row in (
        ("input_word_ids", packed.input_ids), ("input_mask", packed.input_mask),
        ("input_type_ids", packed.segment_ids))}


@pytest.mark.slow
def test_export_litert_of_a_multi_label_export_answers_probabilities_and_names(
    multi_label_export, tmp_path):
  """The .tflite answers each label's sigmoid, as the SavedModel from raw text, and names
  the labels and the threshold: the names over it are the SavedModel's `labels`."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401
  served = tf.saved_model.load(multi_label_export).signatures["serving_default"](
      text_a=tf.constant(TEXTS))
  want = served["probabilities"].numpy()
  want_names = [[n.decode() for n in row if n] for row in served["labels"].numpy()]
  conversion = litert.convert(multi_label_export, tmp_path / "multi.tflite",
                                     seq_length=MULTI_SEQ)
  assert conversion.outputs == ["probabilities"] and conversion.max_difference <= 1e-5
  runner = litert.interpreter(conversion.output_file).get_signature_runner()
  got = np.concatenate([runner(**ids)["probabilities"] for ids in packed_ids(TEXTS, MULTI_SEQ)])
  close(got, want, 1e-6)
  assert not np.allclose(got.sum(-1), 1.0)  # sigmoids, not a softmax
  record = litert.read_tflite_metadata(conversion.output_file)
  assert record["task"] == "multi_label" and record["labels"] == MULTI_LABELS
  assert record["threshold"] == MULTI_THRESHOLD and "sigmoid" in record["outputs"][
      "probabilities"]
  assert record["litert"] == {"quantize": "none", "seq_length": MULTI_SEQ,
                              "first_window_only": False}
  names = [[record["labels"][i] for i in np.flatnonzero(row > np.float32(record["threshold"]))]
           for row in got]
  assert names == want_names
  assert 0 < sum(map(len, names)) < got.size  # the threshold picks some labels, not all


def test_mediapipe_metadata_of_each_problem_type():
  """Single- and multi-label classifiers get a labels file of their names in output order;
  a multi-label one a score threshold keeping what the export predicts; a regression, or a
  name no labels file line can hold, is refused in one line."""
  single = {"task": "classification", "labels": LABELS, "do_lower_case": True}
  multi = {"task": "multi_label", "labels": MULTI_LABELS, "threshold": 0.4,
           "do_lower_case": True}
  for metadata in (single, multi):
    assert litert.check_mediapipe(metadata) == "classifier"
    assert litert.mediapipe_labels_file(metadata).split("\n") == metadata["labels"] + [""]
  assert litert.check_mediapipe({"task": "text_embedder"}) == "embedder"
  assert litert.mediapipe_score_threshold(single) is None  # every label's probability
  threshold = litert.mediapipe_score_threshold(multi)
  # MediaPipe keeps a score s when s >= threshold; the export predicts s > float32(0.4).
  scores = np.float32([0.4, np.nextafter(np.float32(0.4), np.float32(1)), 0.39999, 0.41, 1.0])
  np.testing.assert_array_equal(scores >= np.float32(threshold), scores > np.float32(0.4))
  assert np.float32(threshold) == threshold  # a float32 value: the metadata stores float32
  with pytest.raises(UserInputError, match=r"^A regression export answers a score, not a "
                     r"class: .* read `predictions` from the .tflite"):
    litert.check_mediapipe({"task": "regression", "labels": None})
  for bad in ("two\nlines", "cr\r", ""):
    with pytest.raises(UserInputError, match=r"cannot be a line of MediaPipe's labels file .* "
                       r"read the names from the .tflite's bert_tf_export metadata"):
      litert.check_mediapipe(dict(multi, labels=["ok", bad]))
  with pytest.raises(UserInputError, match=r"takes one text; this export classifies text pairs"):
    litert.check_mediapipe(dict(multi, text_pair=True))


def test_litert_outputs_are_the_savedmodels_answers():
  """From the ids signature's outputs: a classifier's softmax, a multi-label one's sigmoids,
  a regression's score alone (its logits are the same number); the others as they are."""
  import tensorflow as tf
  logits = tf.constant([[2.0, -1.0, 0.0]])
  np.testing.assert_allclose(litert._outputs("classification")({"logits": logits})[
      "probabilities"], [np.exp([2, -1, 0]) / np.exp([2, -1, 0]).sum()], rtol=1e-6)
  np.testing.assert_allclose(litert._outputs("multi_label")({"logits": logits})[
      "probabilities"], [1 / (1 + np.exp([-2, 1, 0]))], rtol=1e-6)
  score = {"logits": tf.constant([[0.7]]), "predictions": tf.constant([0.7])}
  assert list(litert._outputs("regression")(score)) == ["predictions"]
  assert sorted(litert._outputs("squad")({"start_logits": logits, "end_logits": logits})
                ) == ["end_logits", "start_logits"]


def test_read_tflite_metadata_refuses_what_is_no_litert_model(tmp_path):
  (tmp_path / "x.tflite").write_bytes(b"not a model at all")
  with pytest.raises(UserInputError, match=r"x.tflite is not a LiteRT model \(.tflite\)\.$"):
    litert.read_tflite_metadata(tmp_path / "x.tflite")
  with pytest.raises(UserInputError, match=r"LiteRT model .*nope.tflite does not exist"):
    litert.read_tflite_metadata(tmp_path / "nope.tflite")


def fake_export(folder, parts=("saved_model.pb", "variables/variables.index"), **metadata):
  """A folder shaped like an export (empty model files: loading it fails) with `metadata`; a
  single-text uncased classifier unless told. Only checks made before converting pass it."""
  folder.mkdir(parents=True)
  for part in parts:
    (folder / part).parent.mkdir(parents=True, exist_ok=True)
    (folder / part).write_bytes(b"")
  record = {"task": "classification", "labels": LABELS, "max_seq_length": SEQ,
            "do_lower_case": True, "vocab_size": 30522, "inference_precision": "float32",
            "signatures": {export.IDS_SIGNATURE: {}}}
  record.update(metadata)
  (folder / export.METADATA_DIR).mkdir()
  (folder / export.METADATA_DIR / export.METADATA_FILE).write_text(json.dumps(record))
  return str(folder)


def test_export_litert_refuses_exports_it_cannot_read(tmp_path):
  with pytest.raises(UserInputError, match=r"does not exist"):
    litert.read_export(tmp_path / "nope")
  (tmp_path / "file").write_text("x")
  with pytest.raises(UserInputError, match=r"=.*file is a file, not a folder"):
    litert.read_export(tmp_path / "file")
  (tmp_path / "plain").mkdir()
  with pytest.raises(UserInputError, match=r"is not a bert_tf export \(no assets.extra/"):
    litert.read_export(tmp_path / "plain")
  fake_export(tmp_path / "old", signatures={"serving_default": {}})
  with pytest.raises(UserInputError, match=r"has no serve_ids signature .* export it again"):
    litert.read_export(tmp_path / "old")
  fake_export(tmp_path / "novars", parts=("saved_model.pb",))
  with pytest.raises(UserInputError, match=r"incomplete \(no variables/variables.index\)"):
    litert.read_export(tmp_path / "novars")
  damaged = fake_export(tmp_path / "damaged")
  (tmp_path / "damaged" / export.METADATA_DIR / export.METADATA_FILE).write_text('{"task": ')
  with pytest.raises(UserInputError, match=r"bert_tf_export.json of the export .* cannot be "
                     r"read \(Expecting value"):
    litert.read_export(damaged)
  for task, says in (("tfhub_encoder", r"TF Hub encoder export .* Keras' exporter"),
                     ("tfhub_preprocessor", r"TF Hub preprocessor export .* no model")):
    with pytest.raises(UserInputError, match=says):
      litert.read_export(fake_export(tmp_path / task, task=task, signatures={}))
  with pytest.raises(UserInputError, match=r"--quantize=int4 is not one of none, int8"):
    litert.convert(tmp_path / "old", tmp_path / "x.tflite", quantize="int4")


def test_export_litert_refuses_exports_whose_tflite_would_differ(tmp_path):
  for computes in ("int8", "bfloat16"):
    with pytest.raises(UserInputError, match=r"computes in %s; export_litert.py converts "
                       r"float32 exports only: .* --quantize=int8" % computes):
      litert.check_export({"inference_precision": computes}, "E")
  windows = {"long_document": "windows", "doc_stride": 64, "max_seq_length": 128}
  with pytest.raises(UserInputError, match=r"by windows \(doc_stride=64\); .* first 128 tokens "
                     r"only: pass --first_window_only"):
    litert.check_export(windows, "E")
  litert.check_export(windows, "E", first_window_only=True)  # accepted when asked
  litert.check_export({"inference_precision": "float32"}, "E")


def test_export_litert_checks_the_output_file_before_converting(tmp_path):
  export_dir = fake_export(tmp_path / "export")
  with pytest.raises(UserInputError, match=r"--output_file=.* is a folder; pass a file path"):
    litert.check_output_file(tmp_path, export_dir)
  with pytest.raises(UserInputError, match=r"Folder .*missing \(for --output_file\) does not "
                     r"exist"):
    litert.check_output_file(tmp_path / "missing" / "x.tflite", export_dir)
  (tmp_path / "file").write_text("x")
  with pytest.raises(UserInputError, match=r"cannot be written: .*file is a file, not a folder"):
    litert.check_output_file(tmp_path / "file" / "x.tflite", export_dir)
  for inside in ("saved_model.pb", "variables/x.tflite", "assets.extra/../new.tflite"):
    with pytest.raises(UserInputError, match=r"is inside the export it converts"):
      litert.check_output_file(os.path.join(export_dir, inside), export_dir)
  litert.check_output_file(tmp_path / "export.tflite", export_dir)  # beside it: fine


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_export_litert_refuses_an_unwritable_output_folder(tmp_path):
  export_dir = fake_export(tmp_path / "export")
  (tmp_path / "locked").mkdir(mode=0o555)
  with pytest.raises(UserInputError, match=r"cannot be written: folder .*locked is not "
                     r"writable"):
    litert.check_output_file(tmp_path / "locked" / "x.tflite", export_dir)


def test_export_litert_writes_the_output_whole_or_not_at_all(tmp_path):
  out = tmp_path / "model.tflite"
  out.write_bytes(b"old")
  litert.write_file(b"new", out)
  assert out.read_bytes() == b"new" and os.listdir(tmp_path) == ["model.tflite"]
  (tmp_path / "folder").mkdir()
  with pytest.raises(UserInputError, match=r"--output_file=.*folder cannot be written: Is a "
                     r"directory"):
    litert.write_file(b"new", tmp_path / "folder")
  assert sorted(os.listdir(tmp_path)) == ["folder", "model.tflite"]  # no temporary file left


def test_export_litert_takes_only_the_exports_vocab(tmp_path):
  export_dir = fake_export(tmp_path / "export")
  metadata = export.read_metadata(export_dir)
  with pytest.raises(UserInputError, match=r"keeps no vocab.txt .* pass --vocab_file"):
    litert.export_vocab(export_dir, metadata)
  vocab = open(VOCAB_UNCASED, encoding="utf-8").read()
  assert litert.export_vocab(export_dir, metadata, VOCAB_UNCASED) == VOCAB_UNCASED
  short = tmp_path / "short.txt"
  short.write_text("".join(vocab.splitlines(True)[:1000]))
  with pytest.raises(UserInputError, match=r"short.txt has 1000 entries, the export's vocab "
                     r"30522: pass the vocab the export was made with\.$"):
    litert.export_vocab(export_dir, metadata, str(short))
  (tmp_path / "export" / export.METADATA_DIR / export.VOCAB_FILE).write_text(vocab)
  assert litert.export_vocab(export_dir, metadata).endswith("assets.extra/vocab.txt")
  swapped = tmp_path / "swapped.txt"
  lines = vocab.splitlines(True)
  lines[2000], lines[2001] = lines[2001], lines[2000]
  swapped.write_text("".join(lines))
  with pytest.raises(UserInputError, match=r"swapped.txt differs from the vocab the export was "
                     r"made with \(.*vocab.txt, from line 2001\)"):
    litert.export_vocab(export_dir, metadata, str(swapped))
  with pytest.raises(UserInputError, match=r"--vocab_file .*nope.txt does not exist"):
    litert.export_vocab(export_dir, metadata, str(tmp_path / "nope.txt"))
  with pytest.raises(UserInputError, match=r"--vocab_file .* is a folder, not a file"):
    litert.export_vocab(export_dir, metadata, str(tmp_path))


def fake_python(folder, name, body, executable=True):
  """A stand-in for --mediapipe_python: a shell script `body` (its arguments: "-c" and the
  probe's import, or mediapipe_metadata.py and its flags)."""
  path = folder / name
  path.write_text("#!/bin/sh\n" + body)
  path.chmod(0o755 if executable else 0o644)
  return str(path)


@pytest.mark.slow
def test_export_litert_command_refuses_before_converting(tmp_path, script_session):
  """Every check that needs no conversion fails before it: the exports here are files shaped
  like exports, whose loading would fail with another message."""
  export_dir = fake_export(tmp_path / "export")
  windows = fake_export(tmp_path / "windows", long_document="windows", doc_stride=16)
  int8 = fake_export(tmp_path / "int8", inference_precision="int8")
  novars = fake_export(tmp_path / "novars", parts=("saved_model.pb",))
  regression = fake_export(tmp_path / "regression", task="regression", labels=None)
  two_lines = fake_export(tmp_path / "two_lines", task="multi_label", labels=["a\nb", "c"],
                          threshold=0.5)
  (tmp_path / "export" / export.METADATA_DIR / export.VOCAB_FILE).write_text(
      open(VOCAB_UNCASED, encoding="utf-8").read())
  short = tmp_path / "short.txt"
  short.write_text("".join(open(VOCAB_UNCASED, encoding="utf-8").readlines()[:1000]))
  graph = os.path.join(export_dir, "saved_model.pb")
  plain = fake_python(tmp_path, "no_mediapipe", 'exec %s "$@"\n' % shutil.which("python3"))
  locked = fake_python(tmp_path, "locked", "exit 0\n", executable=False)
  existing = tmp_path / "existing.tflite"
  existing.write_bytes(b"before")
  out = "--output_file=%s" % existing
  cases = [
      (["--export_dir=" + export_dir, out, "--vocab_file=" + VOCAB_UNCASED],
       "--vocab_file is used only with --mediapipe_python"),
      (["--export_dir=" + export_dir, out, "--seq_length=0"], "--seq_length=0 must be between 2"),
      (["--export_dir=" + export_dir, out, "--seq_length=0", "--mediapipe_python=/bin/true"],
       "--seq_length=0 must be between 2"),
      (["--export_dir=" + export_dir, "--output_file=%s" % tmp_path], "is a folder; pass a file"),
      (["--export_dir=" + export_dir, "--output_file=" + graph],
       "is inside the export it converts"),
      (["--export_dir=" + graph, out], "is a file, not a folder"),
      (["--export_dir=" + novars, out], "incomplete (no variables/variables.index)"),
      (["--export_dir=" + windows, out], "pass --first_window_only to convert it anyway"),
      (["--export_dir=" + int8, out], "converts float32 exports only"),
      (["--export_dir=" + export_dir, out, "--mediapipe_python=/bin/true",
        "--vocab_file=%s" % short], "short.txt has 1000 entries, the export's vocab 30522"),
      (["--export_dir=" + export_dir, out, "--mediapipe_python=" + locked],
       "locked is not executable"),
      (["--export_dir=" + export_dir, out, "--mediapipe_python=" + plain],
       "cannot import MediaPipe's metadata writers (ModuleNotFoundError: No module named "
       "'mediapipe'): install mediapipe==0.10.21"),
      (["--export_dir=" + export_dir, out, "--mediapipe_python=/bin/false"],
       "cannot import MediaPipe's metadata writers (exit status 1)"),
      (["--export_dir=" + regression, out, "--mediapipe_python=" + plain],
       "A regression export answers a score, not a class"),
      (["--export_dir=" + two_lines, out, "--mediapipe_python=" + plain],
       'The label "a\\nb" cannot be a line of MediaPipe\'s labels file'),
  ]
  # The commands one after another in the module's process of export_litert.py.
  results = [run_script("export_litert.py", *args, shared=script_session) for args, _ in cases]
  for (args, message), result in zip(cases, results):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and message in lines[-1], (args, result.stderr[-1500:])
    assert "Traceback" not in result.stderr and "Wrote" not in result.stdout, args
  assert existing.read_bytes() == b"before" and os.path.getsize(graph) == 0
  assert sorted(os.listdir(tmp_path)) == sorted(
      ["export", "windows", "int8", "novars", "regression", "two_lines", "short.txt",
       "no_mediapipe", "locked", "existing.tflite"])  # nothing written, no temporary file left


# Stand-ins for a MediaPipe Python past its import probe ("-c ..." exits 0): the writer step
# (mediapipe_metadata.py --model M --output O ...) fails, or exits 0 having copied M to O.
_FAILING_WRITER = '[ "$1" = -c ] && exit 0\necho "error: no room" >&2\nexit 1\n'
_COPYING_WRITER = ('[ "$1" = -c ] && exit 0\nshift\nwhile [ $# -gt 0 ]; do\n'
                   '  case $1 in --model) m=$2;; --output) o=$2;; esac\n  shift 2\ndone\n'
                   'cp "$m" "$o"\n')


@pytest.mark.slow
def test_export_litert_command_and_its_mediapipe_checks(exports, tmp_path, script_session):
  out = tmp_path / "clf.tflite"
  failing = fake_python(tmp_path, "failing", _FAILING_WRITER)
  copying = fake_python(tmp_path, "copying", _COPYING_WRITER)
  failures = (
      (["--export_dir=%s" % exports["squad"], "--mediapipe_python=/bin/true"],
       "MediaPipe serves classifiers and text embedders; this export is a squad model"),
      (["--export_dir=%s" % exports["classifier"], "--mediapipe_python=/no/python"],
       "--mediapipe_python=/no/python does not exist"),
      (["--export_dir=%s" % tmp_path, "--quantize=int8"], "is not a bert_tf export"),
      # After converting: the MediaPipe step fails, or exits 0 without writing metadata.
      (["--export_dir=%s" % exports["classifier"], "--mediapipe_python=" + failing],
       "MediaPipe's metadata writer failed in %s: no room" % failing),
      (["--export_dir=%s" % exports["classifier"], "--mediapipe_python=/bin/true"],
       "MediaPipe's metadata writer in /bin/true exited 0 but wrote no file; nothing was "
       "written"),
      (["--export_dir=%s" % exports["embedder"], "--mediapipe_python=" + copying],
       "exited 0 but left the model as it was; nothing was written"))
  # The commands one after another in one process; each failure its own output file, which
  # exists already and stays as it was.
  outputs = [tmp_path / ("y%d.tflite" % index) for index in range(len(failures))]
  for output in outputs:
    output.write_bytes(b"before")
  result, *results = [run_script("export_litert.py", *args, shared=script_session) for args in [
      ["--export_dir=%s" % exports["classifier"], "--output_file=%s" % out, "--quantize=int8"],
      *[["--output_file=%s" % output, *extra] for output, (extra, _) in zip(outputs, failures)]]]
  assert result.returncode == 0, result.stderr[-2000:]
  assert "Wrote %s (int8" % out in result.stdout and out.exists()
  for (extra, message), result, output in zip(failures, results, outputs):
    assert result.returncode == 2 and "Traceback" not in result.stderr, extra
    assert message in result.stderr.strip().splitlines()[-1], (extra, result.stderr[-1500:])
    assert output.read_bytes() == b"before"
  assert sorted(os.listdir(tmp_path)) == sorted(
      ["clf.tflite", "failing", "copying", *(o.name for o in outputs)])  # no temporary files
  # The vocab the metadata carries is the export's own, by id.
  vocab = (open(os.path.join(exports["classifier"], export.METADATA_DIR, "vocab.txt"))
           .read().splitlines())
  assert vocab[:4] == open(VOCAB_UNCASED).read().splitlines()[:4] and len(vocab) == 30522


MEDIAPIPE_PYTHON = os.environ.get("BERT_TF_MEDIAPIPE_PYTHON")

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
  got = mediapipe_classify(out, texts)
  want = tf.saved_model.load(exports["classifier"]).signatures["serving_default"](
      text_a=tf.constant(texts))["probabilities"].numpy()
  for row, scores in enumerate(got):
    np.testing.assert_allclose([scores[label] for label in LABELS], want[row], atol=1e-4)


def mediapipe_classify(model, texts, *threshold):
  """MediaPipe's TextClassifier (in BERT_TF_MEDIAPIPE_PYTHON) on `model`: each text's
  {category: score}."""
  return printed_json(run_script(PROGRAMS + "mediapipe_classify.py", model, json.dumps(texts),
                                 *threshold, python=MEDIAPIPE_PYTHON, timeout=120))


@pytest.mark.skipif(not MEDIAPIPE_PYTHON, reason="opt-in: BERT_TF_MEDIAPIPE_PYTHON=a Python with "
                    "mediapipe==0.10.21 (docs/serving.md)")
def test_mediapipe_serves_the_multi_label_classifier_from_raw_text(multi_label_export, tmp_path):
  """By default MediaPipe answers the labels the export predicts, with their probabilities;
  with score_threshold=0, every label's probability."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401
  out = tmp_path / "multi.tflite"
  result = run_script("export_litert.py", "--export_dir=%s" % multi_label_export,
                      "--output_file=%s" % out, "--mediapipe_python=%s" % MEDIAPIPE_PYTHON)
  assert result.returncode == 0, result.stderr[-2000:]
  assert "names the 3 labels" in result.stdout
  with zipfile.ZipFile(out) as packed:
    assert packed.read("labels.txt").decode("utf-8").splitlines() == MULTI_LABELS
  assert litert.read_tflite_metadata(out)["labels"] == MULTI_LABELS
  served = tf.saved_model.load(multi_label_export).signatures["serving_default"](
      text_a=tf.constant(TEXTS))
  want_names = [sorted(n.decode() for n in row if n) for row in served["labels"].numpy()]
  assert [sorted(scores) for scores in mediapipe_classify(out, TEXTS)] == want_names
  for row, scores in enumerate(mediapipe_classify(out, TEXTS, "0")):
    np.testing.assert_allclose([scores[label] for label in MULTI_LABELS],
                               served["probabilities"].numpy()[row], atol=1e-4)
