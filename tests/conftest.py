"""Shared test helpers: fixture paths, the tiny Google-layout reference model, float32 bounds."""

import pathlib

import bert_tf  # noqa: F401  (sets TensorFlow environment defaults before TF loads)
import numpy as np
import pytest

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
TINY_DIR = FIXTURES / "checkpoint" / "tiny_uncased_L-2_H-32_A-4"
TINY_CKPT = str(TINY_DIR / "bert_model.ckpt")
TINY_CONFIG = str(TINY_DIR / "bert_config.json")
VOCAB_UNCASED = str(FIXTURES / "vocab_uncased.txt")

# Largest |difference| from float32 allowed to the inference precisions (bert_tf.precision) on
# real sentences, for the tiny model (hidden 32): bfloat16 keeps 8 bits of mantissa in every
# matmul, int8 quantizes the Dense weights per column and their inputs per token. The sequence
# output, which LayerNorm keeps near unit scale, moves more than the classifier logits; each
# bound is several times the difference measured (docs/performance.md, inference precision).
PRECISION_TOLERANCE = {
    "bfloat16": {"logits": 0.01, "sequence_output": 0.15, "mean_sequence": 0.02},
    "int8": {"logits": 0.02, "sequence_output": 0.3, "mean_sequence": 0.04}}

# float32 resolves 2**-23 of a value: FLOAT32_EPS * |x| is 1-2 ulps of x (1.3e-6 at a loss of
# 11, where 1e-6 is one ulp). Two float32 computations of the same numbers that sum in other
# orders (oneDNN and Eigen pick other kernels on AVX2, AVX-512 and AMX, and for other shapes)
# land an ulp or a few apart, so a bound between them scales with the magnitude.
FLOAT32_EPS = float(np.finfo(np.float32).eps)
# extract_features writes round(x, 6): a written value is up to this far from its float32.
JSONL_ROUNDING = 5e-7


def float32_approx(expected, ulps=4):
  """pytest.approx within `ulps` float32 epsilons of |expected| (a float32 loss, a sum)."""
  return pytest.approx(expected, rel=ulps * FLOAT32_EPS, abs=0)


def assert_float32_close(actual, expected, ulps=4, atol=0.0, err_msg=""):
  """assert_allclose within `atol` plus `ulps` float32 epsilons of the largest |expected|:
  rounding in sums and matmuls scales with the magnitudes summed, not with each output."""
  atol = atol + ulps * FLOAT32_EPS * float(np.max(np.abs(expected)))
  np.testing.assert_allclose(actual, expected, rtol=0, atol=atol, err_msg=err_msg)


@pytest.fixture
def release_dir(tmp_path):
  """A Google-release-shaped folder (config, vocab, checkpoint) in a temp dir."""
  import shutil
  out = tmp_path / "uncased_L-2_H-32_A-4"
  shutil.copytree(TINY_DIR, out)
  shutil.copy(VOCAB_UNCASED, out / "vocab.txt")
  return out


def tiny_config():
  from bert_tf.config import BertConfig
  return BertConfig.from_json_file(TINY_CONFIG)


def tiny_pretraining_model():
  """The tiny reference encoder with its MLM and NSP heads, loaded from the checkpoint."""
  from bert_tf import checkpoints, heads
  from bert_tf.modeling import BertModel
  config = tiny_config()
  encoder = BertModel(config)
  mlm = heads.MaskedLMHead(config, encoder.get_embedding_table(), name="mlm")
  nsp = heads.NextSentenceHead(config, name="nsp")
  mlm.build()
  nsp.build()
  checkpoints.load_checkpoint(TINY_CKPT, encoder, [mlm, nsp])
  return encoder, mlm, nsp


def pretraining_model(config):
  """A fresh encoder with built MLM and NSP heads, named as in the tests' checkpoints."""
  from bert_tf import heads
  from bert_tf.modeling import BertModel
  encoder = BertModel(config)
  mlm = heads.MaskedLMHead(config, encoder.get_embedding_table(), name="mlm")
  nsp = heads.NextSentenceHead(config, name="nsp")
  mlm.build()
  nsp.build()
  return encoder, mlm, nsp


@pytest.fixture(scope="module")
def script_session():
  """script_session(script): the helpers.ScriptSession of this checkout's `script` for the tests
  of a module (their command lines of the script, each run when called, share one process
  instead of starting Python and TensorFlow each), closed after the module."""
  from helpers import ScriptSession
  sessions = {}

  def session(script):
    if script not in sessions:
      sessions[script] = ScriptSession(script)
    return sessions[script]

  yield session
  for started in sessions.values():
    started.close()
