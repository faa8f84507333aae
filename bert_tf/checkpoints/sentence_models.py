"""sentence-transformers folders (all-MiniLM-L6-v2 and kin) read as a BERT source plus pooling.

Why: the BERT-architecture checkpoints most used today are sentence-transformers
models, which are a Hugging Face BERT folder plus a few JSON files saying how
token vectors become one sentence vector. This module reads only those JSON files
(no torch, no sentence-transformers) and opens the weights through
`checkpoints.open_source`, so bert_tf's own BertModel computes the embedding.

The layout read:
  modules.json                 [{"idx", "name", "path", "type"}, ...] in order: a
                               Transformer, a Pooling, optionally a Normalize
  <transformer path>/          "" (the folder itself) or e.g. "0_Transformer": an HF
                               BERT folder (config.json, model.safetensors, vocab.txt,
                               tokenizer_config.json) and sentence_bert_config.json
                               (max_seq_length, do_lower_case)
  <pooling path>/config.json   the pooling_mode_* flags (or, newer, "pooling_mode")
                               and word_embedding_dimension
  <normalize path>/            usually absent: Normalize has no settings
  config_sentence_transformers.json  optional: a default prompt put before every text

Anything else (Dense, LayerNorm, Router, WordWeights, ...) is refused with the file
and module named: computing less than the folder says would give wrong vectors.
"""

import dataclasses
import os

from absl import logging

from bert_tf import checkpoints
import bert_tf.checkpoints.hf_files as hf_files
from bert_tf.errors import UserInputError

MODULES_NAME = "modules.json"
TRANSFORMER_CONFIG_NAME = "sentence_bert_config.json"
POOLING_CONFIG_NAME = "config.json"
MODEL_CONFIG_NAME = "config_sentence_transformers.json"

# The pooling modes bert_tf computes, in the order sentence-transformers concatenates
# them when several are on (its legacy flag order).
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
_LEGACY_POOLING_FLAGS = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
                         "pooling_mode_mean_tokens": "mean",
                         "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                         "pooling_mode_weightedmean_tokens": "weightedmean",
                         "pooling_mode_lasttoken": "lasttoken"}


@dataclasses.dataclass
class SentenceModel:
  """What a sentence-transformers folder says: weights, tokenizer, pooling, normalization.

  `source` is the Transformer module's CheckpointSource (kind "hf"); `do_lower_case`
  and `strip_accents` are the tokenizer settings that give sentence-transformers'
  tokens; `dimension` is the embedding's size.
  """
  folder: str
  source: checkpoints.CheckpointSource
  pooling: tuple
  normalize: bool
  max_seq_length: int
  do_lower_case: bool
  strip_accents: object
  prompt: str = ""
  similarity: str = None

  @property
  def config(self):
    return self.source.config

  @property
  def vocab_file(self):
    return self.source.vocab_file

  @property
  def dimension(self):
    return self.config.hidden_size * len(self.pooling)


def is_sentence_model_folder(path):
  """A folder with a modules.json (how sentence-transformers marks its models)."""
  path = os.fspath(path) if path else ""
  return bool(path) and os.path.isfile(os.path.join(path, MODULES_NAME))


def parse_pooling_mode(value, what):
  """A mode name or a comma-separated list (e.g. "cls,mean") -> tuple in the library's order."""
  modes = [m.strip() for m in value.split(",")] if isinstance(value, str) else value
  if not isinstance(modes, (list, tuple)) or not modes or not all(
      isinstance(m, str) for m in modes):
    raise UserInputError("%s: pooling mode %r must be one of %s, or several of them." %
                         (what, value, ", ".join(POOLING_MODES)))
  unknown = [m for m in modes if m not in POOLING_MODES]
  if unknown:
    raise UserInputError("%s: pooling mode %r is not one of %s." %
                         (what, unknown[0], ", ".join(POOLING_MODES)))
  return tuple(modes)


def _module_kind(entry, modules_file):
  """"Transformer", "Pooling" or "Normalize" from a modules.json entry's class path."""
  kind = entry.get("type") if isinstance(entry, dict) else None
  if not isinstance(kind, str) or not isinstance(entry.get("path", ""), str):
    raise UserInputError("%s: each module needs a \"type\" (a class path) and a \"path\", got %r."
                         % (modules_file, entry))
  package, _, name = kind.rpartition(".")
  if package.startswith("sentence_transformers") and name in ("Transformer", "Pooling",
                                                              "Normalize"):
    return name
  raise UserInputError(
      "%s: module %r (%s) is not supported; bert_tf computes sentence-transformers models "
      "made of a Transformer (BERT), a Pooling and optionally a Normalize module only." %
      (modules_file, entry.get("name", entry.get("path")), kind))


