"""THE map between Hugging Face BERT folders and Google's checkpoint variables.

Why a second map: bert_tf speaks Google's layout (bert_tf/checkpoints.py maps it to
the Keras variables), and most BERT weights published today are Hugging Face
folders (`config.json`, `model.safetensors`, `vocab.txt`). Translating between the
two names and orientations here, in one table, lets convert_checkpoint.py write
either layout and every runner's --init_checkpoint read an HF folder directly,
with numpy and `safetensors` only (no torch; Google's files themselves are read
and written by bert_tf/checkpoints.py).

The contract. L layers, H hidden_size, I intermediate_size, V vocab_size,
P max_position_embeddings, T type_vocab_size, n labels. HF keys are those of
`BertModel`; with a head they carry the prefix "bert." (`BertForPreTraining`, ...).
A torch Linear weight is [out, in], the transpose of a TF kernel [in, out]; a
torch LayerNorm weight/bias is TF's gamma/beta (old HF files say gamma/beta too).

  HF key (a torch module: .weight/.bias)   Google name (dense: /kernel, /bias)    Google shape
  embeddings.word_embeddings               bert/embeddings/word_embeddings        [V, H]
  embeddings.position_embeddings           bert/embeddings/position_embeddings    [P, H]
  embeddings.token_type_embeddings         bert/embeddings/token_type_embeddings  [T, H]
  embeddings.LayerNorm                     bert/embeddings/LayerNorm (gamma/beta) [H]
  encoder.layer.N.attention.self.query     bert/encoder/layer_N/attention/self/query (T)
    (likewise key and value)                                                      [H, H], [H]
  encoder.layer.N.attention.output.dense   .../layer_N/attention/output/dense (T) [H, H], [H]
  encoder.layer.N.attention.output.LayerNorm  .../layer_N/attention/output/LayerNorm  [H]
  encoder.layer.N.intermediate.dense       .../layer_N/intermediate/dense (T)     [H, I], [I]
  encoder.layer.N.output.dense             .../layer_N/output/dense (T)           [I, H], [H]
  encoder.layer.N.output.LayerNorm         .../layer_N/output/LayerNorm           [H]
  pooler.dense                             bert/pooler/dense (T)                  [H, H], [H]
  cls.predictions.transform.dense          cls/predictions/transform/dense (T)    [H, H], [H]
  cls.predictions.transform.LayerNorm      cls/predictions/transform/LayerNorm    [H]
  cls.predictions.bias                     cls/predictions/output_bias            [V]
  cls.seq_relationship                     cls/seq_relationship/output_weights, output_bias
                                                                                  [2, H], [2]
  classifier (BertForSequenceClassification)  output_weights, output_bias         [n, H], [n]
  qa_outputs (BertForQuestionAnswering)    cls/squad/output_weights, output_bias  [2, H], [2]

(T): the kernel is the torch weight transposed. The last three rows' weights are
not transposed: the original multiplies by them with transpose_b, as torch does.
The masked-LM decoder (`cls.predictions.decoder.weight` / `.bias`) is tied to the
word embeddings and to `cls.predictions.bias` in both layouts: it is not written,
and when a file holds it, it must equal what it is tied to.
`embeddings.position_ids` / `token_type_ids` (buffers some files hold) are
ignored. Values are copied bit for bit; bfloat16 and float16 tensors are widened
to float32 (exactly) for Google's layout.

Activations: Hugging Face's "gelu" is the exact erf GELU, bert_tf's (the original's)
"gelu" is the tanh approximation, which HF calls "gelu_new". Converting maps HF
"gelu" <-> bert_tf "gelu_exact" and HF "gelu_new" <-> bert_tf "gelu", so a converted
model computes what its source computed.

The HF architecture written follows the heads present: none -> BertModel, masked-LM
and next-sentence -> BertForPreTraining, masked-LM only -> BertForMaskedLM,
next-sentence only -> BertForNextSentencePrediction, run_classifier's head ->
BertForSequenceClassification, run_squad's -> BertForQuestionAnswering. Google's
checkpoints always hold the pooler, so BertForMaskedLM and BertForQuestionAnswering
files keep it (transformers, whose classes have none, reports it as unused); an HF
file without a pooler is an error, as bert_tf's encoder has the original's pooler.
"""

