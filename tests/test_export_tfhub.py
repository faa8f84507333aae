"""export_tfhub.py: the TF-Hub-style encoder + preprocessor equal bert_tf's tokenizer, model and
MLM head."""

import importlib.util
import json
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import checkpoints, export, tokenization
from bert_tf.data import packing
from bert_tf.errors import UserInputError
from bert_tf.export import tfhub
from bert_tf.text import packing as text_packing
from helpers import (
  PRECISION_TOLERANCE,
  PROGRAMS,
  TINY,
  VOCAB_UNCASED,
  printed_json,
  run_script,
  tiny_pretraining_model,
)

pytestmark = pytest.mark.slow  # every test here runs a runner, an export or a pipeline

SEQ = 16
TEXTS = ["Hello world!", "", "Héllo ΟΔΟΣ wörld 中文字符 naïve café",
         "a long sentence that will certainly need to be cut " * 3, "한국어 ﬁ Straße"]
PAIRS = [("The quick brown fox", "jumps over the lazy dog."), ("only a", ""), ("", "only b"),
         ("a long first sentence " * 5, "short"), ("x y", "a long second sentence " * 5)]
PAIR_SEQ = 12
POSITIONS = [[1, 2, 3], [0, 1, 1], [4, 5, 15], [3, 2, 1], [7, 0, 9]]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  """Both exports written by the runner from a release-shaped copy, whose vocab is then deleted."""
  root = tmp_path_factory.mktemp("hub")
  release = root / "uncased_L-2_H-32_A-4"
  shutil.copytree(TINY.dir, release)
  shutil.copy(VOCAB_UNCASED, release / "vocab.txt")
  result = run_script("export_tfhub.py",
                      "--bert_config_file=%s" % (release / "bert_config.json"),
                      "--vocab_file=%s" % (release / "vocab.txt"),
                      "--init_checkpoint=%s" % (release / "bert_model.ckpt"),
                      "--do_lower_case=True", "--seq_length=%d" % SEQ, "--with_mlm",
                      "--encoder_export_dir=%s" % (root / "encoder"),
                      "--preprocessor_export_dir=%s" % (root / "preprocessor"),
                      isolated=True, cwd=root)
  assert result.returncode == 0, result.stderr[-3000:]
  shutil.rmtree(release)
  return {"encoder": str(root / "encoder"), "preprocessor": str(root / "preprocessor")}


@pytest.fixture(scope="module")
def reference():
  """FullTokenizer and the tiny encoder + masked-LM head, eagerly in this process."""
  encoder, mlm, _ = tiny_pretraining_model()
  return {"tokenizer": tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case=True),
          "encoder": encoder, "mlm": mlm}


def _packed(tokenizer, pairs, seq_length):
  rows = [packing.pack_tokens(tokenizer.tokenize(a), tokenizer.tokenize(b) if b else None,
                              seq_length, tokenizer) for a, b in pairs]
  return {"input_word_ids": [r.input_ids for r in rows],
          "input_mask": [r.input_mask for r in rows],
          "input_type_ids": [r.segment_ids for r in rows]}


@pytest.fixture(scope="module")
def fresh(exports, tmp_path_factory):
  """Everything the exports give, computed in a process that imports only TF and tf-text."""
  folder = tmp_path_factory.mktemp("fresh")
  args = {"texts": TEXTS, "a": [p[0] for p in PAIRS], "b": [p[1] for p in PAIRS],
          "pair_seq": PAIR_SEQ, "positions": POSITIONS}
  return printed_json(run_script(PROGRAMS + "serve_tfhub.py", json.dumps(args),
                                 exports["preprocessor"], exports["encoder"], isolated=True,
                                 cwd=folder))


def test_preprocessor_ids_equal_full_tokenizer(fresh, reference):
  tokenizer = reference["tokenizer"]
  want = _packed(tokenizer, [(t, None) for t in TEXTS], SEQ)
  assert fresh["inputs"] == want
  assert fresh["preprocessor_signature"] == want
  words = [[tokenizer.convert_tokens_to_ids(tokenizer.wordpiece_tokenizer.tokenize(w))
            for w in tokenizer.basic_tokenizer.tokenize(a)] for a, _ in PAIRS]
  assert fresh["tokenized"] == words
  # The original's pair truncation and layout (an empty b: the single-sentence one).
  pairs = _packed(tokenizer, PAIRS, PAIR_SEQ)
  assert fresh["pairs"] == pairs and fresh["pairs_flat"] == pairs
  assert fresh["singles"] == _packed(tokenizer, [(a, None) for a, _ in PAIRS], SEQ)
  assert fresh["special"] == {"start_of_sequence_id": 101, "end_of_segment_id": 102,
                              "padding_id": 0, "mask_id": 103, "vocab_size": 30522}


