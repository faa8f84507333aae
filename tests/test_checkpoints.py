"""Google-layout checkpoints: strict loading with one clear error, exact write-back."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints, heads
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError
from bert_tf.modeling import BertModel
from helpers import FIXTURES, TINY, tiny_config, tiny_pretraining_model


def _read_all(path):
  reader = tf.train.load_checkpoint(path)
  dtypes = reader.get_variable_to_dtype_map()
  return {name: (reader.get_tensor(name), dtypes[name]) for name in dtypes}


def test_round_trip_is_exact(tmp_path):
  encoder, mlm, nsp = tiny_pretraining_model()
  out = checkpoints.save_checkpoint(tmp_path / "export" / "bert_model.ckpt", encoder, [mlm, nsp])
  original, written = _read_all(TINY.ckpt), _read_all(out)
  assert len(original) == 46 and sorted(original) == sorted(written)
  for name, (value, dtype) in original.items():
    assert written[name][1] == dtype
    assert written[name][0].shape == value.shape
    np.testing.assert_array_equal(written[name][0], value, err_msg=name)
  assert not [p for p in (tmp_path / "export").iterdir() if ".tmp-" in p.name]


def test_written_checkpoint_loads_in_tf1_graph_code_like_the_original(tmp_path):
  """The original's model_fn restores with init_from_checkpoint on get_variable names."""
  encoder, mlm, nsp = tiny_pretraining_model()
  path = checkpoints.save_checkpoint(tmp_path / "bert_model.ckpt", encoder, [mlm, nsp],
                                     global_step=7)
  names = checkpoints.variable_map(encoder, [mlm, nsp])
  graph = tf.Graph()
  with graph.as_default():
    tf1 = tf.compat.v1
    variables = {n: tf1.get_variable(n, shape=v.shape, dtype=tf.float32) for n, v in names.items()}
    tf1.train.init_from_checkpoint(path, {n: n for n in names})
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      values = session.run(variables)
  for name, variable in names.items():
    np.testing.assert_array_equal(values[name], variable.numpy(), err_msg=name)
  assert tf.train.load_checkpoint(path).get_tensor("global_step") == 7


def test_optimizer_slots_and_global_step_are_ignored(tmp_path):
  encoder, mlm, nsp = tiny_pretraining_model()
  names = checkpoints.variable_map(encoder, [mlm, nsp])
  tensor_names, tensors = ["global_step"], [tf.constant(3, tf.int64)]
  for name, variable in names.items():
    tensor_names += [name, name + "/adam_m", name + "/adam_v"]
    tensors += [variable, tf.zeros_like(variable), tf.zeros_like(variable)]
  prefix = str(tmp_path / "with_slots.ckpt")
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=tensor_names,
                    shape_and_slices=[""] * len(tensors), tensors=tensors)
  fresh = BertModel(tiny_config())
  report = checkpoints.load_checkpoint(prefix, fresh)
  assert len(report.loaded) == len(checkpoints.encoder_variable_map(fresh))
  np.testing.assert_array_equal(fresh.embeddings.word_embeddings,
                                encoder.embeddings.word_embeddings)


def test_absent_head_keeps_its_initialization_and_unused_heads_are_reported():
  config = tiny_config()
  encoder = BertModel(config)
  head = heads.ClassificationHead(config, num_labels=2, name="classifier")
  head.build()
  before = head.output_weights.numpy()
  report = checkpoints.load_checkpoint(TINY.ckpt, encoder, [head])
  assert report.skipped_heads == ["classifier"]
  assert "cls/predictions/output_bias" in report.unused
  np.testing.assert_array_equal(head.output_weights, before)


def test_mismatches_are_listed_together_in_one_error():
  config = BertConfig.from_dict(dict(tiny_config().to_dict(), num_hidden_layers=3,
                                     intermediate_size=48))
  with pytest.raises(UserInputError) as err:
    checkpoints.load_checkpoint(TINY.ckpt, BertModel(config))
  message = str(err.value)
  assert "missing from the checkpoint (16)" in message
  assert "bert/encoder/layer_2/attention/self/query/kernel" in message
  assert "shape mismatch (6)" in message  # intermediate kernel+bias, output kernel x 2 layers
  assert ("bert/encoder/layer_0/intermediate/dense/kernel: checkpoint [32, 64], model [32, 48]"
          in message)
  assert "--bert_config_file" in message


def test_unexpected_encoder_variables_are_an_error_unless_not_strict():
  config = BertConfig.from_dict(dict(tiny_config().to_dict(), num_hidden_layers=1))
  encoder = BertModel(config)
  with pytest.raises(UserInputError, match=r"in the checkpoint but not in the model \(16\)"):
    checkpoints.load_checkpoint(TINY.ckpt, encoder)
  report = checkpoints.load_checkpoint(TINY.ckpt, encoder, strict=False)
  assert "bert/encoder/layer_1/output/dense/kernel" in report.unused


def test_partial_head_is_an_error(tmp_path):
  encoder, mlm, nsp = tiny_pretraining_model()
  names = checkpoints.variable_map(encoder, [mlm])
  del names["cls/predictions/output_bias"]
  prefix = str(tmp_path / "partial.ckpt")
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=list(names), shape_and_slices=[""] * len(names),
                    tensors=list(names.values()))
  with pytest.raises(UserInputError, match="cls/predictions/output_bias"):
    checkpoints.load_checkpoint(prefix, encoder, [mlm])


def test_head_label_count_mismatch_is_an_error():
  head = heads.ClassificationHead(tiny_config(), num_labels=2, name="classifier")
  head.build()
  with pytest.raises(UserInputError,
                     match=r"output_weights: checkpoint \[3, 32\], model \[2, 32\]"):
    checkpoints.load_checkpoint(FIXTURES / "checkpoint" / "classifier_head_3labels" / "head.ckpt",
                                heads=[head])


def test_missing_and_corrupt_checkpoints_are_clear_errors(tmp_path, release_dir):
  encoder = BertModel(tiny_config())
  with pytest.raises(UserInputError, match=r"nothing.ckpt.index is missing"):
    checkpoints.load_checkpoint(tmp_path / "nothing.ckpt", encoder)
  with pytest.raises(UserInputError, match="holds no checkpoint"):
    checkpoints.load_checkpoint(tmp_path, encoder)
  # A release folder is accepted in place of the prefix.
  assert checkpoints.load_checkpoint(release_dir, encoder).checkpoint.endswith("bert_model.ckpt")
  (release_dir / "bert_model.ckpt.index").write_bytes(b"not a checkpoint index")
  with pytest.raises(UserInputError, match="Cannot read checkpoint"):
    checkpoints.load_checkpoint(release_dir / "bert_model.ckpt", encoder)
