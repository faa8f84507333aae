"""Hugging Face BERT folders <-> Google's layout: exact round trips, HF's numbers, clear errors.

The HF side is written here by hand (key names and [out, in] orientation as
transformers' modeling_bert.py saves them) and computed by an independent numpy
forward pass, so neither depends on bert_tf/checkpoints/names.py's table or
bert_tf/checkpoints/hf_state.py.
"""

from functools import partial
import json
import math
import os
import shutil
import struct

import numpy as np
import pytest
import safetensors.numpy

from bert_tf import checkpoints, heads
from bert_tf.checkpoints import conversion, hf_files
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError
from bert_tf.modeling import BertModel
from helpers import FIXTURES, TINY, VOCAB_UNCASED, pretraining_model, run_script

# Intermediate size differs from hidden size so a missed transpose cannot go unnoticed.
HF_CONFIG = {"architectures": ["BertForPreTraining"], "model_type": "bert", "vocab_size": 30522,
             "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 48, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
             "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 40,
             "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12,
             "pad_token_id": 0, "position_embedding_type": "absolute"}


# ---------------------------------------------------------------------------------------------
# An HF folder written by hand.


def hf_shapes(c, heads_=("mlm", "nsp"), num_labels=3):
  """{HF key: torch shape} of BertModel (prefixed "bert." when a head is present) + heads."""
  h, i, p = c["hidden_size"], c["intermediate_size"], "bert." if heads_ else ""
  shapes = {p + "embeddings.word_embeddings.weight": (c["vocab_size"], h),
            p + "embeddings.position_embeddings.weight": (c["max_position_embeddings"], h),
            p + "embeddings.token_type_embeddings.weight": (c["type_vocab_size"], h),
            p + "embeddings.LayerNorm.weight": (h,), p + "embeddings.LayerNorm.bias": (h,)}
  for n in range(c["num_hidden_layers"]):
    layer = p + "encoder.layer.%d." % n
    linears = {"attention.self.query": (h, h), "attention.self.key": (h, h),
               "attention.self.value": (h, h), "attention.output.dense": (h, h),
               "intermediate.dense": (i, h), "output.dense": (h, i)}
    for name, (out, inp) in linears.items():
      shapes[layer + name + ".weight"] = (out, inp)
      shapes[layer + name + ".bias"] = (out,)
    for name in ("attention.output.LayerNorm", "output.LayerNorm"):
      shapes[layer + name + ".weight"] = shapes[layer + name + ".bias"] = (h,)
  shapes[p + "pooler.dense.weight"], shapes[p + "pooler.dense.bias"] = (h, h), (h,)
  if "mlm" in heads_:
    shapes.update({"cls.predictions.transform.dense.weight": (h, h),
                   "cls.predictions.transform.dense.bias": (h,),
                   "cls.predictions.transform.LayerNorm.weight": (h,),
                   "cls.predictions.transform.LayerNorm.bias": (h,),
                   "cls.predictions.bias": (c["vocab_size"],)})
  if "nsp" in heads_:
    shapes.update({"cls.seq_relationship.weight": (2, h), "cls.seq_relationship.bias": (2,)})
  if "classifier" in heads_:
    shapes.update({"classifier.weight": (num_labels, h), "classifier.bias": (num_labels,)})
  return shapes


def make_hf_state(c=HF_CONFIG, heads_=("mlm", "nsp"), seed=0, num_labels=3):
  """Random float32 weights large enough that exact and tanh GELU give different outputs."""
  rng = np.random.default_rng(seed)
  state = {}
  for key, shape in hf_shapes(c, heads_, num_labels).items():
    if "LayerNorm.weight" in key:
      value = 1.0 + 0.2 * rng.standard_normal(shape)
    elif len(shape) == 1:
      value = 0.2 * rng.standard_normal(shape)
    elif "embeddings" in key:
      value = 0.5 * rng.standard_normal(shape)
    else:
      value = 1.5 / math.sqrt(shape[1]) * rng.standard_normal(shape)
    state[key] = value.astype(np.float32)
  return state