def test_encoder_outputs_equal_bert_model(fresh, reference):
  inputs = {k: np.array(v, np.int32) for k, v in fresh["inputs"].items()}
  want = reference["encoder"](inputs, training=False)
  for got in (fresh["outputs"], fresh["default_training"]):
    np.testing.assert_allclose(got["sequence_output"], want["sequence_output"], atol=1e-5)
    np.testing.assert_allclose(got["pooled_output"], want["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(got["default"], want["pooled_output"], atol=1e-5)
    assert len(got["encoder_outputs"]) == len(want["encoder_outputs"]) == 2
    for layer, want_layer in zip(got["encoder_outputs"], want["encoder_outputs"]):
      np.testing.assert_allclose(layer, want_layer, atol=1e-5)
  signature = fresh["signature"]
  assert sorted(signature) == ["default", "encoder_outputs_0", "encoder_outputs_1",
                               "pooled_output", "sequence_output"]
  np.testing.assert_allclose(signature["encoder_outputs_0"], want["encoder_outputs"][0],
                             atol=1e-5)
  np.testing.assert_allclose(signature["sequence_output"], want["sequence_output"], atol=1e-5)
  # training=True turns dropout on.
  assert np.abs(np.array(fresh["dropout"]["sequence_output"]) -
                np.array(want["sequence_output"])).max() > 1e-2


def test_mlm_logits_are_the_heads_logits(fresh, reference):
  inputs = {k: np.array(v, np.int32) for k, v in fresh["inputs"].items()}
  sequence_output = reference["encoder"](inputs, training=False)["sequence_output"]
  positions = np.array(POSITIONS, np.int32)
  log_probs = np.asarray(reference["mlm"](sequence_output, positions)).reshape(
      len(TEXTS), len(POSITIONS[0]), -1)
  logits = np.array(fresh["mlm"]["mlm_logits"])
  assert logits.shape == log_probs.shape == (len(TEXTS), 3, 30522)
  np.testing.assert_allclose(tf.nn.log_softmax(logits, axis=-1), log_probs, atol=1e-5)
  np.testing.assert_allclose(logits, tfhub.mlm_logits(reference["mlm"], sequence_output,
                                                             positions), atol=1e-5)
  assert np.abs(tf.reduce_logsumexp(logits, axis=-1)).min() > 1  # Logits, not log-probs.
  np.testing.assert_allclose(fresh["mlm"]["pooled_output"],
                             fresh["outputs"]["pooled_output"], atol=1e-6)


def test_tf_hub_attributes_and_metadata(fresh, exports):
  attributes = fresh["attributes"]
  with open(VOCAB_UNCASED, encoding="utf-8") as f:
    assert attributes["vocab_file"] == f.read()
  assert attributes["do_lower_case"] is True and attributes["strip_accents"] is True
  # 39 weights of the tiny encoder (+ 7 dropout seed states); the MLM head's 5 only in mlm.
  assert (attributes["trainable"], attributes["variables"]) == (39, 46)
  assert attributes["mlm_trainable"] == 44 and attributes["regularization_losses"] == 0
  encoder_meta = export.read_metadata(exports["encoder"])
  assert encoder_meta["task"] == "tfhub_encoder" and encoder_meta["with_mlm"] is True
  assert encoder_meta["do_lower_case"] is True and encoder_meta["strip_accents"] is True
  assert encoder_meta["bert_config"]["num_hidden_layers"] == 2
  preprocessor_meta = export.read_metadata(exports["preprocessor"])
  assert preprocessor_meta["task"] == "tfhub_preprocessor"
  assert preprocessor_meta["seq_length"] == SEQ and preprocessor_meta["strip_accents"] is True
  assert sorted(preprocessor_meta["signatures"]["serving_default"]["inputs"]) == ["sentences"]


def test_encoder_loads_without_tensorflow_text(exports, tmp_path):
  result = run_script(PROGRAMS + "encoder_without_text_ops.py", exports["encoder"],
                      isolated=True, cwd=tmp_path, timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip().splitlines()[-1] == "(1, 32)"


def test_keras_tfsm_layer(exports, reference):
  import keras
  preprocessor = keras.layers.TFSMLayer(exports["preprocessor"], call_endpoint="serving_default")
  encoder = keras.layers.TFSMLayer(exports["encoder"], call_endpoint="serving_default")
  inputs = preprocessor(tf.constant(TEXTS))
  outputs = encoder(inputs)
  want = reference["encoder"](inputs, training=False)
  np.testing.assert_allclose(outputs["pooled_output"], want["pooled_output"], atol=1e-5)
  np.testing.assert_allclose(outputs["encoder_outputs_1"], want["sequence_output"], atol=1e-5)
  assert len(encoder.trainable_weights) == 39 and not preprocessor.weights


_TUTORIAL_MISSING = [m for m in ("tensorflow_hub", "tf_keras")
                     if importlib.util.find_spec(m) is None]


@pytest.mark.skipif(bool(_TUTORIAL_MISSING), reason="needs %s (pinned in requirements.txt)"
                    % " and ".join(_TUTORIAL_MISSING))
def test_tf_hub_glue_tutorial_saves_a_model_holding_tokenize_and_bert_pack_inputs(
    exports, reference, tmp_path):
  """The tutorial's model (hub.KerasLayer of preprocess.tokenize and of bert_pack_inputs, the
  encoder, a Dense) is fine-tuned, saved both ways and loaded back with the same logits.

  Keras saves only what the layers track; the tokenize sub-object must own the vocabulary
  tables its function reads, not leave them to the preprocessor's root object.
  """
  args = {"a": [p[0] for p in PAIRS], "b": [p[1] for p in PAIRS], "labels": [0, 1, 0, 1, 1],
          "seq_length": PAIR_SEQ}
  out = printed_json(run_script(PROGRAMS + "tf_hub_glue_tutorial.py", exports["preprocessor"],
                                exports["encoder"], tmp_path, json.dumps(args), isolated=True,
                                env={"TF_USE_LEGACY_KERAS": "1"}, cwd=tmp_path))
  # The packer gives the original's pair packing at the tutorial's seq_length.
  assert out["packed"] == _packed(reference["tokenizer"], PAIRS, PAIR_SEQ)
  logits = np.array(out["logits"])
  assert logits.shape == (len(PAIRS), 2)
  for kind in ("keras_save", "tf_save"):
    np.testing.assert_allclose(out[kind]["call"], logits, atol=1e-5)
    (serving,) = out[kind]["serving"]
    np.testing.assert_allclose(serving, logits, atol=1e-5)


def test_ids_cut_to_the_longest_real_sequence_give_the_full_length_outputs(exports):
  """The README's recipe for paying only for real tokens with the TF-Hub pair."""
  import tensorflow_text  # noqa: F401  (the preprocessor's ops)
  preprocessor = tf.saved_model.load(exports["preprocessor"])
  encoder = tf.saved_model.load(exports["encoder"])
  inputs = preprocessor(tf.constant([t for t in TEXTS if not t.startswith("a long")]))
  longest = int(tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=1)))
  assert longest < SEQ
  full = encoder(inputs, training=False)
  cut = encoder({k: v[:, :longest] for k, v in inputs.items()}, training=False)
  real = inputs["input_mask"].numpy()[:, :longest].astype(bool)
  np.testing.assert_allclose(cut["pooled_output"], full["pooled_output"], atol=1e-5)
  np.testing.assert_allclose(cut["sequence_output"].numpy()[real],
                             full["sequence_output"].numpy()[:, :longest][real], atol=1e-5)


def test_strip_accents_false_preprocessor_keeps_hangul(tmp_path):
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "한국어", "안녕", "##하세요", "café",
           "cafe", "."]
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
  out = tfhub.export_preprocessor(tmp_path / "pre", path, do_lower_case=True,
                                         strip_accents=False, seq_length=8)
  loaded = tf.saved_model.load(out)
  texts = ["한국어 안녕하세요.", "CAFÉ"]
  got = loaded(tf.constant(texts))["input_word_ids"].numpy().tolist()
  assert got == [[2, 5, 6, 7, 10, 3, 0, 0], [2, 8, 3, 0, 0, 0, 0, 0]]
  python = tokenization.FullTokenizer(str(path), do_lower_case=True, strip_accents=False)
  assert got == _packed(python, [(t, None) for t in texts], 8)["input_word_ids"]
  assert export.read_metadata(out)["strip_accents"] is False