def _inside(folder, relative, modules_file):
  root = os.path.realpath(folder)
  path = os.path.normpath(os.path.join(folder, relative))
  if os.path.commonpath([root, os.path.realpath(path)]) != root:
    raise UserInputError("%s names module path %r outside the model folder." %
                         (modules_file, relative))
  return path


def _read_modules(folder):
  modules_file = os.path.join(folder, MODULES_NAME)
  entries = hf_files.read_json(modules_file, "sentence-transformers module list")
  if not isinstance(entries, list) or not entries:
    raise UserInputError("%s must be a non-empty JSON list of modules." % modules_file)
  if all(isinstance(e, dict) and isinstance(e.get("idx"), int) for e in entries):
    entries = sorted(entries, key=lambda e: e["idx"])
  kinds = [_module_kind(e, modules_file) for e in entries]
  layout = ", ".join(kinds)
  if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
    raise UserInputError("%s lists the modules %s; bert_tf reads Transformer, Pooling and an "
                         "optional Normalize, in that order." % (modules_file, layout))
  paths = [_inside(folder, e.get("path", ""), modules_file) for e in entries]
  return modules_file, dict(zip(kinds, paths))


def _read_pooling(folder, hidden_size):
  config_file = os.path.join(folder, POOLING_CONFIG_NAME)
  if not os.path.isfile(config_file):
    raise UserInputError("Pooling config %s does not exist: the Pooling module's folder must "
                         "hold its config.json (pooling_mode_* and word_embedding_dimension)."
                         % config_file)
  data = hf_files.read_json(config_file, "Pooling config")
  if not isinstance(data, dict):
    raise UserInputError("Pooling config %s must be a JSON object." % config_file)
  if "pooling_mode" in data:
    modes = parse_pooling_mode(data["pooling_mode"], "Pooling config %s" % config_file)
  else:
    unknown = sorted(k for k in data if k.startswith("pooling_mode_")
                     and k not in _LEGACY_POOLING_FLAGS and data[k])
    if unknown:
      raise UserInputError("Pooling config %s turns on %s, which bert_tf does not compute (it "
                           "has %s)." % (config_file, unknown[0], ", ".join(POOLING_MODES)))
    modes = tuple(m for k, m in _LEGACY_POOLING_FLAGS.items() if data.get(k))
    modes = modes or ("mean",)  # what sentence-transformers does when no flag is on
  dimension = data.get("embedding_dimension", data.get("word_embedding_dimension"))
  if dimension is not None and dimension != hidden_size:
    raise UserInputError("Pooling config %s says word_embedding_dimension=%r but the BERT's "
                         "hidden_size is %d." % (config_file, dimension, hidden_size))
  return modes, data.get("include_prompt") is not False


def _read_normalize(folder):
  config_file = os.path.join(folder, POOLING_CONFIG_NAME)
  if not os.path.isfile(config_file):
    return
  data = hf_files.read_json(config_file, "Normalize config")
  source = data.get("module_input_name", "sentence_embedding") if isinstance(data, dict) else None
  target = data.get("module_output_name") if isinstance(data, dict) else None
  if source != "sentence_embedding" or target not in (None, "sentence_embedding"):
    raise UserInputError("Normalize config %s normalizes %r, not the sentence embedding; "
                         "bert_tf supports only the sentence embedding's normalization." %
                         (config_file, source))


def _is_int(value):
  return isinstance(value, int) and not isinstance(value, bool)


