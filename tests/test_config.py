"""BertConfig reads and writes bert_config.json like the original, with clear errors."""

import json

import pytest

from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError
from helpers import TINY


def test_reads_release_config_and_writes_the_same_text(tmp_path):
  config = BertConfig.from_json_file(TINY.config)
  assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (32, 2, 4)
  assert config.initializer_range == 0.2 and config.head_size == 8
  original_text = open(TINY.config).read().rstrip("\n") + "\n"
  assert config.to_json_string() == original_text
  out = tmp_path / "bert_config.json"
  out.write_text(config.to_json_string())
  assert BertConfig.from_json_file(str(out)) == config


def test_defaults_are_the_originals():
  config = BertConfig.from_dict({"vocab_size": 7})
  assert config.to_dict() == {
      "vocab_size": 7, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
      "intermediate_size": 3072, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
      "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512,
      "type_vocab_size": 16, "initializer_range": 0.02}


def _write(tmp_path, text):
  path = tmp_path / "bert_config.json"
  path.write_text(text)
  return str(path)


def test_missing_file(tmp_path):
  with pytest.raises(UserInputError, match="nope.json does not exist"):
    BertConfig.from_json_file(str(tmp_path / "nope.json"))


def test_malformed_json_names_the_file(tmp_path):
  path = _write(tmp_path, '{"vocab_size": 10,')
  with pytest.raises(UserInputError, match="bert_config.json is not valid JSON"):
    BertConfig.from_json_file(path)


@pytest.mark.parametrize("change, message", [
    ({"hidden_act": "swish"}, "field `hidden_act` is 'swish'; the supported activations are gelu"),
    ({"hidden_size": 30}, r"field `hidden_size` \(30\) is not a multiple of field "
                          r"`num_attention_heads` \(4\)"),
    ({"num_hidden_layers": 0}, "field `num_hidden_layers` must be a positive integer"),
    ({"hidden_dropout_prob": 1.5}, "field `hidden_dropout_prob` must be a number in"),
    ({"hiden_size": 32}, r"unknown field\(s\) hiden_size"),
])
def test_bad_fields_name_file_and_field(tmp_path, change, message):
  data = json.load(open(TINY.config))
  data.update(change)
  path = _write(tmp_path, json.dumps(data))
  with pytest.raises(UserInputError, match=message) as err:
    BertConfig.from_json_file(path)
  assert path in str(err.value)


def test_missing_vocab_size(tmp_path):
  with pytest.raises(UserInputError, match="required field `vocab_size` is missing"):
    BertConfig.from_json_file(_write(tmp_path, '{"hidden_size": 8}'))