def write_hf_folder(path, state, config=None, tokenizer=None):
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, "config.json"), "w") as f:
    json.dump(config or HF_CONFIG, f)
  safetensors.numpy.save_file(state, os.path.join(path, "model.safetensors"),
                              metadata={"format": "pt"})
  shutil.copy(VOCAB_UNCASED, os.path.join(path, "vocab.txt"))
  if tokenizer is not None:
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
      json.dump(tokenizer, f)
  return str(path)


# ---------------------------------------------------------------------------------------------
# transformers' BERT forward pass, in numpy float64 from the HF state dict.


def _gelu_exact(x):
  return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _gelu_tanh(x):
  return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


HF_ACTIVATIONS = {"gelu": _gelu_exact, "gelu_new": _gelu_tanh}


def numpy_reference_forward(state, config, ids, mask, types):
  """{sequence_output, pooled_output[, mlm_logits][, nsp_logits][, classifier_logits]}."""
  prefix = "bert." if any(k.startswith("bert.") for k in state) else ""

  def w(key):
    return np.asarray(state[key], np.float64)

  def linear(name, x, p=prefix):
    return x @ w(p + name + ".weight").T + w(p + name + ".bias")

  def layer_norm(name, x, p=prefix):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + config["layer_norm_eps"]) * w(
        p + name + ".weight") + w(p + name + ".bias")

  act = HF_ACTIVATIONS[config["hidden_act"]]
  batch, seq = ids.shape
  heads_, size = config["num_attention_heads"], config["hidden_size"] // config[
      "num_attention_heads"]
  x = (w(prefix + "embeddings.word_embeddings.weight")[ids] +
       w(prefix + "embeddings.position_embeddings.weight")[np.arange(seq)][None] +
       w(prefix + "embeddings.token_type_embeddings.weight")[types])
  x = layer_norm("embeddings.LayerNorm", x)
  bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min)

  def split(t):
    return t.reshape(batch, seq, heads_, size).transpose(0, 2, 1, 3)

  for n in range(config["num_hidden_layers"]):
    layer = "encoder.layer.%d." % n
    q, k, v = (split(linear(layer + "attention.self." + part, x))
               for part in ("query", "key", "value"))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + bias
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, -1)
    attention = layer_norm(layer + "attention.output.LayerNorm",
                           linear(layer + "attention.output.dense", context) + x)
    ffn = linear(layer + "output.dense", act(linear(layer + "intermediate.dense", attention)))
    x = layer_norm(layer + "output.LayerNorm", ffn + attention)
  out = {"sequence_output": x, "pooled_output": np.tanh(linear("pooler.dense", x[:, 0]))}
  if "cls.predictions.bias" in state:
    t = act(linear("cls.predictions.transform.dense", x, ""))
    t = layer_norm("cls.predictions.transform.LayerNorm", t, "")
    out["mlm_logits"] = t @ w(prefix + "embeddings.word_embeddings.weight").T + w(
        "cls.predictions.bias")
  if "cls.seq_relationship.weight" in state:
    out["nsp_logits"] = linear("cls.seq_relationship", out["pooled_output"], "")
  if "classifier.weight" in state:
    out["classifier_logits"] = linear("classifier", out["pooled_output"], "")
  return out