def _read_transformer_settings(folder, source):
  """(max_seq_length, do_lower_case, strip_accents) as sentence-transformers tokenizes."""
  config_file = os.path.join(folder, TRANSFORMER_CONFIG_NAME)
  data = {}
  if os.path.isfile(config_file):
    data = hf_files.read_json(config_file, "sentence-transformers config")
    if not isinstance(data, dict):
      raise UserInputError("%s must be a JSON object." % config_file)
  if data.get("tokenizer_name_or_path"):
    raise UserInputError("%s takes its tokenizer from %r; bert_tf reads the tokenizer beside "
                         "the weights only." % (config_file, data["tokenizer_name_or_path"]))
  limit = source.config.max_position_embeddings
  max_seq_length = data.get("max_seq_length")
  if max_seq_length is None:
    # sentence-transformers then uses the tokenizer's model_max_length, capped at
    # max_position_embeddings.
    tokenizer_file = os.path.join(folder, hf_files.TOKENIZER_CONFIG_NAME)
    tokenizer = (hf_files.read_json(tokenizer_file, "Tokenizer config")
                 if os.path.isfile(tokenizer_file) else {})
    length = tokenizer.get("model_max_length") if isinstance(tokenizer, dict) else None
    max_seq_length = length if _is_int(length) and 2 <= length <= limit else limit
  if not _is_int(max_seq_length) or max_seq_length < 2:
    raise UserInputError("%s: max_seq_length must be an integer of at least 2, got %r." %
                         (config_file, max_seq_length))
  if max_seq_length > limit:
    # Not an error: sentence-transformers loads such a folder and embeds every text of up to
    # `limit` pieces exactly as bert_tf does at the cap; only a longer text differs (it fails
    # there, on the position table, and is cut to `limit` here).
    logging.warning("%s: max_seq_length %d exceeds max_position_embeddings %d of %s; using %d "
                    "(longer texts are cut there; sentence-transformers fails on them).",
                    config_file, max_seq_length, limit, source.config_file, limit)
    max_seq_length = limit
  casing = source.tokenizer or {"do_lower_case": True, "strip_accents": None}
  do_lower_case, strip_accents = casing["do_lower_case"], casing["strip_accents"]
  extra_lower = data.get("do_lower_case", False)
  if not isinstance(extra_lower, bool):
    raise UserInputError("%s: do_lower_case must be true or false." % config_file)
  if extra_lower and not do_lower_case:
    # sentence-transformers lower-cases before a cased tokenizer, which then keeps
    # accents unless its strip_accents says otherwise.
    do_lower_case, strip_accents = True, bool(strip_accents)
  return max_seq_length, do_lower_case, strip_accents


def _read_model_config(folder, include_prompt):
  """(default prompt, similarity function name) from config_sentence_transformers.json."""
  config_file = os.path.join(folder, MODEL_CONFIG_NAME)
  if not os.path.isfile(config_file):
    return "", None
  data = hf_files.read_json(config_file, "sentence-transformers model config")
  if not isinstance(data, dict):
    raise UserInputError("%s must be a JSON object." % config_file)
  prompt = ""
  name = data.get("default_prompt_name")
  if name:
    prompts = data.get("prompts") or {}
    if not isinstance(prompts, dict) or not isinstance(prompts.get(name), str):
      raise UserInputError("%s: default_prompt_name %r is not in its prompts." %
                           (config_file, name))
    prompt = prompts[name]
    if prompt and not include_prompt:
      raise UserInputError("%s: the default prompt is left out of pooling (include_prompt: "
                           "false), which bert_tf does not compute." % config_file)
  similarity = data.get("similarity_fn_name")
  return prompt, similarity if isinstance(similarity, str) else None


def read_sentence_model(folder):
  """The SentenceModel of a sentence-transformers folder; any problem names its file."""
  folder = os.fspath(folder)
  if not os.path.isdir(folder):
    raise UserInputError("Model folder %s does not exist (check --model_dir)." % folder)
  if not is_sentence_model_folder(folder):
    raise UserInputError("%s is not a sentence-transformers folder: it has no %s." %
                         (folder, MODULES_NAME))
  _, paths = _read_modules(folder)
  transformer = paths["Transformer"]
  if not hf_files.is_hf_folder(transformer):
    raise UserInputError("The Transformer module's folder %s has no Hugging Face config.json; "
                         "bert_tf reads the BERT weights from there." % transformer)
  source = checkpoints.open_source(transformer, kind="hf")
  if source.vocab_file is None:
    raise UserInputError("The Transformer module's folder %s has no vocab.txt (bert_tf's "
                         "WordPiece tokenizer needs it)." % transformer)
  pooling, include_prompt = _read_pooling(paths["Pooling"], source.config.hidden_size)
  if "Normalize" in paths:
    _read_normalize(paths["Normalize"])
  max_seq_length, do_lower_case, strip_accents = _read_transformer_settings(transformer, source)
  prompt, similarity = _read_model_config(folder, include_prompt)
  return SentenceModel(folder=folder, source=source, pooling=pooling,
                       normalize="Normalize" in paths, max_seq_length=max_seq_length,
                       do_lower_case=do_lower_case, strip_accents=strip_accents,
                       prompt=prompt, similarity=similarity)