import collections
import json
import os
import struct

import numpy as np

from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
VOCAB_NAME = "vocab.txt"

# bert_tf hidden_act -> HF hidden_act.
_TO_HF_ACTIVATION = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "tanh": "tanh",
                     "linear": "linear", "": "linear"}
# HF hidden_act -> bert_tf hidden_act (the tanh-approximation variants differ only in rounding).
_FROM_HF_ACTIVATION = {"gelu": "gelu_exact", "gelu_python": "gelu_exact", "gelu_new": "gelu",
                       "gelu_pytorch_tanh": "gelu", "gelu_python_tanh": "gelu",
                       "gelu_fast": "gelu", "relu": "relu", "tanh": "tanh", "linear": "linear"}

# transformers' BertConfig defaults, for fields an HF config.json leaves out
# (type_vocab_size differs from the original's default of 16).
_HF_DEFAULTS = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
                "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
                "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                "max_position_embeddings": 512, "type_vocab_size": 2,
                "initializer_range": 0.02}
_LAYER_NORM_EPS = 1e-12
# Fields that decide what the network computes (dropout and init do not).
ARCHITECTURE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                       "intermediate_size", "hidden_act", "max_position_embeddings",
                       "type_vocab_size")

_ARCHITECTURES = {(): "BertModel", ("mlm", "nsp"): "BertForPreTraining",
                  ("mlm",): "BertForMaskedLM", ("nsp",): "BertForNextSentencePrediction",
                  ("classifier",): "BertForSequenceClassification",
                  ("squad",): "BertForQuestionAnswering"}
# HF architectures whose `classifier.*` is not run_classifier's pooled head.
_OTHER_CLASSIFIERS = ("BertForTokenClassification", "BertForMultipleChoice")
_TIED = {"cls.predictions.decoder.weight": "embeddings.word_embeddings.weight",
         "cls.predictions.decoder.bias": "cls.predictions.bias"}
_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
_HEAD_PREFIXES = ("cls.", "classifier.", "qa_outputs.")
_ENCODER_PREFIX = "bert."

Pair = collections.namedtuple("Pair", "hf google transpose shape")


def _dense(hf, google, n_in, n_out):
  return [Pair(hf + ".weight", google + "/kernel", True, (n_in, n_out)),
          Pair(hf + ".bias", google + "/bias", False, (n_out,))]


def _norm(hf, google, size):
  return [Pair(hf + ".weight", google + "/gamma", False, (size,)),
          Pair(hf + ".bias", google + "/beta", False, (size,))]


def encoder_pairs(config):
  """[Pair] of the encoder (HF keys without the "bert." prefix), shapes in Google's orientation."""
  h, i = config.hidden_size, config.intermediate_size
  pairs = [
      Pair("embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", False,
           (config.vocab_size, h)),
      Pair("embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings", False,
           (config.max_position_embeddings, h)),
      Pair("embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings",
           False, (config.type_vocab_size, h)),
  ]
  pairs += _norm("embeddings.LayerNorm", "bert/embeddings/LayerNorm", h)
  for n in range(config.num_hidden_layers):
    hf, g = "encoder.layer.%d." % n, "bert/encoder/layer_%d/" % n
    for part in ("query", "key", "value"):
      pairs += _dense(hf + "attention.self." + part, g + "attention/self/" + part, h, h)
    pairs += _dense(hf + "attention.output.dense", g + "attention/output/dense", h, h)
    pairs += _norm(hf + "attention.output.LayerNorm", g + "attention/output/LayerNorm", h)
    pairs += _dense(hf + "intermediate.dense", g + "intermediate/dense", h, i)
    pairs += _dense(hf + "output.dense", g + "output/dense", i, h)
    pairs += _norm(hf + "output.LayerNorm", g + "output/LayerNorm", h)
  pairs += _dense("pooler.dense", "bert/pooler/dense", h, h)
  return pairs


