"""Sentence embeddings: sentence-transformers folders, pooling, the TF-Hub-style SavedModel.

The expectations are computed independently: token ids by the pure-Python
FullTokenizer and the original's packing at the full max_seq_length (no cut to the
longest row), the encoder's sequence output of those, and pooling in numpy float64
as sentence-transformers defines it. The comparison with the sentence-transformers
library itself on a real model is opt-in (test_agrees_with_sentence_transformers).
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints, tokenization
from bert_tf.checkpoints import sentence_models
from bert_tf.data import packing
from bert_tf.errors import UserInputError
from bert_tf.inference import text_embedder, text_embedder_export
from bert_tf.modeling import BertModel
from helpers import (
  JSONL_ROUNDING,
  PROGRAMS,
  ROOT,
  TINY,
  VOCAB_UNCASED,
  assert_float32_close,
  printed_json,
  run_script,
)
from test_hf_checkpoints import HF_CONFIG, make_hf_state, write_hf_folder

MAX_SEQ = 16
TEXTS = ["A man is eating food.", "", "Héllo wörld, naïve café!",
         "a long sentence that will certainly need to be cut " * 3, "The quick brown fox.",
         "中文字符 and ΟΔΟΣ"]
LEGACY = ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_tokens",
          "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
          "pooling_mode_lasttoken")


def legacy_pooling(*modes, dimension=HF_CONFIG["hidden_size"]):
  """A Pooling config.json as sentence-transformers 2.x writes it (all flags present)."""
  flags = {key: False for key in LEGACY}
  for mode in modes:
    flags[{"cls": LEGACY[0], "max": LEGACY[1], "mean": LEGACY[2],
           "mean_sqrt_len_tokens": LEGACY[3], "weightedmean": LEGACY[4],
           "lasttoken": LEGACY[5]}[mode]] = True
  return dict(flags, word_embedding_dimension=dimension)


def write_st_folder(root, pooling=None, normalize=True, transformer_path="", sbert=None,
                    tokenizer=None, modules=None, model_config=None, seed=0):
  """A sentence-transformers folder with tiny random BERT weights (HF layout)."""
  root = str(root)
  folder = os.path.join(root, transformer_path)
  write_hf_folder(folder, make_hf_state(heads_=(), seed=seed),
                  dict(HF_CONFIG, architectures=["BertModel"]),
                  tokenizer if tokenizer is not None else {"do_lower_case": True})
  with open(os.path.join(folder, "sentence_bert_config.json"), "w") as f:
    json.dump(sbert if sbert is not None else {"max_seq_length": MAX_SEQ,
                                              "do_lower_case": False}, f)
  if modules is None:
    modules = [{"idx": 0, "name": "0", "path": transformer_path,
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if normalize:
      modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                      "type": "sentence_transformers.models.Normalize"})
  with open(os.path.join(root, "modules.json"), "w") as f:
    json.dump(modules, f)
  if pooling is not False:
    os.makedirs(os.path.join(root, "1_Pooling"), exist_ok=True)
    with open(os.path.join(root, "1_Pooling", "config.json"), "w") as f:
      json.dump(pooling if pooling is not None else legacy_pooling("mean"), f)
  if model_config is not None:
    with open(os.path.join(root, "config_sentence_transformers.json"), "w") as f:
      json.dump(model_config, f)
  return root


# ---------------------------------------------------------------------------------------------
# The independent expectation.


def numpy_pool(sequence_output, mask, modes, normalize):
  """sentence-transformers' Pooling (+ Normalize) in float64, right-padded inputs."""
  seq = sequence_output.astype(np.float64)
  m = mask.astype(np.float64)[:, :, None]
  vectors = []
  for mode in modes:
    if mode == "cls":
      vectors.append(seq[:, 0])
    elif mode == "max":
      vectors.append(np.where(m > 0, seq, -np.inf).max(axis=1))
    elif mode in ("mean", "mean_sqrt_len_tokens"):
      count = np.maximum(m.sum(axis=1), 1e-9)
      vectors.append((seq * m).sum(axis=1) / (count if mode == "mean" else np.sqrt(count)))
    elif mode == "weightedmean":
      w = m * np.arange(1, seq.shape[1] + 1)[None, :, None]
      vectors.append((seq * w).sum(axis=1) / np.maximum(w.sum(axis=1), 1e-9))
    elif mode == "lasttoken":
      last = mask.sum(axis=1) - 1
      vectors.append(seq[np.arange(len(seq)), last])
  out = np.concatenate(vectors, axis=-1)
  if normalize:
    out = out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
  return out


