"""Hugging Face BERT folders read and written as Google-named variables (numpy, no torch).

Why: bert_tf speaks Google's layout, and most BERT weights published today are
Hugging Face folders (`config.json`, `model.safetensors`, `vocab.txt`). This module
translates HF state dicts to and from Google's names with the table in
bert_tf/names.py, and reads and writes the folder's files; bert_tf/checkpoints.py
opens an HF folder through it, and bert_tf/conversion.py writes whole folders.

The contract: encoder keys are those of transformers' `BertModel`, with the prefix
"bert." when a head is in the file. A torch Linear weight is [out, in], the
transpose of a TF kernel [in, out] (rows marked `transpose` in names.py); the heads'
[labels, H] matrices are not transposed (the original multiplies with transpose_b,
as torch does). A torch LayerNorm weight/bias is TF's gamma/beta (old HF files say
gamma/beta too). The masked-LM decoder (`cls.predictions.decoder.weight` / `.bias`)
is tied to the word embeddings and to `cls.predictions.bias` in both layouts: it is
not written, and when a file holds it, it must equal what it is tied to.
`embeddings.position_ids` / `token_type_ids` (buffers some files hold) are ignored.
Values are copied bit for bit; bfloat16 and float16 tensors are widened to float32
(exactly) for Google's layout.

The HF class written follows the heads present (names.hf_architecture): none ->
BertModel, masked-LM and next-sentence -> BertForPreTraining, one head -> its class.
Google's checkpoints always hold the pooler, so BertForMaskedLM and
BertForQuestionAnswering files keep it (transformers reports it as unused); an HF
file without a pooler is an error, as bert_tf's encoder has the original's pooler.
"""

import collections
import json
import os
import struct

import numpy as np

from bert_tf import names
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
VOCAB_NAME = "vocab.txt"


def _head_rows(architectures=None):
  """kind -> [Name] of the heads HF has a form for.

  Given the HF file's `architectures`, kinds that share HF keys (HF names the sequence and
  the token classifier alike) are narrowed to one: the kind of the named class, else the
  first in the table.
  """
  out, owner = collections.OrderedDict(), {}
  for kind, head in names.HEAD_KINDS.items():
    if not all(row.hf for row in head.names):
      continue
    keys = tuple(row.hf for row in head.names)
    if architectures is not None and keys in owner:
      if head.hf_architecture in architectures:
        del out[owner[keys]]
      else:
        continue
    owner[keys] = kind
    out[kind] = head.names
  return out


def _label_counts(variables, heads, mismatched, shown):
  """The label count of each head with one (a [labels, H] matrix and its [labels] bias)."""
  counts = {}
  for kind in heads:
    rows = [row for row in names.head_names(kind) if names.LABELS in row.shape]
    if not rows:
      continue
    weights, bias = (variables.get(row.google) for row in rows)
    if weights is None:
      continue
    counts[kind] = int(np.shape(weights)[0])
    if bias is not None and np.shape(bias)[:1] != np.shape(weights)[:1]:
      mismatched.append("%s vs %s (label counts differ)" % shown(rows, weights, bias))
  return counts


def _shape_ok(actual, expected):
  return len(actual) == len(expected) and all(
      e is None or a == e for a, e in zip(actual, expected))


def _torch_shape(row, config):
  shape = names.shape_of(row, config)
  return tuple(reversed(shape)) if row.transpose else shape


def _shown(shape):
  return [d if d is not None else "n" for d in shape]


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
# State dicts.


def hf_to_google(state, config, source, architectures=()):
  """An HF state dict -> OrderedDict of Google name -> array, strictly.

  The whole encoder must be there, each head whole or not at all, and every key
  must be known; every problem is reported at once, naming `source`.
  Returns (variables, head kinds present).
  """
  keys = {}
  problems = []
  for key in state:
    short = key[len(names.HF_ENCODER_PREFIX):] if key.startswith(names.HF_ENCODER_PREFIX) else key
    short = short.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias")
    if short in keys:
      problems.append("%s and %s are the same weight" % (keys[short], key))
    keys[short] = key
  used = {short for short in names.HF_BUFFERS if short in keys}
  out = collections.OrderedDict()
  missing, mismatched = [], []

  def take(row):
    key = keys[row.hf]
    value = np.asarray(state[key])
    expected = _torch_shape(row, config)
    if not _shape_ok(value.shape, expected):
      mismatched.append("%s %s (expected %s)" % (key, list(value.shape), _shown(expected)))
    if value.dtype != np.float32 and value.dtype.kind == "f":
      value = value.astype(np.float32)
    if row.transpose and value.ndim == 2:
      value = np.ascontiguousarray(value.T)
    out[row.google] = value
    used.add(row.hf)

  # Missing encoder keys are named as this file names the others.
  prefix = names.HF_ENCODER_PREFIX if any(
      k.startswith(names.HF_ENCODER_PREFIX) for k in state) else ""
  for row in names.encoder(config.num_hidden_layers):
    if row.hf in keys:
      take(row)
    else:
      missing.append(prefix + row.hf)
  if len(missing) == 2 and all(m.startswith(prefix + "pooler.") for m in missing):
    problems.append("it has no pooler (pooler.dense.*: saved by a BERT without one, e.g. "
                    "BertForMaskedLM); bert_tf's encoder has the original's pooler")
    missing = []
  heads = []
  for kind, rows in _head_rows(list(architectures)).items():
    present = [row for row in rows if row.hf in keys]
    if not present:
      continue
    if kind == "classifier" and any(a in names.HF_OTHER_CLASSIFIERS for a in architectures):
      problems.append("classifier.* belongs to %s, not a sequence classifier like "
                      "run_classifier's head" % "/".join(architectures))
      used.update(row.hf for row in present)
      continue
    heads.append(kind)
    for row in rows:
      if row.hf in keys:
        take(row)
      else:
        missing.append(row.hf)
  _label_counts(out, heads, mismatched, lambda rows, w, b: (
      "%s %s" % (rows[0].hf, list(np.shape(w))), "%s %s" % (rows[1].hf, list(np.shape(b)))))
  for short, tied_to in names.HF_TIED.items():
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