def head_pairs(config):
  """{head: [Pair]} for the heads both layouts know; None in a shape is the label count."""
  h = config.hidden_size
  mlm = _dense("cls.predictions.transform.dense", "cls/predictions/transform/dense", h, h)
  mlm += _norm("cls.predictions.transform.LayerNorm", "cls/predictions/transform/LayerNorm", h)
  mlm.append(Pair("cls.predictions.bias", "cls/predictions/output_bias", False,
                  (config.vocab_size,)))

  def pooled(hf, google, labels):
    return [Pair(hf + ".weight", google + "output_weights", False, (labels, h)),
            Pair(hf + ".bias", google + "output_bias", False, (labels,))]

  return collections.OrderedDict([
      ("mlm", mlm),
      ("nsp", pooled("cls.seq_relationship", "cls/seq_relationship/", 2)),
      ("classifier", pooled("classifier", "", None)),
      ("squad", pooled("qa_outputs", "cls/squad/", 2)),
  ])


def _shape_ok(actual, expected):
  return len(actual) == len(expected) and all(
      e is None or a == e for a, e in zip(actual, expected))


def _names(items, limit=8):
  items = list(items)
  text = ", ".join(items[:limit])
  if len(items) > limit:
    text += ", ... (%d more)" % (len(items) - limit)
  return text


def _name_problems(missing, unexpected, mismatched, unexpected_label):
  """The missing, unexpected and misshapen names, worded alike in both directions."""
  problems = []
  if missing:
    problems.append("missing %s" % _names(missing))
  if unexpected:
    problems.append("%s %s" % (unexpected_label, _names(unexpected)))
  if mismatched:
    problems.append("shape mismatch %s" % _names(mismatched))
  return problems


# ---------------------------------------------------------------------------------------------
# Configs and activations.


def activation_from_hf(name, source):
  """HF hidden_act -> bert_tf hidden_act; an unknown one is an error naming `source`."""
  key = name.lower() if isinstance(name, str) else name
  if key not in _FROM_HF_ACTIVATION:
    raise UserInputError(
        "%s: hidden_act %r has no bert_tf equivalent (those that have: %s); this model "
        "cannot be converted." % (source, name, ", ".join(sorted(_FROM_HF_ACTIVATION))))
  return _FROM_HF_ACTIVATION[key]


def activation_to_hf(name, source="BertConfig"):
  """bert_tf hidden_act -> HF hidden_act ("gelu" -> "gelu_new", "gelu_exact" -> "gelu")."""
  key = (name or "").lower()
  if key not in _TO_HF_ACTIVATION:
    raise UserInputError("%s: hidden_act %r has no Hugging Face equivalent." % (source, name))
  return _TO_HF_ACTIVATION[key]


def config_from_hf(data, source):
  """A BertConfig from an HF config.json's dict; what bert_tf cannot compute is an error."""
  if not isinstance(data, dict):
    raise UserInputError("%s: expected a JSON object, got %s." % (source, type(data).__name__))
  model_type = data.get("model_type")
  if model_type is None and not all(str(a).startswith("Bert")
                                    for a in data.get("architectures") or []):
    model_type = "/".join(data["architectures"])
  if model_type not in (None, "bert"):
    raise UserInputError("%s is not a BERT config (model_type %r, expected \"bert\"); only "
                         "BERT checkpoints convert." % (source, model_type))
  if data.get("is_decoder") or data.get("add_cross_attention"):
    raise UserInputError("%s is a BERT decoder (is_decoder / add_cross_attention); bert_tf has "
                         "only the bidirectional encoder." % source)
  position = data.get("position_embedding_type", "absolute")
  if position not in (None, "absolute"):
    raise UserInputError("%s: position_embedding_type %r is not supported; bert_tf has the "
                         "original's absolute position embeddings." % (source, position))
  eps = data.get("layer_norm_eps", _LAYER_NORM_EPS)
  if not isinstance(eps, (int, float)) or abs(eps - _LAYER_NORM_EPS) > 1e-15:
    raise UserInputError("%s: layer_norm_eps is %r; bert_tf's LayerNorm uses the original's "
                         "1e-12, so this model cannot be converted." % (source, eps))
  fields = {name: data.get(name, default) for name, default in _HF_DEFAULTS.items()}
  fields["hidden_act"] = activation_from_hf(fields["hidden_act"], source)
  return BertConfig.from_dict(fields, source=source)


