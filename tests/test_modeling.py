"""Forward numbers of the Keras encoder and heads against the original code's outputs."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints, heads, layers
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError
from bert_tf.modeling import BertModel
from bert_tf.tasks import squad
from helpers import FIXTURES, TINY, tiny_config, tiny_pretraining_model

FORWARD = FIXTURES / "model_forward"
PRETRAIN = np.load(FORWARD / "pretrain_heads_forward.npz")
HIDDEN_ATOL = 1e-5
LOG_PROB_ATOL = 1e-4


@pytest.fixture(scope="module")
def pretraining_model():
  return tiny_pretraining_model()


def _inputs(name):
  inputs = {"input_word_ids": PRETRAIN[name + ".in.input_ids"]}
  if name + ".in.input_mask" in PRETRAIN:  # set C leaves mask and types to their defaults
    inputs["input_mask"] = PRETRAIN[name + ".in.input_mask"]
    inputs["input_type_ids"] = PRETRAIN[name + ".in.segment_ids"]
  return inputs


def _close(got, want, atol):
  np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=atol)


@pytest.mark.parametrize("name", ["A", "B", "C"])
def test_encoder_and_pretraining_heads_match_original(pretraining_model, name):
  encoder, mlm, nsp = pretraining_model
  g = lambda key: PRETRAIN["%s.%s" % (name, key)]
  out = encoder(_inputs(name))
  _close(out["embedding_output"], g("embedding_output"), HIDDEN_ATOL)
  _close(np.stack(out["encoder_outputs"]), g("all_encoder_layers"), HIDDEN_ATOL)
  _close(out["sequence_output"], g("sequence_output"), HIDDEN_ATOL)
  _close(out["pooled_output"], g("pooled_output"), HIDDEN_ATOL)

  log_probs = mlm(out["sequence_output"], g("in.masked_lm_positions"))
  loss, per_example = heads.masked_lm_loss(log_probs, g("in.masked_lm_ids"),
                                           g("in.masked_lm_weights"))
  if name == "A":
    _close(log_probs, g("mlm_log_probs"), LOG_PROB_ATOL)
  else:
    _close(np.asarray(log_probs)[:, :1024], g("mlm_log_probs_cols0_1023"), LOG_PROB_ATOL)
    np.testing.assert_array_equal(np.argmax(log_probs, -1), g("mlm_log_probs_argmax"))
  _close(per_example, g("mlm_per_example_loss"), LOG_PROB_ATOL)
  _close(loss, g("mlm_loss"), LOG_PROB_ATOL)

  nsp_log_probs = nsp(out["pooled_output"])
  nsp_loss, nsp_per_example = heads.mean_cross_entropy(nsp_log_probs, g("in.next_sentence_labels"))
  _close(nsp_log_probs, g("nsp_log_probs"), LOG_PROB_ATOL)
  _close(nsp_per_example, g("nsp_per_example_loss"), LOG_PROB_ATOL)
  _close(nsp_loss, g("nsp_loss"), LOG_PROB_ATOL)


def test_one_hot_embeddings_give_the_same_outputs(pretraining_model):
  encoder = BertModel(tiny_config(), use_one_hot_embeddings=True)
  checkpoints.load_checkpoint(TINY.ckpt, encoder)
  out = encoder(_inputs("A"))
  _close(out["sequence_output"], PRETRAIN["A.onehot.sequence_output"], HIDDEN_ATOL)
  _close(out["pooled_output"], PRETRAIN["A.onehot.pooled_output"], HIDDEN_ATOL)


def test_classifier_head_matches_run_classifier_create_model():
  ref = np.load(FORWARD / "classifier_head_forward.npz")
  config = tiny_config()
  encoder = BertModel(config)
  head = heads.ClassificationHead(config, num_labels=3, name="classifier")
  head.build()
  checkpoints.load_checkpoint(TINY.ckpt, encoder)
  checkpoints.load_checkpoint(FIXTURES / "checkpoint" / "classifier_head_3labels" / "head.ckpt",
                              heads=[head])
  pooled = encoder({"input_word_ids": ref["in.input_ids"], "input_mask": ref["in.input_mask"],
                    "input_type_ids": ref["in.segment_ids"]})["pooled_output"]
  logits = head(pooled)
  log_probs = tf.nn.log_softmax(logits)
  loss, per_example = heads.mean_cross_entropy(log_probs, ref["in.labels"])
  _close(head.output_weights, ref["output_weights"], 0)
  _close(logits, ref["logits"], HIDDEN_ATOL)
  _close(tf.nn.softmax(logits), ref["probabilities"], HIDDEN_ATOL)
  _close(per_example, ref["per_example_loss"], LOG_PROB_ATOL)
  _close(loss, ref["loss"], LOG_PROB_ATOL)


def test_span_head_matches_run_squad_create_model_and_loss():
  ref = np.load(FORWARD / "squad_head_forward.npz")
  config = tiny_config()
  encoder = BertModel(config)
  head = heads.SpanHead(config, name="squad")
  head.build()
  checkpoints.load_checkpoint(TINY.ckpt, encoder)
  checkpoints.load_checkpoint(FIXTURES / "checkpoint" / "squad_head" / "head.ckpt", heads=[head])
  seq = encoder({"input_word_ids": ref["predict.in.input_ids"],
                 "input_mask": ref["predict.in.input_mask"],
                 "input_type_ids": ref["predict.in.segment_ids"]})["sequence_output"]
  start, end = head(seq)
  _close(start, ref["predict.start_logits"], HIDDEN_ATOL)
  _close(end, ref["predict.end_logits"], HIDDEN_ATOL)

  # The training loss through the task interface the loop uses (no dropout in the reference).
  k = "train_v2_first6.in."
  model = squad.SquadModel(config)
  model.encoder.set_weights(encoder.get_weights())
  model.span.set_weights(head.get_weights())
  features = {"input_word_ids": ref[k + "input_ids"], "input_mask": ref[k + "input_mask"],
              "input_type_ids": ref[k + "segment_ids"],
              "start_positions": ref[k + "start_position"],
              "end_positions": ref[k + "end_position"]}
  task = squad.SquadTask(config)
  loss = (task.loss_numerators(model, features, training=False)["span"] /
          task.loss_denominators(features)["span"])
  _close(loss, ref["train_v2_first6.total_loss_model_fn_TRAIN_nodropout"], LOG_PROB_ATOL)


def test_modeling_functions_match_original():
  ref = np.load(FORWARD / "modeling_functions.npz")
  x = ref["gelu_x"]
  _close(layers.gelu(x), ref["gelu"], 1e-6)
  _close(layers.get_activation("relu")(x), ref["relu"], 0)
  _close(layers.get_activation("TANH")(x), ref["tanh"], 1e-6)
  assert layers.get_activation("linear") is None and layers.get_activation("") is None
  for key in ("layer_norm", "layer_norm_const_row"):
    norm = layers.layer_norm("ln")
    _close(norm(ref[key + "_in"]), ref[key], 1e-5)
  # The original's [B, F, T] mask has identical rows; our bias broadcasts one of them.
  original_mask = ref["attention_mask"]
  assert (original_mask == original_mask[:, :1, :]).all()
  bias = layers.attention_bias_from_mask(ref["attention_mask_to_mask"])
  _close(bias[:, 0, 0, :], (1.0 - original_mask[:, 0, :]) * -10000.0, 0)


def test_eval_losses_of_run_pretraining_model_fn(pretraining_model):
  import json
  meta = json.loads((FORWARD / "pretrain_heads_forward.json").read_text())["eval_model_fn_set_A"]
  encoder, mlm, nsp = pretraining_model
  out = encoder(_inputs("A"))
  mlm_loss, _ = heads.masked_lm_loss(mlm(out["sequence_output"],
                                         PRETRAIN["A.in.masked_lm_positions"]),
                                     PRETRAIN["A.in.masked_lm_ids"],
                                     PRETRAIN["A.in.masked_lm_weights"])
  nsp_loss, _ = heads.mean_cross_entropy(nsp(out["pooled_output"]),
                                         PRETRAIN["A.in.next_sentence_labels"][:, None])
  _close(mlm_loss + nsp_loss, meta["total_loss"], LOG_PROB_ATOL)


def test_jit_compiled_forward_matches_eager(pretraining_model):
  encoder, _, _ = pretraining_model
  inputs = _inputs("B")
  eager = encoder(inputs)["sequence_output"]
  compiled = tf.function(lambda i: encoder(i)["sequence_output"], jit_compile=True)(inputs)
  _close(compiled, eager, 1e-5)


def test_pack_tokens_hand_worked():
  packed = layers.pack_tokens(tf.constant([[1, 1, 0], [1, 0, 0]]))
  assert packed.real.numpy().tolist() == [0, 1, 3]
  # Padding reads the row of the real token before it: (0, 2) -> row 1, (1, 1..2) -> row 2.
  assert packed.spread.numpy().tolist() == [0, 1, 1, 2, 2, 2]


@pytest.mark.parametrize("name", ["A", "B"])
def test_packed_tokens_give_the_originals_outputs_at_real_positions(pretraining_model, name):
  encoder, _, _ = pretraining_model
  g = lambda key: PRETRAIN["%s.%s" % (name, key)]
  inputs = _inputs(name)
  real = inputs["input_mask"].astype(bool)
  assert not real.all()  # padding, so the packed blocks run
  out = tf.function(lambda i: encoder(i, pack_tokens=True))(inputs)  # graph mode, as served
  layers_out = np.stack(out["encoder_outputs"])
  _close(layers_out[:, real], g("all_encoder_layers")[:, real], HIDDEN_ATOL)
  _close(np.asarray(out["sequence_output"])[real], g("sequence_output")[real], HIDDEN_ATOL)
  _close(out["pooled_output"], g("pooled_output"), HIDDEN_ATOL)
  assert not layers_out[:, ~real].any()  # the padding's rows were never computed
  _close(out["embedding_output"], g("embedding_output"), HIDDEN_ATOL)


def test_packing_a_batch_without_padding_is_the_padded_pass(pretraining_model):
  encoder, _, _ = pretraining_model
  inputs = _inputs("C")  # default mask: all real
  plain, packed = encoder(inputs), encoder(inputs, pack_tokens=True)
  np.testing.assert_array_equal(packed["sequence_output"], plain["sequence_output"])
  np.testing.assert_array_equal(packed["pooled_output"], plain["pooled_output"])
  with pytest.raises(ValueError, match="pack_tokens is for inference"):
    encoder(inputs, training=True, pack_tokens=True)
  with pytest.raises(ValueError, match="reads padding positions"):
    with squad.SquadModel(tiny_config()).packing_tokens():
      pass


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_keeps_layer_norm_and_softmax_float32(policy):
  config = tiny_config()
  reference = BertModel(config)
  checkpoints.load_checkpoint(TINY.ckpt, reference)
  mixed = BertModel(config, dtype=policy)
  checkpoints.load_checkpoint(TINY.ckpt, mixed)
  block = mixed.encoder_layers[0]
  assert block.attention.query.compute_dtype == policy.split("_")[1]
  assert block.attention_norm.compute_dtype == "float32"
  assert all(v.dtype == "float32" for v in mixed.weights)
  out = mixed(_inputs("A"))
  want = reference(_inputs("A"))
  assert out["sequence_output"].dtype == tf.float32
  tol = 0.05 if policy == "mixed_float16" else 0.2
  _close(out["sequence_output"], want["sequence_output"], tol)


def test_dropout_is_active_only_in_training(pretraining_model):
  encoder, _, _ = pretraining_model
  inputs = _inputs("A")
  a = encoder(inputs, training=True)["sequence_output"]
  b = encoder(inputs, training=False)["sequence_output"]
  assert not np.allclose(a, b)
  np.testing.assert_array_equal(b, encoder(inputs)["sequence_output"])


def test_sequence_longer_than_position_table_is_a_clear_error(pretraining_model):
  encoder, _, _ = pretraining_model
  with pytest.raises(UserInputError, match="max_position_embeddings=64"):
    encoder({"input_word_ids": np.zeros((1, 65), np.int32)})


def test_fresh_model_has_googles_variable_shapes_and_initial_values():
  config = BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                      intermediate_size=24, max_position_embeddings=20, type_vocab_size=2)
  names = checkpoints.encoder_variable_map(BertModel(config))
  assert len(names) == 5 + 16 * 3 + 2
  assert list(names["bert/encoder/layer_2/intermediate/dense/kernel"].shape) == [16, 24]
  assert list(names["bert/embeddings/position_embeddings"].shape) == [20, 16]
  word = np.asarray(names["bert/embeddings/word_embeddings"])
  assert np.abs(word).max() <= 2 * 0.02 + 1e-7 and 0.01 < word.std() < 0.02  # truncated normal
  np.testing.assert_array_equal(names["bert/embeddings/LayerNorm/gamma"], np.ones(16))
  np.testing.assert_array_equal(names["bert/encoder/layer_0/output/dense/bias"], np.zeros(16))
