"""Hugging Face BERT folders read and written: safetensors and JSON files, no torch.

Why: most BERT weights published today are Hugging Face folders (`config.json`,
`model.safetensors` or its shards, `vocab.txt`, `tokenizer_config.json`). This module
reads and writes those files; the names inside are translated by hf_state.py.
bert_tf/checkpoints/sources.py opens an HF folder through it, and bert_tf/checkpoints/conversion.py
writes whole folders.
"""

import collections
import json
import os
import struct

import numpy as np

import bert_tf.checkpoints.hf_state as hf_state
import bert_tf.checkpoints.names as names
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
VOCAB_NAME = "vocab.txt"


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
  """An HF BERT folder as Google-named variables: HFCheckpoint (see hf_state.py)."""
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
  variables, heads = hf_state.hf_to_google(state, config, weights_file,
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


# transformers' PretrainedConfig.problem_type values (only its XxxForSequenceClassification
# classes read it).
REGRESSION = "regression"
SINGLE_LABEL = "single_label_classification"
MULTI_LABEL = "multi_label_classification"


def problem_type(architecture, num_labels, recorded):
  """config.json's problem_type for a sequence classifier, from what its run recorded
  (run_folder.recorded_settings), or None.

  transformers reads it for the loss it fine-tunes with and for what its text-classification
  pipeline applies to the logits: nothing for "regression", a softmax for single-label. Left
  out, a one-output head gets a sigmoid (an STS-B score of 0.028 would read 0.507), so a
  regression head always says so. run_classifier records `labels` null for regression and
  the label list for a (softmax) classification; a head kind whose rows are independent
  labels (MULTI_LABEL) is decided here too when a run records one. With nothing recorded a
  one-output head is regression (run_classifier's only one-output head) and a wider one is
  left to transformers' default (a softmax, as single-label).
  """
  if architecture != names.HEAD_KINDS["classifier"].hf_architecture:
    return None
  if recorded.get("problem_type") == "multi_label":  # run_classifier on the user's own files
    return MULTI_LABEL
  if "labels" in recorded:
    return REGRESSION if recorded["labels"] is None else SINGLE_LABEL
  return REGRESSION if num_labels == 1 else None


def with_class_weights_corrected(state, recorded):
  """The state with the classifier's bias minus log(class weight) when its run recorded
  correct_class_weights (run_classifier on your own file): transformers then answers with the
  corrected logits bert_tf's evaluation and exports give (tasks/own_data/weights.py)."""
  weights = recorded.get("class_weights")
  bias = state.get("classifier.bias")
  if not (weights and recorded.get("correct_class_weights")) or bias is None:
    return state
  if len(weights) != bias.shape[0]:
    raise UserInputError("The run's settings record %d class weights for a classifier of %d "
                         "labels: the settings are not this checkpoint's." %
                         (len(weights), bias.shape[0]))
  shifted = (bias.astype(np.float64) - np.log(np.asarray(weights, np.float64))).astype(bias.dtype)
  return collections.OrderedDict((k, shifted if k == "classifier.bias" else v)
                                 for k, v in state.items())


def write_hf_folder(folder, variables, config, vocab_file, do_lower_case, strip_accents=None,
                    source="checkpoint", recorded=None):
  """Writes config.json, model.safetensors, vocab.txt, tokenizer_config.json. `recorded`:
  what the run recorded with the checkpoint (run_folder.recorded_settings): its `labels` name
  a classification head's rows in id2label, and decide problem_type; its task_name is
  transformers' finetuning_task.

  Everything is checked before the first file is written. Returns (state, architecture).
  """
  recorded = recorded or {}
  state, architecture, num_labels = hf_state.google_to_hf(variables, config, source)
  state = with_class_weights_corrected(state, recorded)
  labels = recorded.get("labels")
  hf_config = config.to_hf_dict(architecture, num_labels,
                                labels if isinstance(labels, list) else None)
  kind = problem_type(architecture, num_labels, recorded)
  if kind:
    hf_config["problem_type"] = kind
  task = recorded.get("task_name")
  if num_labels is not None and isinstance(task, str) and task:
    hf_config["finetuning_task"] = task  # head_labels reads a head by its task's label names
  os.makedirs(folder, exist_ok=True)
  save_safetensors(state, os.path.join(folder, WEIGHTS_NAME))
  write_json(os.path.join(folder, CONFIG_NAME), hf_config)
  write_json(os.path.join(folder, TOKENIZER_CONFIG_NAME),
             tokenizer_config(do_lower_case, strip_accents, config.max_position_embeddings))
  copy_file(vocab_file, os.path.join(folder, VOCAB_NAME))
  return state, architecture