def config_to_hf(config, architecture="BertModel", num_labels=None):
  """An HF config.json dict for `config` (transformers' BertConfig field names)."""
  data = {
      "architectures": [architecture],
      "model_type": "bert",
      "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
      "hidden_act": activation_to_hf(config.hidden_act),
      "hidden_dropout_prob": config.hidden_dropout_prob,
      "hidden_size": config.hidden_size,
      "initializer_range": config.initializer_range,
      "intermediate_size": config.intermediate_size,
      "layer_norm_eps": _LAYER_NORM_EPS,
      "max_position_embeddings": config.max_position_embeddings,
      "num_attention_heads": config.num_attention_heads,
      "num_hidden_layers": config.num_hidden_layers,
      "pad_token_id": 0,
      "position_embedding_type": "absolute",
      "type_vocab_size": config.type_vocab_size,
      "vocab_size": config.vocab_size,
  }
  if num_labels is not None:
    data["id2label"] = {str(i): "LABEL_%d" % i for i in range(num_labels)}
    data["label2id"] = {"LABEL_%d" % i: i for i in range(num_labels)}
  return data


def architecture_differences(a, b):
  """["field: a vs b"] for the fields that change what the network computes."""
  out = []
  for name in ARCHITECTURE_FIELDS:
    x, y = getattr(a, name), getattr(b, name)
    if name == "hidden_act":
      x, y = (x or "linear").lower(), (y or "linear").lower()
    if x != y:
      out.append("%s %r vs %r" % (name, x, y))
  return out


# ---------------------------------------------------------------------------------------------
# State dicts.