def _inputs(seed=1, batch=3, seq=12):
  rng = np.random.default_rng(seed)
  ids = rng.integers(0, 30522, (batch, seq)).astype(np.int32)
  lengths = [seq, seq - 4, 5][:batch]
  mask = np.array([[1] * n + [0] * (seq - n) for n in lengths], np.int32)
  types = np.array([[0] * (n // 2) + [1] * (seq - n // 2) for n in lengths], np.int32) * mask
  return ids, mask, types


def _read_google(prefix):
  _, variables = checkpoints.read_variables(prefix)
  return variables


# ---------------------------------------------------------------------------------------------
# The name map.


def test_hf_names_map_to_googles_names_and_orientation(tmp_path):
  state = make_hf_state()
  hf = hf_files.read_hf_folder(write_hf_folder(tmp_path / "hf", state))
  assert len(hf.variables) == 46 and hf.heads == ["mlm", "nsp"]
  assert hf.config.hidden_act == "gelu_exact" and hf.config.type_vocab_size == 2
  v = hf.variables
  np.testing.assert_array_equal(v["bert/encoder/layer_1/intermediate/dense/kernel"],
                                state["bert.encoder.layer.1.intermediate.dense.weight"].T)
  assert v["bert/encoder/layer_1/intermediate/dense/kernel"].shape == (32, 48)
  assert v["bert/encoder/layer_0/output/dense/kernel"].shape == (48, 32)
  np.testing.assert_array_equal(v["bert/encoder/layer_0/attention/output/LayerNorm/gamma"],
                                state["bert.encoder.layer.0.attention.output.LayerNorm.weight"])
  np.testing.assert_array_equal(v["bert/embeddings/word_embeddings"],
                                state["bert.embeddings.word_embeddings.weight"])
  # The pooled-output heads are [labels, hidden] in both layouts (no transpose).
  np.testing.assert_array_equal(v["cls/seq_relationship/output_weights"],
                                state["cls.seq_relationship.weight"])
  np.testing.assert_array_equal(v["cls/predictions/output_bias"], state["cls.predictions.bias"])
  # The Google names are exactly those bert_tf's Keras model and heads use.
  encoder, mlm, nsp = pretraining_model(hf.config)
  model_names = checkpoints.variable_map(encoder, [mlm, nsp])
  assert sorted(model_names) == sorted(v)
  assert all(list(model_names[n].shape) == list(v[n].shape) for n in v)


@pytest.mark.parametrize("heads_,architecture", [
    ((), "BertModel"), (("mlm", "nsp"), "BertForPreTraining"),
    (("classifier",), "BertForSequenceClassification")])
def test_hf_to_google_to_hf_is_bit_exact(tmp_path, heads_, architecture):
  state = make_hf_state(heads_=heads_)
  config = dict(HF_CONFIG, architectures=[architecture])
  source = write_hf_folder(tmp_path / "hf", state, config,
                           tokenizer={"do_lower_case": True, "strip_accents": None})
  prefix, hf = conversion.convert_to_google(source, tmp_path / "google")
  assert sorted(os.listdir(tmp_path / "google")) == [
      "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
      "vocab.txt"]
  written = json.loads((tmp_path / "google" / "bert_config.json").read_text())
  assert written["hidden_act"] == "gelu_exact" and written["intermediate_size"] == 48
  architecture_out, lower = conversion.convert_to_hf(prefix, tmp_path / "back")
  assert architecture_out == architecture and lower is True
  back = safetensors.numpy.load_file(str(tmp_path / "back" / "model.safetensors"))
  assert sorted(back) == sorted(state)
  for key, value in state.items():
    assert back[key].dtype == value.dtype and back[key].shape == value.shape, key
    np.testing.assert_array_equal(back[key], value, err_msg=key)
  config_back = json.loads((tmp_path / "back" / "config.json").read_text())
  for field in ("hidden_act", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "vocab_size", "type_vocab_size",
                "max_position_embeddings", "model_type", "architectures", "layer_norm_eps"):
    assert config_back[field] == config[field], field
  if "classifier" in heads_:
    assert config_back["id2label"] == {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}
  tokenizer = json.loads((tmp_path / "back" / "tokenizer_config.json").read_text())
  assert tokenizer["do_lower_case"] is True and tokenizer["strip_accents"] is None
  assert (tmp_path / "back" / "vocab.txt").read_bytes() == open(VOCAB_UNCASED, "rb").read()


def test_google_to_hf_to_google_is_bit_exact(release_dir, tmp_path):
  architecture, lower = conversion.convert_to_hf(release_dir / "bert_model.ckpt",
                                                     tmp_path / "hf")
  assert architecture == "BertForPreTraining"
  assert lower is True  # uncased_L-2_H-32_A-4: the release-name rule says uncased
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert config["hidden_act"] == "gelu_new"  # the original's tanh GELU
  state = safetensors.numpy.load_file(str(tmp_path / "hf" / "model.safetensors"))
  assert sorted(state) == sorted(hf_shapes(dict(HF_CONFIG, intermediate_size=64,
                                                max_position_embeddings=64)))
  assert "cls.predictions.decoder.weight" not in state  # tied, as transformers saves it
  prefix, _ = conversion.convert_to_google(tmp_path / "hf", tmp_path / "google")
  original, back = _read_google(TINY.ckpt), _read_google(prefix)
  assert len(original) == 46 and list(original) == list(back)
  for name, value in original.items():
    assert back[name].dtype == value.dtype
    np.testing.assert_array_equal(back[name], value, err_msg=name)
  assert (BertConfig.from_json_file(str(tmp_path / "google" / "bert_config.json")) ==
          BertConfig.from_json_file(TINY.config))


def test_older_hf_files_read_the_same(tmp_path):
  """gamma/beta LayerNorm names, the tied decoder saved twice, the position_ids buffer."""
  state = make_hf_state()
  old = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                    "LayerNorm.beta"): v
         for k, v in state.items()}
  old["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
  old["cls.predictions.decoder.bias"] = state["cls.predictions.bias"]
  old["bert.embeddings.position_ids"] = np.arange(40, dtype=np.int64)[None]
  new = hf_files.read_hf_folder(write_hf_folder(tmp_path / "new", state)).variables
  got = hf_files.read_hf_folder(write_hf_folder(tmp_path / "old", old)).variables
  assert list(got) == list(new)
  for name in new:
    np.testing.assert_array_equal(got[name], new[name], err_msg=name)


def test_bfloat16_and_float16_weights_are_widened_exactly(tmp_path):
  state = make_hf_state(heads_=())
  word = "embeddings.word_embeddings.weight"
  half = dict(state, **{word: state[word].astype(np.float16)})
  folder = write_hf_folder(tmp_path / "f16", half, dict(HF_CONFIG, architectures=["BertModel"]))
  got = hf_files.read_hf_folder(folder).variables["bert/embeddings/word_embeddings"]
  assert got.dtype == np.float32
  np.testing.assert_array_equal(got, state[word].astype(np.float16).astype(np.float32))
  # bfloat16 (numpy has no such type): a hand-written file of two values.
  header = json.dumps({"x": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
  header += b" " * (-len(header) % 8)
  path = tmp_path / "bf16.safetensors"
  path.write_bytes(struct.pack("<Q", len(header)) + header + b"\x80\x3f\x20\xc0")
  np.testing.assert_array_equal(hf_files.load_safetensors(str(path))["x"], [1.0, -2.5])


# ---------------------------------------------------------------------------------------------
# The numbers: the converted checkpoint in bert_tf computes what the HF model computes.


def _bert_tf_outputs(prefix, config_file, ids, mask, types, positions):
  encoder, mlm, nsp = pretraining_model(BertConfig.from_json_file(config_file))
  checkpoints.load_checkpoint(prefix, encoder, [mlm, nsp])
  out = encoder({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types})
  sequence = out["sequence_output"]
  return {"sequence_output": np.asarray(sequence),
          "pooled_output": np.asarray(out["pooled_output"]),
          "mlm_logits": np.asarray(mlm.logits(sequence, positions)),
          "nsp_logits": np.asarray(nsp.logits(out["pooled_output"]))}


def _max_diffs(ours, reference, mask, positions):
  """Max abs differences at the real positions; the masked-LM logits (up to ~15 here, sums
  of 32 float32 products) relative to their largest magnitude."""
  real = mask.astype(bool)
  ref_mlm = np.take_along_axis(reference["mlm_logits"], positions[:, :, None], axis=1)
  ref_mlm = ref_mlm.reshape(-1, ref_mlm.shape[-1])
  return {
      "sequence_output": np.abs(ours["sequence_output"][real] -
                                reference["sequence_output"][real]).max(),
      "pooled_output": np.abs(ours["pooled_output"] - reference["pooled_output"]).max(),
      "mlm_logits_relative": np.abs(ours["mlm_logits"] - ref_mlm).max() / np.abs(ref_mlm).max(),
      "nsp_logits": np.abs(ours["nsp_logits"] - reference["nsp_logits"]).max(),
  }


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new"])
def test_converted_model_computes_what_the_hf_model_computes(tmp_path, hidden_act):
  config = dict(HF_CONFIG, hidden_act=hidden_act)
  state = make_hf_state(config)
  prefix, _ = conversion.convert_to_google(write_hf_folder(tmp_path / "hf", state, config),
                                               tmp_path / "google")
  ids, mask, types = _inputs()
  positions = np.array([[1, 3, 4], [0, 2, 7], [1, 2, 4]], np.int32)
  ours = _bert_tf_outputs(prefix, str(tmp_path / "google" / "bert_config.json"), ids, mask,
                          types, positions)
  reference = numpy_reference_forward(state, config, ids, mask, types)
  diffs = _max_diffs(ours, reference, mask, positions)
  print("hidden_act=%s max abs diff: %s" % (hidden_act, diffs))
  assert max(diffs.values()) < 1e-5, diffs
  # The test can tell the two GELUs apart: the other one is far off.
  other = "gelu_new" if hidden_act == "gelu" else "gelu"
  wrong = numpy_reference_forward(state, dict(config, hidden_act=other), ids, mask, types)
  assert max(_max_diffs(ours, wrong, mask, positions).values()) > 1e-4


def test_tiny_google_checkpoint_in_hf_computes_the_same(release_dir, tmp_path):
  """Google -> HF: HF's forward pass (gelu_new) of the written folder equals bert_tf's."""
  conversion.convert_to_hf(release_dir / "bert_model.ckpt", tmp_path / "hf")
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  state = safetensors.numpy.load_file(str(tmp_path / "hf" / "model.safetensors"))
  ids, mask, types = _inputs(seq=20)
  positions = np.array([[1, 3], [0, 9], [1, 2]], np.int32)
  ours = _bert_tf_outputs(TINY.ckpt, TINY.config, ids, mask, types, positions)
  reference = numpy_reference_forward(state, config, ids, mask, types)
  assert max(_max_diffs(ours, reference, mask, positions).values()) < 1e-5


# ---------------------------------------------------------------------------------------------
# --init_checkpoint with an HF folder.


def test_load_checkpoint_takes_an_hf_folder(tmp_path):
  state = make_hf_state(heads_=("classifier",), num_labels=3)
  config = dict(HF_CONFIG, architectures=["BertForSequenceClassification"])
  folder = write_hf_folder(tmp_path / "hf", state, config)
  # An HF config.json is also a valid --bert_config_file.
  bert_config = BertConfig.from_json_file(os.path.join(folder, "config.json"))
  assert bert_config.hidden_act == "gelu_exact" and bert_config.intermediate_size == 48
  encoder = BertModel(bert_config)
  head = heads.ClassificationHead(bert_config, 3, name="classifier")
  head.build()
  report = checkpoints.load_checkpoint(folder, encoder, [head])
  assert report.checkpoint == folder and len(report.loaded) == 41 and not report.skipped_heads
  np.testing.assert_array_equal(head.output_weights.numpy(), state["classifier.weight"])
  np.testing.assert_array_equal(
      encoder.encoder_layers[1].intermediate.kernel.numpy(),
      state["bert.encoder.layer.1.intermediate.dense.weight"].T)
  # A head the folder lacks keeps its initial values, as with Google's checkpoints.
  nsp = heads.NextSentenceHead(bert_config, name="nsp")
  nsp.build()
  report = checkpoints.load_checkpoint(folder, BertModel(bert_config), [nsp])
  assert report.skipped_heads == ["nsp"] and report.unused == ["output_bias", "output_weights"]


def test_hf_folder_of_another_architecture_names_both_files(tmp_path):
  folder = write_hf_folder(tmp_path / "hf", make_hf_state())
  google_style = tmp_path / "bert_config.json"
  fields = {k: HF_CONFIG[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers",
                                      "num_attention_heads", "intermediate_size",
                                      "max_position_embeddings", "type_vocab_size")}
  google_style.write_text(json.dumps(dict(fields, hidden_act="gelu")))
  encoder = BertModel(BertConfig.from_json_file(str(google_style)))
  with pytest.raises(UserInputError) as e:
    checkpoints.load_checkpoint(folder, encoder)
  message = str(e.value)
  assert os.path.join(folder, "config.json") in message and str(google_style) in message
  assert "hidden_act 'gelu_exact' vs 'gelu'" in message and "\n" not in message
  google_style.write_text(json.dumps(dict(fields, hidden_act="gelu_exact", hidden_size=64)))
  with pytest.raises(UserInputError, match="hidden_size 32 vs 64"):
    checkpoints.load_checkpoint(folder, BertModel(BertConfig.from_json_file(str(google_style))))


# ---------------------------------------------------------------------------------------------
# Errors: one line, naming the file.


def _broken(tmp_path, config=None, drop=(), add=None, state=None, files=None):
  state = dict(state or make_hf_state())
  for key in drop:
    del state[key]
  state.update(add or {})
  folder = write_hf_folder(tmp_path / "hf", state, config)
  for name in files or ():
    os.remove(os.path.join(folder, name))
  return folder


@pytest.mark.parametrize("kwargs,file,words", [
    (dict(files=["config.json"]), "config.json", "does not exist"),
    (dict(files=["model.safetensors"]), "hf", "has no model.safetensors"),
    (dict(config=dict(HF_CONFIG, model_type="roberta")), "config.json",
     "is not a BERT config (model_type 'roberta'"),
    (dict(config=dict(HF_CONFIG, hidden_act="silu")), "config.json",
     "hidden_act 'silu' has no bert_tf equivalent"),
    (dict(config=dict(HF_CONFIG, layer_norm_eps=1e-5)), "config.json", "layer_norm_eps"),
    (dict(config=dict(HF_CONFIG, position_embedding_type="relative_key")), "config.json",
     "position_embedding_type"),
    (dict(config=dict(HF_CONFIG, intermediate_size=40)), "model.safetensors",
     "shape mismatch bert.encoder.layer.0.intermediate.dense.weight [48, 32] (expected [40, 32])"),
    (dict(drop=["bert.encoder.layer.1.output.dense.bias"]), "model.safetensors",
     "missing bert.encoder.layer.1.output.dense.bias"),
    (dict(drop=["cls.seq_relationship.bias"]), "model.safetensors",
     "missing cls.seq_relationship.bias"),
    (dict(drop=["bert.pooler.dense.weight", "bert.pooler.dense.bias"]), "model.safetensors",
     "it has no pooler"),
    (dict(add={"bert.encoder.layer.2.output.dense.bias": np.zeros(32, np.float32)}),
     "model.safetensors", "unexpected bert.encoder.layer.2.output.dense.bias"),
    (dict(add={"cls.predictions.decoder.weight": np.zeros((30522, 32), np.float32)}),
     "model.safetensors", "cls.predictions.decoder.weight differs from"),
    (dict(state=make_hf_state(heads_=("classifier",)),
          config=dict(HF_CONFIG, architectures=["BertForMultipleChoice"])),
     "model.safetensors", "classifier.* belongs to BertForMultipleChoice"),
])
def test_bad_hf_folders_are_one_line_errors(tmp_path, kwargs, file, words):
  folder = _broken(tmp_path, **kwargs)
  with pytest.raises(UserInputError) as e:
    conversion.convert_to_google(folder, tmp_path / "out")
  message = str(e.value)
  assert words in message and "\n" not in message
  assert (os.path.join(folder, file) if file != "hf" else folder) in message
  assert not (tmp_path / "out").exists()


def test_pytorch_only_folder_says_how_to_fix(tmp_path):
  folder = _broken(tmp_path, files=["model.safetensors"])
  open(os.path.join(folder, "pytorch_model.bin"), "wb").close()
  with pytest.raises(UserInputError, match="pytorch_model.bin.*safe_serialization=True"):
    hf_files.read_hf_folder(folder)


def test_bad_google_inputs_are_clear_errors(release_dir, tmp_path):
  with pytest.raises(UserInputError, match="does not exist: .*index is missing"):
    conversion.convert_to_hf(tmp_path / "nope" / "bert_model.ckpt", tmp_path / "a")
  prefix = str(tmp_path / "alone" / "model.ckpt")
  _, variables = checkpoints.read_variables(release_dir / "bert_model.ckpt")
  checkpoints.save_checkpoint(prefix, extra=variables)
  with pytest.raises(UserInputError, match="bert_config.json does not exist; pass "
                                           "--bert_config_file"):
    conversion.convert_to_hf(prefix, tmp_path / "b")
  strange = dict(variables, **{"cls/other/output_weights": np.zeros((1, 32), np.float32)})
  checkpoints.save_checkpoint(prefix, extra=strange)
  with pytest.raises(UserInputError, match="no Hugging Face equivalent for "
                                           "cls/other/output_weights"):
    conversion.convert_to_hf(prefix, tmp_path / "c", bert_config_file=TINY.config,
                                 vocab_file=VOCAB_UNCASED)
  (tmp_path / "d").mkdir()
  (tmp_path / "d" / "x").write_text("")
  with pytest.raises(UserInputError, match="is not an empty folder"):
    conversion.convert_to_hf(release_dir, tmp_path / "d")
  wide = tmp_path / "wide.json"
  wide.write_text(open(TINY.config).read().replace('"hidden_size": 32', '"hidden_size": 64'))
  with pytest.raises(UserInputError, match="shape mismatch bert/embeddings/word_embeddings"):
    conversion.convert_to_hf(release_dir, tmp_path / "e", bert_config_file=str(wide))
  assert not (tmp_path / "e").exists()


def swag_run(folder):
  """A run_swag-like --output_dir: the tiny encoder and SWAG's one vector, its config and vocab
  beside it."""
  _, variables = checkpoints.read_variables(TINY.ckpt)
  variables = {n: v for n, v in variables.items() if n.startswith("bert/")}
  variables["cls/swag/output_weights"] = np.ones((1, 32), np.float32)
  checkpoints.save_checkpoint(folder / "model.ckpt-3", extra=variables)
  (folder / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-3"\n')
  shutil.copy(TINY.config, folder / "bert_config.json")
  shutil.copy(VOCAB_UNCASED, folder / "vocab.txt")
  return variables


def test_swag_head_is_refused_as_having_no_hf_form_and_its_encoder_converts(tmp_path):
  """Issue 38 case 15: a SWAG run's head is named as having no HF form (not "check that the
  bert_config.json belongs"), with --encoder_only as what converts; that writes its encoder."""
  variables = swag_run(tmp_path / "swag")
  with pytest.raises(UserInputError) as refused:
    conversion.convert_to_hf(tmp_path / "swag", tmp_path / "hf")
  message = str(refused.value)
  assert "run_swag's multiple-choice head (cls/swag/output_weights)" in message
  assert "has no Hugging Face form" in message and "pass --encoder_only" in message
  assert "bert_config.json belongs" not in message and "\n" not in message
  assert not (tmp_path / "hf").exists()
  architecture, _ = conversion.convert_to_hf(tmp_path / "swag", tmp_path / "hf",
                                             encoder_only=True)
  assert architecture == "BertModel"
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert config["architectures"] == ["BertModel"] and "id2label" not in config
  state = safetensors.numpy.load_file(str(tmp_path / "hf" / "model.safetensors"))
  assert sorted(state) == sorted(hf_shapes(dict(HF_CONFIG, intermediate_size=64,
                                                max_position_embeddings=64), heads_=()))
  np.testing.assert_array_equal(state["encoder.layer.1.attention.self.query.weight"],
                                variables["bert/encoder/layer_1/attention/self/query/kernel"].T)


# ---------------------------------------------------------------------------------------------
# The command line and a runner.


@pytest.mark.slow
def test_convert_checkpoint_command_both_ways(release_dir, tmp_path, script_session):
  convert = partial(run_script, "convert_checkpoint.py", shared=script_session)
  done = convert("--to=hf", "--input=%s" % release_dir, "--output_dir=%s" % (tmp_path / "hf"))
  assert done.returncode == 0, done.stderr
  assert "BertForPreTraining" in done.stdout and "do_lower_case=True" in done.stdout
  done = convert("--to=google", "--input=%s" % (tmp_path / "hf"),
                 "--output_dir=%s" % (tmp_path / "google"))
  assert done.returncode == 0, done.stderr
  assert "--do_lower_case=True" in done.stdout
  back = _read_google(str(tmp_path / "google" / "bert_model.ckpt"))
  for name, value in _read_google(TINY.ckpt).items():
    np.testing.assert_array_equal(back[name], value, err_msg=name)
  done = convert("--to=google", "--input=%s" % (tmp_path / "hf"),
                 "--output_dir=%s" % (tmp_path / "google"))
  assert done.returncode == 2 and "is not an empty folder" in done.stderr
  assert "Traceback" not in done.stderr
  done = convert("--to=google", "--do_lower_case=false", "--input=%s" % (tmp_path / "hf"),
                 "--output_dir=%s" % (tmp_path / "x"))
  assert done.returncode == 2 and "--do_lower_case only apply to --to=hf" in done.stderr
  # A SWAG run: one line saying its head has no HF form and what converts (issue 38 case 15).
  swag_run(tmp_path / "swag")
  done = convert("--to=hf", "--input=%s" % (tmp_path / "swag"),
                 "--output_dir=%s" % (tmp_path / "swag_hf"))
  assert done.returncode == 2 and "Traceback" not in done.stderr
  (line,) = [t for t in done.stderr.splitlines() if "error" in t.lower()]
  assert "has no Hugging Face form" in line and "pass --encoder_only" in line
  done = convert("--to=hf", "--encoder_only", "--input=%s" % (tmp_path / "swag"),
                 "--output_dir=%s" % (tmp_path / "swag_hf"))
  assert done.returncode == 0 and "(BertModel)" in done.stdout, done.stderr


@pytest.mark.slow
def test_run_classifier_init_checkpoint_from_an_hf_folder(release_dir, tmp_path):
  """The same eval numbers from the Google checkpoint and from its HF conversion."""
  conversion.convert_to_hf(release_dir / "bert_model.ckpt", tmp_path / "hf")
  data = tmp_path / "MRPC"
  shutil.copytree(FIXTURES / "classifier_data" / "MRPC", data)
  shutil.copy(data / "train.tsv", data / "dev.tsv")
  results = {}
  for name, init in (("google", TINY.ckpt), ("hf", str(tmp_path / "hf"))):
    done = run_script("run_classifier.py", "--task_name=MRPC", "--data_dir=%s" % data,
                      "--vocab_file=%s" % VOCAB_UNCASED, "--bert_config_file=%s" % TINY.config,
                      "--init_checkpoint=%s" % init, "--max_seq_length=32", "--do_eval",
                      "--eval_batch_size=5", "--output_dir=%s" % (tmp_path / name))
    assert done.returncode == 0, done.stderr
    results[name] = (tmp_path / name / "eval_results.txt").read_text()
  assert results["hf"] == results["google"] and "eval_loss" in results["hf"]