def reference_embeddings(weights, texts, modes, normalize, max_seq=MAX_SEQ, do_lower_case=True,
                         strip_accents=None, vocab=VOCAB_UNCASED, config=None, texts_b=None):
  """FullTokenizer + the original packing at max_seq + BertModel + numpy pooling."""
  tokenizer = tokenization.FullTokenizer(vocab, do_lower_case, strip_accents)
  texts_b = texts_b or [None] * len(texts)
  rows = [packing.pack_tokens(tokenizer.tokenize(a), tokenizer.tokenize(b) if b else None,
                              max_seq, tokenizer) for a, b in zip(texts, texts_b)]
  ids = np.array([r.input_ids for r in rows], np.int32)
  mask = np.array([r.input_mask for r in rows], np.int32)
  types = np.array([r.segment_ids for r in rows], np.int32)
  source = checkpoints.open_source(weights)
  encoder = BertModel(config or source.config)
  checkpoints.load_checkpoint(source, encoder)
  seq = encoder({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types},
                training=False)["sequence_output"]
  return numpy_pool(np.asarray(seq), mask, modes, normalize)


# ---------------------------------------------------------------------------------------------
# Reading folders.


@pytest.mark.parametrize("transformer_path", ["", "0_Transformer"])
def test_reads_a_minilm_shaped_folder(tmp_path, transformer_path):
  folder = write_st_folder(tmp_path / "st", transformer_path=transformer_path)
  model = sentence_models.read_sentence_model(folder)
  assert model.source.kind == "hf"
  assert model.source.path == os.path.normpath(os.path.join(folder, transformer_path))
  assert model.pooling == ("mean",) and model.normalize
  assert model.max_seq_length == MAX_SEQ and model.dimension == HF_CONFIG["hidden_size"]
  assert (model.do_lower_case, model.strip_accents) == (True, None)
  assert model.prompt == "" and model.vocab_file.endswith("vocab.txt")


def test_folder_defaults_follow_sentence_transformers(tmp_path):
  # No pooling flag on -> mean; no max_seq_length -> the tokenizer's model_max_length, capped
  # at max_position_embeddings; do_lower_case in sentence_bert_config over a cased tokenizer
  # -> lower-cased text, accents kept (what a Lowercase step before a cased BERT does).
  folder = write_st_folder(tmp_path / "a", pooling={"word_embedding_dimension": 32},
                           sbert={"do_lower_case": True},
                           tokenizer={"do_lower_case": False, "model_max_length": 512})
  model = sentence_models.read_sentence_model(folder)
  assert model.pooling == ("mean",)
  assert model.max_seq_length == HF_CONFIG["max_position_embeddings"]
  assert (model.do_lower_case, model.strip_accents) == (True, False)
  folder = write_st_folder(tmp_path / "b", pooling={"pooling_mode": "lasttoken",
                                                    "embedding_dimension": 32},
                           sbert={}, tokenizer={"model_max_length": 24})
  model = sentence_models.read_sentence_model(folder)
  assert model.pooling == ("lasttoken",) and model.max_seq_length == 24


def _one_line_error(folder, *words):
  with pytest.raises(UserInputError) as info:
    text_embedder.load(folder)
  message = str(info.value)
  assert "\n" not in message
  for word in words:
    assert word in message, message


def test_bad_folders_are_one_line_errors(tmp_path):
  dense = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
           {"idx": 1, "name": "1", "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling"},
           {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]
  folder = write_st_folder(tmp_path / "dense", modules=dense)
  _one_line_error(folder, os.path.join(folder, "modules.json"),
                  "sentence_transformers.models.Dense", "not supported")
  folder = write_st_folder(tmp_path / "no_pooling", pooling=False)
  _one_line_error(folder, os.path.join(folder, "1_Pooling", "config.json"), "does not exist")
  folder = write_st_folder(tmp_path / "bad_mode", pooling={"pooling_mode": "median"})
  _one_line_error(folder, os.path.join(folder, "1_Pooling", "config.json"), "'median'")
  folder = write_st_folder(tmp_path / "dimension", pooling=legacy_pooling("mean", dimension=384))
  _one_line_error(folder, "word_embedding_dimension=384", "hidden_size is 32")
  swapped = [dict(dense[1], idx=0), dict(dense[0], idx=1)]
  folder = write_st_folder(tmp_path / "order", modules=swapped)
  _one_line_error(folder, "modules.json", "Pooling, Transformer")
  outside = [dict(dense[0]), dict(dense[1], path="../elsewhere")]
  folder = write_st_folder(tmp_path / "outside", modules=outside)
  _one_line_error(folder, "outside the model folder")
  folder = write_st_folder(tmp_path / "prompt", model_config={"default_prompt_name": "query",
                                                              "prompts": {}})
  _one_line_error(folder, "config_sentence_transformers.json", "'query'")
  _one_line_error(str(tmp_path), "not a sentence-transformers folder", "modules.json")
  _one_line_error(str(tmp_path / "missing"), "does not exist", "--model_dir")
  folder = write_st_folder(tmp_path / "broken_json")
  with open(os.path.join(folder, "modules.json"), "w") as f:
    f.write("[{")
  _one_line_error(folder, "modules.json", "not valid JSON")