def hf_to_google(state, config, source, architectures=()):
  """An HF state dict -> OrderedDict of Google name -> array, strictly.

  The whole encoder must be there, each head whole or not at all, and every key
  must be known; every problem is reported at once, naming `source`.
  Returns (variables, heads present).
  """
  keys = {}
  problems = []
  for key in state:
    short = key[len(_ENCODER_PREFIX):] if key.startswith(_ENCODER_PREFIX) else key
    short = short.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias")
    if short in keys:
      problems.append("%s and %s are the same weight" % (keys[short], key))
    keys[short] = key
  used = set()
  for short in _BUFFERS:
    if short in keys:
      used.add(short)
  out = collections.OrderedDict()
  missing, mismatched = [], []

  def take(pair):
    key = keys[pair.hf]
    value = np.asarray(state[key])
    if not _shape_ok(value.shape, _torch_shape(pair)):
      mismatched.append("%s %s (expected %s)" % (key, list(value.shape),
                                                list(_torch_shape(pair))))
    if value.dtype != np.float32 and value.dtype.kind == "f":
      value = value.astype(np.float32)
    if pair.transpose and value.ndim == 2:
      value = np.ascontiguousarray(value.T)
    out[pair.google] = value
    used.add(pair.hf)

  # Missing encoder keys are named as this file names the others.
  prefix = _ENCODER_PREFIX if any(k.startswith(_ENCODER_PREFIX) for k in state) else ""
  for pair in encoder_pairs(config):
    if pair.hf in keys:
      take(pair)
    else:
      missing.append(prefix + pair.hf)
  if len(missing) == 2 and all(m.startswith(prefix + "pooler.") for m in missing):
    problems.append("it has no pooler (pooler.dense.*: saved by a BERT without one, e.g. "
                    "BertForMaskedLM); bert_tf's encoder has the original's pooler")
    missing = []
  heads = []
  for head, pairs in head_pairs(config).items():
    present = [p for p in pairs if p.hf in keys]
    if not present:
      continue
    if head == "classifier" and any(a in _OTHER_CLASSIFIERS for a in architectures):
      problems.append("classifier.* belongs to %s, not a sequence classifier like "
                      "run_classifier's head" % "/".join(architectures))
      used.update(p.hf for p in present)
      continue
    heads.append(head)
    for pair in pairs:
      if pair.hf in keys:
        take(pair)
      else:
        missing.append(pair.hf)
  if "classifier" in heads:
    w, b = out["output_weights"], out["output_bias"]
    if w.shape[:1] != b.shape:
      mismatched.append("classifier.weight %s vs classifier.bias %s (label counts differ)" %
                        (list(w.shape), list(b.shape)))
  for short, tied_to in _TIED.items():
    if short not in keys:
      continue
    used.add(short)
    if tied_to in keys and not np.array_equal(np.asarray(state[keys[short]]),
                                              np.asarray(state[keys[tied_to]])):
      problems.append("%s differs from %s, to which BERT ties it (an untied output layer has "
                      "no place in Google's layout)" % (keys[short], keys[tied_to]))
  unexpected = sorted(keys[k] for k in keys if k not in used)
  fix = ""
  if missing or unexpected or mismatched:
    fix = " Check that config.json belongs to these weights."
  problems.extend(_name_problems(missing, unexpected, mismatched, "unexpected"))
  if problems:
    raise UserInputError("%s does not hold a BERT that bert_tf can load as its config "
                         "describes it: %s.%s" % (source, "; ".join(problems), fix))
  return out, heads


def _torch_shape(pair):
  return tuple(reversed(pair.shape)) if pair.transpose else pair.shape


def google_to_hf(variables, config, source):
  """Google name -> array (weights only) -> (HF state dict, architecture, num_labels).

  Encoder keys carry the "bert." prefix when a head is written, as transformers
  saves them; every variable must be in the contract and have its shape.
  """
  names = set(variables)
  out_pairs, missing, mismatched, problems = [], [], [], []
  for pair in encoder_pairs(config):
    if pair.google in names:
      out_pairs.append(pair)
    else:
      missing.append(pair.google)
  heads = []
  for head, pairs in head_pairs(config).items():
    present = [p for p in pairs if p.google in names]
    if not present:
      continue
    heads.append(head)
    for pair in pairs:
      if pair.google in names:
        out_pairs.append(pair)
      else:
        missing.append(pair.google)
  known = {p.google for p in out_pairs}
  unexpected = sorted(names - known)
  for pair in out_pairs:
    shape = tuple(np.shape(variables[pair.google]))
    if not _shape_ok(shape, pair.shape):
      mismatched.append("%s %s (expected %s)" % (pair.google, list(shape),
                                                list(p or "n" for p in pair.shape)))
  num_labels = None
  if "classifier" in heads and "output_weights" in names:
    num_labels = int(np.shape(variables["output_weights"])[0])
    if "output_bias" in names and tuple(np.shape(variables["output_bias"])) != (num_labels,):
      mismatched.append("output_bias %s vs output_weights %s (label counts differ)" %
                        (list(np.shape(variables["output_bias"])), [num_labels,
                                                                     config.hidden_size]))
  architecture = _ARCHITECTURES.get(tuple(heads))
  if architecture is None:
    problems.append("no Hugging Face BERT class has these heads together: %s" % ", ".join(heads))
  problems.extend(_name_problems(missing, unexpected, mismatched,
                                 "no Hugging Face equivalent for"))
  if problems:
    raise UserInputError("Checkpoint %s cannot be converted with its BERT config: %s. Check "
                         "that the bert_config.json belongs to this checkpoint." %
                         (source, "; ".join(problems)))
  prefix = _ENCODER_PREFIX if heads else ""
  encoder = {p.google for p in encoder_pairs(config)}
  state = collections.OrderedDict()
  for pair in out_pairs:
    value = np.asarray(variables[pair.google])
    if pair.transpose:
      value = value.T
    key = (prefix + pair.hf) if pair.google in encoder else pair.hf
    state[key] = np.ascontiguousarray(value)
  return state, architecture, num_labels