def test_pair_truncation_equals_round_robin_trimmer():
  """What the README says: the trimmed lengths equal tensorflow_text's RoundRobinTrimmer.

  Only the layout differs: the original packs a row with an empty second segment
  as a single sentence (`[CLS] a [SEP]`, up to seq_length - 2 tokens of a).
  """
  rows = [(la, lb) for la in range(20) for lb in range(20)]
  a = tf.ragged.constant([[1] * la for la, _ in rows], tf.int32)
  b = tf.ragged.constant([[2] * lb for _, lb in rows], tf.int32)
  for limit in range(0, 18):
    trimmed_a, trimmed_b = tf_text.RoundRobinTrimmer(limit).trim([a, b])
    keep_a, keep_b = text_packing.truncated_lengths(a.row_lengths(), b.row_lengths(), limit)
    np.testing.assert_array_equal(trimmed_a.row_lengths(), keep_a)
    np.testing.assert_array_equal(trimmed_b.row_lengths(), keep_b)


def test_checks_before_writing(tmp_path):
  def run(**overrides):
    args = dict(bert_config_file=TINY.config, vocab_file=VOCAB_UNCASED,
                init_checkpoint=str(TINY.dir / "bert_model.ckpt"), do_lower_case=True,
                encoder_export_dir=str(tmp_path / "enc"),
                preprocessor_export_dir=str(tmp_path / "pre"), seq_length=SEQ)
    args.update(overrides)
    return tfhub.export_from_checkpoint(**args)

  with pytest.raises(UserInputError, match="same folder"):
    run(preprocessor_export_dir=str(tmp_path / "enc"))
  with pytest.raises(UserInputError, match="--seq_length=65 must be between 2 and"):
    run(seq_length=65)
  busy = tmp_path / "busy"
  busy.mkdir()
  (busy / "x").write_text("keep")
  with pytest.raises(UserInputError, match="busy already exists and is not empty"):
    run(preprocessor_export_dir=str(busy))
  # A checkpoint without the masked-LM head cannot give --with_mlm.
  encoder, _, _ = tiny_pretraining_model()
  bare = checkpoints.save_checkpoint(str(tmp_path / "bare" / "bert_model.ckpt"), encoder)
  with pytest.raises(UserInputError, match="no masked-LM head.*drop --with_mlm"):
    run(init_checkpoint=bare, with_mlm=True)
  small_vocab = tmp_path / "vocab.txt"
  small_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n" + "x\n" * 30522, encoding="utf-8")
  with pytest.raises(UserInputError, match="vocab.txt has 30526 tokens but vocab_size=30522"):
    run(vocab_file=str(small_vocab))
  assert sorted(p.name for p in tmp_path.iterdir()) == ["bare", "busy", "vocab.txt"]


