"""The LTR ablation's encoder (Table 5): causal attention, the pooled last token, config I/O."""

import json

import numpy as np
import pytest

from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError
from bert_tf.modeling import BertModel
from helpers import TINY, tiny_config


def _causal_config():
  return BertConfig.from_dict(dict(tiny_config().to_dict(), causal_attention=True,
                                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


def test_a_position_does_not_see_later_tokens():
  model = BertModel(_causal_config())
  rng = np.random.default_rng(0)
  ids = rng.integers(5, 1000, size=(2, 12)).astype("int32")
  changed = ids.copy()
  changed[:, 6:] = rng.integers(5, 1000, size=(2, 6))
  mask = np.ones_like(ids)
  a = model({"input_word_ids": ids, "input_mask": mask})["sequence_output"].numpy()
  b = model({"input_word_ids": changed, "input_mask": mask})["sequence_output"].numpy()
  np.testing.assert_allclose(a[:, :6], b[:, :6], atol=1e-6)
  assert np.abs(a[:, 6:] - b[:, 6:]).max() > 1e-3  # later positions do see them


def test_bidirectional_model_sees_later_tokens():
  config = BertConfig.from_dict(dict(tiny_config().to_dict(), hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0))
  model = BertModel(config)
  ids = np.arange(5, 17, dtype="int32")[None]
  changed = ids.copy()
  changed[0, -1] = 999
  a = model({"input_word_ids": ids})["sequence_output"].numpy()
  b = model({"input_word_ids": changed})["sequence_output"].numpy()
  assert np.abs(a[:, 0] - b[:, 0]).max() > 1e-4


def test_causal_model_pools_the_last_real_token():
  model = BertModel(_causal_config())
  ids = np.array([[2, 7, 9, 11, 0, 0], [2, 8, 3, 4, 5, 6]], "int32")
  mask = (ids > 0).astype("int32")
  outputs = model({"input_word_ids": ids, "input_mask": mask})
  last = outputs["sequence_output"].numpy()[[0, 1], [3, 5]]
  dense = model.pooler.dense
  expected = np.tanh(last @ dense.kernel.numpy() + dense.bias.numpy())
  np.testing.assert_allclose(outputs["pooled_output"].numpy(), expected, atol=1e-6)


def test_config_writes_the_field_only_when_true():
  original = open(TINY.config).read()
  assert "causal_attention" not in tiny_config().to_json_string()
  assert json.loads(tiny_config().to_json_string()) == json.loads(original)
  assert json.loads(_causal_config().to_json_string())["causal_attention"] is True
  with pytest.raises(UserInputError, match="causal_attention` must be true or false"):
    BertConfig.from_dict(dict(tiny_config().to_dict(), causal_attention="yes"))
  with pytest.raises(UserInputError, match="no Hugging Face BertModel form"):
    _causal_config().to_hf_dict()