# ---------------------------------------------------------------------------------------------
# Files.


def is_hf_folder(path):
  """A folder with an HF config.json and no Google checkpoint (bert_model.ckpt) in it."""
  path = os.fspath(path) if path else ""
  return bool(path) and os.path.isdir(path) and os.path.isfile(
      os.path.join(path, CONFIG_NAME)) and not os.path.exists(
          os.path.join(path, "bert_model.ckpt.index"))


def read_json(path, what):
  if not os.path.isfile(path):
    raise UserInputError("%s %s does not exist." % (what, path))
  try:
    with open(path, "rb") as f:
      return json.loads(f.read().decode("utf-8"))
  except (UnicodeDecodeError, json.JSONDecodeError) as e:
    raise UserInputError("%s %s is not valid JSON: %s." % (what, path, e)) from None


_SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
                       "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


def _load_safetensors_raw(path):
  """The safetensors format read by hand, for bfloat16 (which numpy has no type for)."""
  with open(path, "rb") as f:
    (size,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(size))
    data = f.read()
  out = {}
  for key, spec in header.items():
    if key == "__metadata__":
      continue
    start, end = spec["data_offsets"]
    raw = data[start:end]
    if spec["dtype"] == "BF16":
      bits = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
      value = bits.view(np.float32)
    elif spec["dtype"] in _SAFETENSORS_DTYPES:
      value = np.frombuffer(raw, _SAFETENSORS_DTYPES[spec["dtype"]])
    else:
      raise UserInputError("%s: tensor %s has dtype %s, which cannot be converted." %
                           (path, key, spec["dtype"]))
    out[key] = value.reshape(spec["shape"])
  return out


def load_safetensors(path):
  """{key: numpy array} of one .safetensors file (bfloat16 widened to float32)."""
  import safetensors.numpy
  if not os.path.isfile(path):
    raise UserInputError("Weights file %s does not exist." % path)
  try:
    return safetensors.numpy.load_file(path)
  except TypeError as e:
    if "bfloat16" not in str(e):
      raise
    return _load_safetensors_raw(path)
  except (safetensors.SafetensorError, OSError) as e:
    raise UserInputError("Cannot read %s as safetensors: %s" % (path, e)) from None


def save_safetensors(state, path):
  """Writes {key: array} with the metadata transformers expects ({"format": "pt"})."""
  import safetensors.numpy
  safetensors.numpy.save_file({k: np.ascontiguousarray(v) for k, v in state.items()}, path,
                              metadata={"format": "pt"})
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(path, 0o666 & ~umask)  # the library creates it private (0600)


def load_hf_state(folder):
  """The folder's weights: model.safetensors, or the shards its index names."""
  single = os.path.join(folder, WEIGHTS_NAME)
  index = os.path.join(folder, WEIGHTS_INDEX_NAME)
  if os.path.isfile(single):
    return load_safetensors(single), single
  if os.path.isfile(index):
    weight_map = read_json(index, "Safetensors index").get("weight_map")
    if not isinstance(weight_map, dict):
      raise UserInputError("Safetensors index %s has no weight_map." % index)
    state = {}
    for shard in sorted(set(weight_map.values())):
      state.update(load_safetensors(os.path.join(folder, shard)))
    return state, index
  others = [n for n in ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack")
            if os.path.exists(os.path.join(folder, n))]
  fix = ("it has %s, which bert_tf does not read (no torch): save it as safetensors first, "
         "e.g. model.save_pretrained(folder, safe_serialization=True) in transformers"
         % " and ".join(others)) if others else "put the model's weights there"
  raise UserInputError("Hugging Face folder %s has no %s; %s." % (folder, WEIGHTS_NAME, fix))