# ---------------------------------------------------------------------------------------------
# The embeddings.

POOLINGS = [
    (legacy_pooling("mean"), True, ("mean",)),
    (legacy_pooling("cls"), False, ("cls",)),
    (legacy_pooling("max"), True, ("max",)),
    # Several legacy flags concatenate in sentence-transformers' order, whatever the file's.
    (legacy_pooling("mean_sqrt_len_tokens", "cls", "mean", "max"), True,
     ("cls", "max", "mean", "mean_sqrt_len_tokens")),
    ({"pooling_mode": ["weightedmean", "lasttoken"], "embedding_dimension": 32}, False,
     ("weightedmean", "lasttoken")),
]


@pytest.mark.parametrize("pooling,normalize,modes", POOLINGS)
def test_embeddings_equal_numpy_pooling_of_the_encoder(tmp_path, pooling, normalize, modes):
  folder = write_st_folder(tmp_path / "st", pooling=pooling, normalize=normalize)
  embedder = text_embedder.load(folder)
  assert embedder.pooling.modes == modes and embedder.pooling.normalize == normalize
  got = embedder(tf.constant(TEXTS)).numpy()
  expected = reference_embeddings(folder, TEXTS, modes, normalize)
  assert got.dtype == np.float32 and got.shape == (len(TEXTS), 32 * len(modes))
  np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
  if normalize:
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
  # In batches of any size and order: the same vectors (each batch is cut to its longest row,
  # so other shapes and kernels: a few float32 epsilons of the largest value apart).
  assert_float32_close(embedder.embed(TEXTS, batch_size=2), got, ulps=16)
  assert embedder(tf.constant([], tf.string)).shape == (0, 32 * len(modes))


def test_max_seq_length_override_and_prompt(tmp_path):
  folder = write_st_folder(tmp_path / "st", model_config={
      "prompts": {"query": "query: ", "doc": ""}, "default_prompt_name": "query",
      "similarity_fn_name": "cosine"})
  embedder = text_embedder.load(folder, max_seq_length=8)
  assert embedder.max_seq_length == 8 and embedder.sentence_model.similarity == "cosine"
  expected = reference_embeddings(folder, ["query: " + t for t in TEXTS], ("mean",), True,
                                  max_seq=8)
  np.testing.assert_allclose(embedder(tf.constant(TEXTS)).numpy(), expected, rtol=0, atol=1e-5)
  with pytest.raises(UserInputError, match="between 2 and max_position_embeddings=40"):
    text_embedder.load(folder, max_seq_length=41)


def test_pooling_layer_alone_equals_numpy():
  from bert_tf.pooling import SentencePooling
  rng = np.random.default_rng(3)
  seq = rng.standard_normal((4, 7, 5)).astype(np.float32)
  mask = np.array([[1] * 7, [1, 1, 0, 0, 0, 0, 0], [1] * 4 + [0] * 3, [1] * 6 + [0]], np.int32)
  for modes in [("cls",), ("max",), ("mean",), ("mean_sqrt_len_tokens",), ("weightedmean",),
                ("lasttoken",), ("max", "cls")]:
    for normalize in (False, True):
      got = SentencePooling(modes, normalize)(seq, mask)
      assert_float32_close(np.asarray(got), numpy_pool(seq, mask, modes, normalize), atol=1e-6)
  layer = SentencePooling(("max", "cls"), True)
  copy = SentencePooling.from_config(layer.get_config())  # Keras serialization keeps the modes
  assert (copy.modes, copy.normalize) == (("max", "cls"), True)
  with pytest.raises(ValueError, match="median"):
    SentencePooling(("median",))


# ---------------------------------------------------------------------------------------------
# The SavedModel and the scripts.