def test_runner_errors_are_one_line(tmp_path):
  result = run_script("export_tfhub.py", "--vocab_file=%s" % VOCAB_UNCASED, isolated=True,
                      cwd=tmp_path, timeout=120)
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1] == (
      "error: missing required flag(s): --bert_config_file, --init_checkpoint, "
      "--encoder_export_dir, --preprocessor_export_dir")


@pytest.mark.slow
def test_int8_encoder_export_stays_close_to_float32(exports, tmp_path):
  import tensorflow_text  # noqa: F401  (the preprocessor's ops)

  from bert_tf import export
  encoder_dir, _ = tfhub.export_from_checkpoint(
      TINY.config, VOCAB_UNCASED, str(TINY.dir / "bert_model.ckpt"), True,
      str(tmp_path / "enc"), str(tmp_path / "pre"), seq_length=SEQ, with_mlm=True,
      inference_precision="int8")
  assert export.read_metadata(encoder_dir)["inference_precision"] == "int8"
  assert "inference_precision" not in export.read_metadata(str(tmp_path / "pre"))
  assert export.read_metadata(exports["encoder"])["inference_precision"] == "float32"
  inputs = tf.saved_model.load(exports["preprocessor"])(tf.constant(TEXTS))
  int8 = tf.saved_model.load(encoder_dir)(inputs, training=False)
  float32 = tf.saved_model.load(exports["encoder"])(inputs, training=False)
  real = inputs["input_mask"].numpy().astype(bool)
  diff = np.abs(int8["sequence_output"].numpy() - float32["sequence_output"].numpy())[real]
  tolerance = PRECISION_TOLERANCE["int8"]
  assert 0 < diff.max() < tolerance["sequence_output"]
  assert diff.mean() < tolerance["mean_sequence"]
  assert int8["pooled_output"].dtype == tf.float32