HFCheckpoint = collections.namedtuple(
    "HFCheckpoint", "config variables heads config_file weights_file tokenizer")


def read_hf_folder(folder):
  """An HF BERT folder as Google-named variables: HFCheckpoint (see the module docstring)."""
  folder = os.fspath(folder)
  if not os.path.isdir(folder):
    raise UserInputError("Hugging Face folder %s does not exist." % folder)
  config_file = os.path.join(folder, CONFIG_NAME)
  if not os.path.isfile(config_file) and any(
      os.path.exists(os.path.join(folder, n)) for n in ("bert_config.json",
                                                        "bert_model.ckpt.index")):
    raise UserInputError("%s is a folder in Google's layout (bert_config.json / bert_model.ckpt),"
                         " not a Hugging Face one; convert it with --to=hf." % folder)
  data = read_json(config_file, "Hugging Face config")
  config = config_from_hf(data, config_file)
  config.source_file = config_file
  state, weights_file = load_hf_state(folder)
  variables, heads = hf_to_google(state, config, weights_file,
                                  architectures=data.get("architectures") or ())
  return HFCheckpoint(config, variables, heads, config_file, weights_file,
                      read_tokenizer_config(folder))


def read_tokenizer_config(folder):
  """{"do_lower_case", "strip_accents"} from tokenizer_config.json (HF's defaults if absent)."""
  path = os.path.join(folder, TOKENIZER_CONFIG_NAME)
  data = read_json(path, "Tokenizer config") if os.path.isfile(path) else {}
  lower = data.get("do_lower_case", True)
  strip = data.get("strip_accents")
  if not isinstance(lower, bool) or strip not in (None, True, False):
    raise UserInputError("Tokenizer config %s: do_lower_case must be true/false and "
                         "strip_accents true/false/null." % path)
  return {"do_lower_case": lower, "strip_accents": strip}


def tokenizer_config(do_lower_case, strip_accents, max_length):
  """tokenizer_config.json for transformers' BertTokenizer with the original's settings."""
  return {"tokenizer_class": "BertTokenizer", "do_lower_case": bool(do_lower_case),
          "strip_accents": strip_accents, "tokenize_chinese_chars": True,
          "model_max_length": max_length, "unk_token": "[UNK]", "sep_token": "[SEP]",
          "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"}