@pytest.mark.slow
def test_export_command_loads_without_bert_tf_and_equals_the_library(tmp_path):
  folder = write_st_folder(tmp_path / "st", pooling=legacy_pooling("cls", "mean"))
  export_dir = tmp_path / "embedder"
  command = ["export_text_embedder.py", "--model_dir=%s" % folder, "--export_dir=%s" % export_dir]
  result = run_script(*command, isolated=True, cwd=tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  served = printed_json(run_script(PROGRAMS + "serve_text_embedder.py",
                                   json.dumps({"texts": TEXTS}), export_dir, isolated=True,
                                   cwd=tmp_path, timeout=120))
  expected = text_embedder.load(folder)(tf.constant(TEXTS)).numpy()
  np.testing.assert_allclose(np.array(served["call"]), expected, rtol=0, atol=1e-6)
  np.testing.assert_allclose(np.array(served["signature"]), expected, rtol=0, atol=1e-6)
  assert served["empty"] == [0, 64]
  assert served["variables"] == served["trainable"] > 0
  reference = reference_embeddings(folder, TEXTS, ("cls", "mean"), True)
  np.testing.assert_allclose(np.array(served["call"]), reference, rtol=0, atol=1e-5)
  with open(export_dir / "assets.extra" / "bert_tf_export.json") as f:
    metadata = json.load(f)
  assert metadata["task"] == "text_embedder" and metadata["pooling"] == ["cls", "mean"]
  assert metadata["normalize"] and metadata["max_seq_length"] == MAX_SEQ
  assert metadata["dimension"] == 64 and metadata["model_dir"] == folder
  # `saved_model_cli run` is the TF1-style loader TF Serving uses.
  run = run_script(PROGRAMS + "saved_model_cli.py", "run", "--dir", export_dir, "--tag_set",
                   "serve", "--signature_def", "serving_default", "--input_exprs",
                   'sentences=["%s"]' % TEXTS[0], isolated=True, cwd=tmp_path, timeout=120)
  assert run.returncode == 0, run.stderr[-3000:]
  printed = run.stdout.split("Result for output key embedding:")[1]
  np.testing.assert_allclose(np.array(printed.replace("[", " ").replace("]", " ").split(),
                                      np.float32), expected[0], rtol=0, atol=1e-5)
  # A second export into the same folder is refused, naming the flag that allows it.
  again = run_script(*command, isolated=True, cwd=tmp_path)
  assert again.returncode == 2 and "--overwrite" in again.stderr.strip().splitlines()[-1]
  # A folder that is not a sentence-transformers model: one line, nothing written.
  result = run_script("export_text_embedder.py", "--model_dir=%s" % tmp_path,
                      "--export_dir=%s" % (tmp_path / "other"))
  last = result.stderr.strip().splitlines()[-1]
  assert result.returncode == 2 and last.startswith("error: ") and "modules.json" in last, last
  assert not (tmp_path / "other").exists()


@pytest.mark.slow
def test_extract_features_writes_pooled_embeddings(tmp_path):
  folder = write_st_folder(tmp_path / "st", pooling=legacy_pooling("max"))
  lines = ["A man is eating food.", "Héllo wörld, naïve café!",
           "Who wrote it? ||| Researchers at Google."]
  input_file = tmp_path / "input.txt"
  input_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
  out = tmp_path / "st.jsonl"
  result = run_script("extract_features.py", "--input_file=%s" % input_file,
                      "--output_file=%s" % out, "--model_dir=%s" % folder, "--batch_size=2")
  assert result.returncode == 0, result.stderr[-3000:]
  records = [json.loads(line) for line in out.read_text().splitlines()]
  assert [r["linex_index"] for r in records] == [0, 1, 2]
  texts_a = ["A man is eating food.", "Héllo wörld, naïve café!", "Who wrote it?"]
  texts_b = [None, None, "Researchers at Google."]
  expected = reference_embeddings(folder, texts_a, ("max",), True, texts_b=texts_b)
  np.testing.assert_allclose(np.array([r["embedding"] for r in records]), expected, rtol=0,
                             atol=2e-6)

  # A Google checkpoint with --pooling: the last layer, pooled, not normalized.
  out = tmp_path / "google.jsonl"
  result = run_script("extract_features.py", "--input_file=%s" % input_file,
                      "--output_file=%s" % out, "--pooling=mean,cls",
                      "--vocab_file=%s" % VOCAB_UNCASED, "--bert_config_file=%s" % TINY.config,
                      "--init_checkpoint=%s" % TINY.ckpt, "--max_seq_length=12")
  assert result.returncode == 0, result.stderr[-3000:]
  records = [json.loads(line) for line in out.read_text().splitlines()]
  from bert_tf.config import BertConfig
  expected = reference_embeddings(TINY.ckpt, texts_a, ("mean", "cls"), False, max_seq=12,
                                  config=BertConfig.from_json_file(TINY.config), texts_b=texts_b)
  # Not normalized (up to ~3): float32's resolution there, plus the 6-decimal rounding.
  assert_float32_close(np.array([r["embedding"] for r in records]), expected, ulps=16,
                       atol=JSONL_ROUNDING)

  for flags, words in [(["--model_dir=%s" % folder, "--pooling=cls"], "--pooling=cls"),
                       (["--model_dir=%s" % folder, "--init_checkpoint=%s" % TINY.ckpt],
                        "--init_checkpoint"),
                       (["--model_dir=%s" % folder, "--layers=-1"], "--layers"),
                       (["--pooling=from_model"], "--model_dir"),
                       (["--pooling=median", "--vocab_file=%s" % VOCAB_UNCASED,
                         "--bert_config_file=%s" % TINY.config,
                         "--init_checkpoint=%s" % TINY.ckpt], "'median'")]:
    result = run_script("extract_features.py", "--input_file=%s" % input_file,
                        "--output_file=%s" % (tmp_path / "x.jsonl"), *flags)
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and words in last, last


# ---------------------------------------------------------------------------------------------
# Opt-in: the sentence-transformers library itself on a real model.

PEER_PYTHON = os.environ.get("BERT_TF_PEER_PYTHON")
ST_MODEL = os.environ.get("BERT_TF_ST_MODEL")

def real_texts():
  """Short sentences and long paragraphs (cut at max_seq_length) from the repo's data."""
  path = os.environ.get("BERT_TF_ST_TEXTS") or os.path.join(ROOT, "data",
                                                            "pretraining_corpus.txt")
  with open(path, encoding="utf-8") as f:
    lines = [line.strip() for line in f if line.strip()]
  with open(os.path.join(ROOT, "data", "sentences.txt"), encoding="utf-8") as f:
    lines += [line.strip() for line in f if line.strip()]
  paragraphs = [" ".join(lines[i:i + 20]) for i in range(0, min(len(lines), 2000), 100)]
  return lines[:400] + paragraphs + [""]


@pytest.mark.slow
@pytest.mark.skipif(not (PEER_PYTHON and ST_MODEL),
                    reason="set BERT_TF_PEER_PYTHON (a Python with sentence-transformers) and "
                           "BERT_TF_ST_MODEL (a sentence-transformers folder)")
def test_agrees_with_sentence_transformers(tmp_path):
  texts = real_texts()
  texts_file = tmp_path / "texts.json"
  texts_file.write_text(json.dumps(texts), encoding="utf-8")
  peer = run_script(PROGRAMS + "sentence_transformers_embed.py", ST_MODEL, texts_file,
                    tmp_path / "st.npy", python=PEER_PYTHON, isolated=True, timeout=1800)
  assert peer.returncode == 0, peer.stderr[-3000:]
  export_dir = tmp_path / "embedder"
  text_embedder_export.export_from_folder(ST_MODEL, str(export_dir))
  printed_json(run_script(PROGRAMS + "embed_texts_file.py", json.dumps(
      {"texts": str(texts_file), "out": str(tmp_path / "ours.npy")}), export_dir, isolated=True,
      cwd=tmp_path, timeout=1800))
  ours, theirs = np.load(tmp_path / "ours.npy"), np.load(tmp_path / "st.npy")
  assert ours.shape == theirs.shape
  difference = float(np.abs(ours - theirs).max())
  print("max |difference| over %d texts: %.3g" % (len(texts), difference))
  assert difference <= 1e-5


@pytest.mark.parametrize("name,tolerance", [("bfloat16", 0.05), ("int8", 0.1)])
def test_inference_precision_stays_close_to_float32(tmp_path, name, tolerance):
  folder = write_st_folder(tmp_path / "st", pooling=legacy_pooling("mean"), normalize=True)
  float32 = text_embedder.load(folder)(tf.constant(TEXTS)).numpy()
  embedder = text_embedder.load(folder, inference_precision=name)
  from bert_tf.utils import precision
  assert precision.of(embedder.encoder) == name
  got = embedder(tf.constant(TEXTS)).numpy()
  assert got.dtype == np.float32
  diff = np.abs(got - float32).max()
  assert 0 < diff < tolerance  # unit vectors: cosine similarity with float32 above 0.99
  np.testing.assert_allclose(np.sum(got * float32, axis=1), 1.0, atol=0.01)