def google_to_hf(variables, config, source):
  """Google name -> array (weights only) -> (HF state dict, architecture, num_labels).

  Encoder keys carry the "bert." prefix when a head is written, as transformers
  saves them; every variable must be in the contract and have its shape.
  """
  present = set(variables)
  rows, missing, mismatched, problems = [], [], [], []
  encoder_rows = names.encoder(config.num_hidden_layers)
  parts = [encoder_rows]
  heads = []
  for kind, head_rows in _head_rows().items():
    if any(row.google in present for row in head_rows):
      heads.append(kind)
      parts.append(head_rows)
  for part in parts:
    for row in part:
      if row.google in present:
        rows.append(row)
      else:
        missing.append(row.google)
  unexpected = sorted(present - {row.google for row in rows})
  for row in rows:
    shape = tuple(np.shape(variables[row.google]))
    expected = names.shape_of(row, config)
    if not _shape_ok(shape, expected):
      mismatched.append("%s %s (expected %s)" % (row.google, list(shape), _shown(expected)))
  counts = _label_counts(variables, heads, mismatched, lambda rows, w, b: (
      "%s %s" % (rows[1].google, list(np.shape(b))),
      "%s %s" % (rows[0].google, list(np.shape(w)))))
  num_labels = next(iter(counts.values()), None)
  architecture = names.hf_architecture(heads)
  if architecture is None:
    problems.append("no Hugging Face BERT class has these heads together: %s" % ", ".join(heads))
  problems.extend(_name_problems(missing, unexpected, mismatched,
                                 "no Hugging Face equivalent for"))
  if problems:
    raise UserInputError("Checkpoint %s cannot be converted with its BERT config: %s. Check "
                         "that the bert_config.json belongs to this checkpoint." %
                         (source, "; ".join(problems)))
  prefix = names.HF_ENCODER_PREFIX if heads else ""
  encoder = {row.google for row in encoder_rows}
  state = collections.OrderedDict()
  for row in rows:
    value = np.asarray(variables[row.google])
    if row.transpose:
      value = value.T
    key = (prefix + row.hf) if row.google in encoder else row.hf
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


def _shard_path(folder, shard, index):
  """A shard named by the index, which must be a file name inside the folder."""
  if not isinstance(shard, str) or not shard:
    raise UserInputError("Safetensors index %s names a shard %r that is not a file name." %
                         (index, shard))
  root = os.path.realpath(folder)
  path = os.path.realpath(os.path.join(folder, shard))
  if os.path.commonpath([root, path]) != root:
    raise UserInputError("Safetensors index %s names shard %r outside its folder; shards must "
                         "lie in %s." % (index, shard, folder))
  return path


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
      state.update(load_safetensors(_shard_path(folder, shard, index)))
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
  config = BertConfig.from_hf_dict(data, config_file)
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


def copy_file(src, dst):
  with open(src, "rb") as f, open(dst, "wb") as g:
    g.write(f.read())


def write_hf_folder(folder, variables, config, vocab_file, do_lower_case, strip_accents=None,
                    source="checkpoint", labels=None):
  """Writes config.json, model.safetensors, vocab.txt, tokenizer_config.json (`labels`: the
  names of a classification head's rows, for id2label).

  Everything is checked before the first file is written. Returns (state, architecture).
  """
  state, architecture, num_labels = google_to_hf(variables, config, source)
  os.makedirs(folder, exist_ok=True)
  save_safetensors(state, os.path.join(folder, WEIGHTS_NAME))
  write_json(os.path.join(folder, CONFIG_NAME), config.to_hf_dict(architecture, num_labels, labels))
  write_json(os.path.join(folder, TOKENIZER_CONFIG_NAME),
             tokenizer_config(do_lower_case, strip_accents, config.max_position_embeddings))
  copy_file(vocab_file, os.path.join(folder, VOCAB_NAME))
  return state, architecture