def write_json(path, data):
  with open(path, "w", encoding="utf-8") as f:
    f.write(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _write_bytes_copy(src, dst):
  with open(src, "rb") as f, open(dst, "wb") as g:
    g.write(f.read())


def write_hf_folder(folder, variables, config, vocab_file, do_lower_case, strip_accents=None,
                    source="checkpoint"):
  """Writes config.json, model.safetensors, vocab.txt, tokenizer_config.json.

  Everything is checked before the first file is written. Returns (state, architecture).
  """
  state, architecture, num_labels = google_to_hf(variables, config, source)
  os.makedirs(folder, exist_ok=True)
  save_safetensors(state, os.path.join(folder, WEIGHTS_NAME))
  write_json(os.path.join(folder, CONFIG_NAME), config_to_hf(config, architecture, num_labels))
  write_json(os.path.join(folder, TOKENIZER_CONFIG_NAME),
             tokenizer_config(do_lower_case, strip_accents, config.max_position_embeddings))
  _write_bytes_copy(vocab_file, os.path.join(folder, VOCAB_NAME))
  return state, architecture


# ---------------------------------------------------------------------------------------------
# Whole conversions (convert_checkpoint.py). Google's files are read and written by
# bert_tf/checkpoints.py, imported here only when needed (it imports this module).


def _check_output_dir(path, input_path):
  if os.path.abspath(path) == os.path.abspath(os.fspath(input_path).rstrip("/")):
    raise UserInputError("--output_dir is the input folder %s; write the conversion elsewhere."
                         % input_path)
  if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
    raise UserInputError("--output_dir %s exists and is not an empty folder; choose a new one."
                         % path)


def _checked_vocab(vocab_file, config, config_file):
  from bert_tf import tokenization
  if not os.path.isfile(vocab_file):
    raise UserInputError("Vocab file %s does not exist; pass --vocab_file=PATH/vocab.txt." %
                         vocab_file)
  vocab = tokenization.load_vocab(vocab_file)
  if len(vocab) > config.vocab_size:
    raise UserInputError("Vocab file %s has %d tokens but vocab_size=%d in %s; pass the vocab "
                         "that belongs to the checkpoint with --vocab_file." %
                         (vocab_file, len(vocab), config.vocab_size, config_file))
  return vocab


def guess_do_lower_case(checkpoint, vocab):
  """A Google release's casing when its folder name is known, else the vocab's."""
  from bert_tf import tokenization
  for lower in (True, False):
    try:
      tokenization.validate_case_matches_checkpoint(lower, checkpoint)
    except ValueError:
      return not lower
  words = (t for t in vocab if not (t.startswith("[") and t.endswith("]")))
  return not any(t != t.lower() for t in words)


def convert_to_google(hf_folder, output_dir, vocab_file=None):
  """HF folder -> output_dir/{bert_config.json, vocab.txt, bert_model.ckpt.*}.

  Returns (checkpoint prefix, HFCheckpoint).
  """
  from bert_tf import checkpoints
  hf_folder, output_dir = os.fspath(hf_folder), os.fspath(output_dir)
  _check_output_dir(output_dir, hf_folder)
  hf = read_hf_folder(hf_folder)
  vocab_file = vocab_file or os.path.join(hf_folder, VOCAB_NAME)
  _checked_vocab(vocab_file, hf.config, hf.config_file)
  os.makedirs(output_dir, exist_ok=True)
  with open(os.path.join(output_dir, "bert_config.json"), "w", encoding="utf-8") as f:
    f.write(hf.config.to_json_string())
  _write_bytes_copy(vocab_file, os.path.join(output_dir, "vocab.txt"))
  prefix = checkpoints.save_checkpoint(os.path.join(output_dir, "bert_model.ckpt"),
                                       extra=hf.variables)
  return prefix, hf


def convert_to_hf(checkpoint, output_dir, bert_config_file=None, vocab_file=None,
                  do_lower_case=None, strip_accents=None):
  """Google-layout checkpoint -> HF folder in output_dir.

  bert_config_file and vocab_file default to the files beside the checkpoint;
  do_lower_case to `guess_do_lower_case`. Returns (architecture, do_lower_case).
  """
  from bert_tf import checkpoints
  output_dir = os.fspath(output_dir)
  _check_output_dir(output_dir, checkpoint)
  prefix, variables = checkpoints.read_variables(checkpoint)
  folder = os.path.dirname(prefix)
  config_file = bert_config_file or os.path.join(folder, "bert_config.json")
  if not os.path.isfile(config_file):
    raise UserInputError("BERT config file %s does not exist; pass --bert_config_file=PATH/"
                         "bert_config.json for checkpoint %s." % (config_file, prefix))
  config = BertConfig.from_json_file(config_file)
  vocab_file = vocab_file or os.path.join(folder, VOCAB_NAME)
  vocab = _checked_vocab(vocab_file, config, config_file)
  if do_lower_case is None:
    do_lower_case = guess_do_lower_case(prefix, vocab)
  _, architecture = write_hf_folder(output_dir, variables, config, vocab_file, do_lower_case,
                                    strip_accents, source=prefix)
  return architecture, do_lower_case
