"""The checkpoint layer: the name table, opening sources, damaged files, resuming a run."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints, heads
from bert_tf.checkpoints import names
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError
from bert_tf.modeling import BertModel
from bert_tf.training.checkpoint_keeper import CheckpointKeeper
from helpers import TINY, damaged_copy, tiny_config
from test_hf_checkpoints import HF_CONFIG, make_hf_state, write_hf_folder


def _all_heads(config):
  encoder = BertModel(config)
  built = [heads.MaskedLMHead(config, encoder.get_embedding_table(), name="mlm"),
           heads.NextSentenceHead(config, name="nsp"),
           heads.ClassificationHead(config, 3, name="classifier"),
           heads.SpanHead(config, name="squad"), heads.MultipleChoiceHead(config, name="swag"),
           heads.TokenClassificationHead(config, 5, name="ner")]
  for head in built:
    head.build()
  return encoder, built


def test_name_table_covers_every_weight_exactly_once():
  """Each weight of the encoder and of every head has one Google name, and names are unique."""
  config = tiny_config()
  encoder, built = _all_heads(config)
  for owner in [encoder] + built:
    mapped = owner.checkpoint_variables()
    tied = getattr(owner, "embedding_table", None)  # the encoder's, named there
    own = [v for v in owner.weights if v is not tied]
    assert sorted(id(v) for v in mapped.values()) == sorted(id(v) for v in own), owner
    for name, variable in mapped.items():
      row = next(r for r in names.encoder(2) + [r for k in names.HEAD_KINDS.values()
                                                   for r in k.names] if r.google == name)
      labels = getattr(owner, "num_labels", None)
      assert names.shape_of(row, config, labels) == tuple(variable.shape), name
  kinds = [h.checkpoint_kind for h in built]
  assert kinds == list(names.HEAD_KINDS)  # every kind in the table has a head that declares it
  google = [r.google for r in names.encoder(2)] + [r.google for k in names.HEAD_KINDS.values()
                                                   for r in k.names]
  hf = [r.hf for r in names.encoder(2)] + [r.hf for k in names.HEAD_KINDS.values()
                                           for r in k.names if r.hf]
  assert len(google) == len(set(google))
  # HF names the sequence and the token classifier alike (the file's class tells them apart).
  shared = sorted(k for k in set(hf) if hf.count(k) > 1)
  assert shared == ["classifier.bias", "classifier.weight"]


def test_hf_architecture_follows_the_heads():
  assert names.hf_architecture([]) == "BertModel"
  assert names.hf_architecture(["mlm", "nsp"]) == "BertForPreTraining"
  assert names.hf_architecture(["squad"]) == "BertForQuestionAnswering"
  assert names.hf_architecture(["swag"]) is None
  assert names.hf_architecture(["classifier", "squad"]) is None


def test_open_source_reads_google_prefix_folder_and_hf_folder(tmp_path, release_dir):
  prefix = checkpoints.open_source(TINY.ckpt)
  folder = checkpoints.open_source(release_dir)
  assert prefix.kind == folder.kind == "google" and len(prefix.shapes) == 46
  assert folder.config_file == str(release_dir / "bert_config.json")
  assert folder.vocab_file == str(release_dir / "vocab.txt")
  assert folder.config.hidden_size == 32
  hf = checkpoints.open_source(write_hf_folder(tmp_path / "hf", make_hf_state()))
  assert hf.kind == "hf" and hf.heads == ["mlm", "nsp"] and hf.config.hidden_act == "gelu_exact"
  assert sorted(hf.shapes) == sorted(prefix.shapes)  # the same Google names from both layouts


@pytest.mark.parametrize("how", ["truncated", "bit_flipped"])
def test_damaged_checkpoint_is_one_line_naming_the_file(tmp_path, how):
  path = damaged_copy(TINY.dir, tmp_path / how, how)
  with pytest.raises(UserInputError) as e:
    checkpoints.check_source(path)
  message = str(e.value)
  assert "\n" not in message and path in message and "damaged" in message
  assert "Copy or download it again" in message


def test_intact_checkpoint_passes_the_check():
  source = checkpoints.check_source(TINY.ckpt)
  assert source.path == TINY.ckpt


def test_hf_config_architectures_must_be_a_list(tmp_path):
  folder = write_hf_folder(tmp_path / "hf", make_hf_state(),
                           dict(HF_CONFIG, architectures="BertForPreTraining"))
  with pytest.raises(UserInputError, match=r"`architectures` must be a list"):
    checkpoints.open_source(folder)


def test_hf_shards_must_stay_inside_the_folder(tmp_path):
  folder = write_hf_folder(tmp_path / "hf", make_hf_state())
  outside = tmp_path / "elsewhere.safetensors"
  os.rename(os.path.join(folder, "model.safetensors"), outside)
  index = {"weight_map": {"bert.pooler.dense.weight": "../elsewhere.safetensors"}}
  with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
    json.dump(index, f)
  with pytest.raises(UserInputError, match=r"outside its folder"):
    checkpoints.open_source(folder)


# ---- resuming a training state -------------------------------------------------------------


def _keeper(out, value=0.0, settings=None):
  variable = tf.Variable(value)
  saved_google = []
  def write_google(prefix, step):
    checkpoints.save_checkpoint(prefix, global_step=step, extra={"v": variable})
    saved_google.append(step)

  keeper = CheckpointKeeper(str(out), tf.train.Checkpoint(v=variable), write_google,
                            settings=settings)
  return keeper, variable, saved_google


def test_keeper_saves_prunes_and_resumes(tmp_path):
  keeper, variable, google = _keeper(tmp_path)
  for step in (1, 2, 3, 4):
    variable.assign(float(step))
    keeper.save(step)
  assert google == [1, 2, 3, 4]
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-4")
  assert len(tf.io.gfile.glob(str(tmp_path / "model.ckpt-*.index"))) == 3
  assert [os.path.basename(p) for p in keeper.manager.checkpoints] == ["ckpt-2", "ckpt-3", "ckpt-4"]
  again, restored, _ = _keeper(tmp_path)
  assert again.restore_latest().endswith("ckpt-4") and restored.numpy() == 4.0


def test_damaged_latest_state_falls_back_to_the_newest_intact_one(tmp_path, caplog):
  keeper, variable, _ = _keeper(tmp_path)
  for step in (1, 2):
    variable.assign(float(step))
    keeper.save(step)
  data = tf.io.gfile.glob(os.path.join(keeper.state_dir, "ckpt-2.data-*"))[0]
  with open(data, "r+b") as f:
    f.truncate(os.path.getsize(data) // 2)
  again, restored, _ = _keeper(tmp_path)
  assert again.restore_latest().endswith("ckpt-1")
  assert restored.numpy() == 1.0
  assert any("ckpt-2 is damaged" in r.getMessage() for r in caplog.records)


def test_every_state_damaged_is_an_error_naming_the_folder(tmp_path):
  keeper, variable, _ = _keeper(tmp_path)
  keeper.save(1)
  for data in tf.io.gfile.glob(os.path.join(keeper.state_dir, "ckpt-*.data-*")):
    with open(data, "r+b") as f:
      f.truncate(4)
  again, _, _ = _keeper(tmp_path)
  with pytest.raises(UserInputError, match=r"Every training state in .* is damaged"):
    again.restore_latest()


def test_resume_with_changed_settings_lists_them(tmp_path):
  old = {"train_batch_size": 32, "max_seq_length": 128, "num_train_epochs": 3.0,
         "bert_config": {"hidden_dropout_prob": 0.1}}
  keeper, _, _ = _keeper(tmp_path, settings=old)
  keeper.save(1)
  new = dict(old, train_batch_size=16, bert_config={"hidden_dropout_prob": 0.2})
  again, _, _ = _keeper(tmp_path, settings=new)
  with pytest.raises(UserInputError) as e:
    again.restore_latest()
  message = str(e.value)
  assert "train_batch_size: 32 when the state was saved, 16 now" in message
  assert "bert_config:" in message and "max_seq_length" not in message
  assert "Start a new --output_dir" in message


def test_resume_with_more_epochs_is_allowed(tmp_path):
  old = {"train_batch_size": 32, "num_train_epochs": 3.0}
  keeper, variable, _ = _keeper(tmp_path, 5.0, settings=old)
  keeper.save(1)
  again, restored, _ = _keeper(tmp_path, settings=dict(old, num_train_epochs=6.0))
  assert again.restore_latest().endswith("ckpt-1") and restored.numpy() == 5.0


def test_config_change_that_reshapes_the_state_is_a_clear_error(tmp_path):
  """Without stored settings (an older run), a state of another shape still gets a message."""
  keeper, _, _ = _keeper(tmp_path)
  keeper.save(1)
  other = tf.Variable(np.zeros(3, np.float32))
  again = CheckpointKeeper(str(tmp_path), tf.train.Checkpoint(v=other), lambda p, s: None)
  with pytest.raises(UserInputError, match=r"does not fit this run .* start a new --output_dir"):
    again.restore_latest()


def test_config_field_order_does_not_matter():
  """Settings compare as JSON values, so a config dict is one setting."""
  config = BertConfig.from_dict(tiny_config().to_dict())
  assert config.architecture_differences(tiny_config()) == []


def test_token_classifier_converts_both_ways_as_bert_for_token_classification(tmp_path):
  """HF names the token and the sequence classifier alike; the file's class tells them apart."""
  import safetensors.numpy

  from bert_tf.checkpoints import conversion
  state = make_hf_state(heads_=("classifier",), num_labels=5)
  folder = write_hf_folder(tmp_path / "hf", state,
                           dict(HF_CONFIG, architectures=["BertForTokenClassification"]))
  source = checkpoints.open_source(folder)
  assert source.heads == ["ner"] and source.shapes["cls/ner/output_weights"] == [5, 32]
  sequence = write_hf_folder(tmp_path / "seq", state,
                             dict(HF_CONFIG, architectures=["BertForSequenceClassification"]))
  assert checkpoints.open_source(sequence).heads == ["classifier"]
  prefix, _ = conversion.convert_to_google(folder, tmp_path / "google")
  architecture, _ = conversion.convert_to_hf(prefix, tmp_path / "back")
  assert architecture == "BertForTokenClassification"
  back = safetensors.numpy.load_file(str(tmp_path / "back" / "model.safetensors"))
  assert sorted(back) == sorted(state)
  for key, value in state.items():
    np.testing.assert_array_equal(back[key], value, err_msg=key)
  written = json.loads((tmp_path / "back" / "config.json").read_text())
  assert written["architectures"] == ["BertForTokenClassification"]
  assert len(written["id2label"]) == 5
  config = BertConfig.from_json_file(str(tmp_path / "google" / "bert_config.json"))
  head = heads.TokenClassificationHead(config, 5, name="ner")
  head.build()
  checkpoints.load_checkpoint(prefix, heads=[head], strict=False)
  np.testing.assert_array_equal(head.output_weights.numpy(), state["classifier.weight"])
