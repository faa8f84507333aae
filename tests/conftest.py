"""Shared test helpers: fixture paths and the tiny Google-layout reference model."""

import pathlib

import bert_tf  # noqa: F401  (sets TensorFlow environment defaults before TF loads)
import pytest

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
TINY_DIR = FIXTURES / "checkpoint" / "tiny_uncased_L-2_H-32_A-4"
TINY_CKPT = str(TINY_DIR / "bert_model.ckpt")
TINY_CONFIG = str(TINY_DIR / "bert_config.json")
VOCAB_UNCASED = str(FIXTURES / "vocab_uncased.txt")

# Largest |difference| from float32 allowed to the inference precisions (bert_tf.precision) on
# real sentences, for the tiny model (hidden 32): bfloat16 keeps 8 bits of mantissa in every
# matmul, int8 quantizes the Dense weights per column and their inputs per token. Measured:
# bfloat16 0.0014 / 0.05, int8 0.0034 / 0.10 (classifier logits / sequence output, which
# LayerNorm keeps near unit scale).
PRECISION_TOLERANCE = {
    "bfloat16": {"logits": 0.01, "sequence_output": 0.15, "mean_sequence": 0.02},
    "int8": {"logits": 0.02, "sequence_output": 0.3, "mean_sequence": 0.04}}


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
