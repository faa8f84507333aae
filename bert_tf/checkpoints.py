"""THE name map between bert_tf's Keras variables and Google's TF1 checkpoint names.

`load_checkpoint` reads an original release (`bert_model.ckpt`) or any checkpoint
written in Google's layout into a BertModel and heads; `save_checkpoint` writes them
back with the same names, shapes and dtypes, so the original code, other ports and
`tf.train.load_checkpoint` read it. Loading is strict by default: every mismatch
(missing, unexpected, wrong shape) is reported at once in one UserInputError.
`global_step` and the optimizer's `adam_m`/`adam_v` slots are ignored.

A head is optional: if the checkpoint holds none of a head's variables the head
keeps its initial values (fine-tuning from a pretraining checkpoint); if it holds
some but not all, that is an error. Variables of heads the model does not have
(e.g. `cls/predictions/*` when fine-tuning a classifier) are left unused.

`load_checkpoint` also takes a Hugging Face BERT folder (config.json +
model.safetensors): it is converted in memory by bert_tf/hf_checkpoints.py, which
holds that name map, so every runner's --init_checkpoint accepts one.
"""

import collections
import dataclasses
import os
import uuid

import numpy as np
import tensorflow as tf

from bert_tf import heads as heads_lib
from bert_tf import hf_checkpoints
from bert_tf.errors import UserInputError

_IGNORED_SUFFIXES = ("/adam_m", "/adam_v")
_IGNORED_NAMES = ("global_step",)
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def _dense(prefix, layer):
  return {prefix + "/kernel": layer.kernel, prefix + "/bias": layer.bias}


def _layer_norm(prefix, layer):
  return {prefix + "/beta": layer.beta, prefix + "/gamma": layer.gamma}


def encoder_variable_map(encoder):
  """Google name -> variable for every weight of a BertModel."""
  emb = encoder.embeddings
  names = {
      "bert/embeddings/word_embeddings": emb.word_embeddings,
      "bert/embeddings/token_type_embeddings": emb.token_type_embeddings,
      "bert/embeddings/position_embeddings": emb.position_embeddings,
  }
  names.update(_layer_norm("bert/embeddings/LayerNorm", emb.layer_norm))
  for i, block in enumerate(encoder.encoder_layers):
    p = "bert/encoder/layer_%d/" % i
    names.update(_dense(p + "attention/self/query", block.attention.query))
    names.update(_dense(p + "attention/self/key", block.attention.key))
    names.update(_dense(p + "attention/self/value", block.attention.value))
    names.update(_dense(p + "attention/output/dense", block.attention_output))
    names.update(_layer_norm(p + "attention/output/LayerNorm", block.attention_norm))
    names.update(_dense(p + "intermediate/dense", block.intermediate))
    names.update(_dense(p + "output/dense", block.output_dense))
    names.update(_layer_norm(p + "output/LayerNorm", block.output_norm))
  names.update(_dense("bert/pooler/dense", encoder.pooler.dense))
  return names


def _pooled_logits(prefix, head):
  return {prefix + "output_weights": head.output_weights, prefix + "output_bias": head.output_bias}


def head_variable_map(head):
  """Google name -> variable for one head."""
  if isinstance(head, heads_lib.MaskedLMHead):
    names = _dense("cls/predictions/transform/dense", head.transform)
    names.update(_layer_norm("cls/predictions/transform/LayerNorm", head.layer_norm))
    names["cls/predictions/output_bias"] = head.output_bias
    return names
  if isinstance(head, heads_lib.NextSentenceHead):
    return _pooled_logits("cls/seq_relationship/", head)
  if isinstance(head, heads_lib.SpanHead):
    return _pooled_logits("cls/squad/", head)
  if isinstance(head, heads_lib.ClassificationHead):
    return _pooled_logits("", head)
  if isinstance(head, heads_lib.MultipleChoiceHead):
    return {"cls/swag/output_weights": head.output_weights}
  raise TypeError("No Google checkpoint names are defined for %s." % type(head).__name__)


# Names the original code gives head variables; a checkpoint may carry heads the
# model does not use.
_KNOWN_HEAD_PREFIXES = ("cls/predictions/", "cls/seq_relationship/", "cls/squad/", "cls/swag/")
_KNOWN_HEAD_NAMES = ("output_weights", "output_bias")


def _is_known_head_name(name):
  return name.startswith(_KNOWN_HEAD_PREFIXES) or name in _KNOWN_HEAD_NAMES


def variable_groups(encoder=None, heads=()):
  """[(group name, {google name: variable})]: the encoder, then each head."""
  groups = []
  if encoder is not None:
    groups.append(("encoder", encoder_variable_map(encoder)))
  for head in heads:
    groups.append((head.name, head_variable_map(head)))
  return groups


def variable_map(encoder=None, heads=()):
  """Google name -> variable for the encoder and heads, in a stable order."""
  names = collections.OrderedDict()
  for _, group in variable_groups(encoder, heads):
    names.update(group)
  return names


def resolve_checkpoint_path(path):
  """Accepts a checkpoint prefix, its .index file, or a folder holding bert_model.ckpt."""
  if not path:
    raise UserInputError("No checkpoint given: pass --init_checkpoint=PATH/bert_model.ckpt.")
  path = str(path)
  for suffix in (".index", ".data-00000-of-00001"):
    if path.endswith(suffix):
      path = path[:-len(suffix)]
  if os.path.isdir(path):
    if os.path.exists(os.path.join(path, "bert_model.ckpt.index")):
      return os.path.join(path, "bert_model.ckpt")
    latest = tf.train.latest_checkpoint(path)
    if latest:
      return latest
    raise UserInputError("Folder %s holds no checkpoint (no bert_model.ckpt.index and no "
                         "'checkpoint' state file)." % path)
  if not tf.io.gfile.exists(path + ".index"):
    raise UserInputError("Checkpoint %s does not exist: %s.index is missing (pass the "
                         "checkpoint prefix, e.g. .../bert_model.ckpt)." % (path, path))
  return path


def _open_reader(path):
  try:
    return tf.train.load_checkpoint(path)
  except (tf.errors.OpError, ValueError) as e:
    message = getattr(e, "message", None) or str(e)
    raise UserInputError("Cannot read checkpoint %s: %s" % (path, message.splitlines()[0])) from None


def _is_ignored(name):
  return name in _IGNORED_NAMES or name.endswith(_IGNORED_SUFFIXES)


def _check_google_layout(path, shapes):
  if _OBJECT_GRAPH_KEY in shapes and not any(n.startswith("bert/") for n in shapes):
    raise UserInputError(
        "Checkpoint %s is a TF2 object-based training checkpoint, not Google's layout; "
        "use the bert_model.ckpt that training exports (or its 'resume' state)." % path)


def _open_hf_folder(path, encoder):
  """An HF folder converted strictly to Google's names: (path, shapes, get_tensor)."""
  hf = hf_checkpoints.read_hf_folder(path)
  if encoder is not None:
    differences = hf_checkpoints.architecture_differences(hf.config, encoder.config)
    if differences:
      model_config = encoder.config.source_file or "the model's BertConfig"
      raise UserInputError(
          "Hugging Face config %s does not describe the same network as %s (%s; HF's "
          "\"gelu\" is bert_tf's \"gelu_exact\"). Pass --bert_config_file=%s, or the "
          "bert_config.json that convert_checkpoint.py --to=google writes for it." %
          (hf.config_file, model_config, ", ".join(differences), hf.config_file))
  shapes = {name: list(value.shape) for name, value in hf.variables.items()}
  return str(path), shapes, hf.variables.__getitem__


def read_variables(path):
  """(resolved prefix, OrderedDict name -> numpy array) of a Google-layout checkpoint's weights.

  Optimizer slots, global_step and TF2 object-graph entries are left out.
  """
  path = resolve_checkpoint_path(path)
  reader = _open_reader(path)
  shapes = reader.get_variable_to_shape_map()
  _check_google_layout(path, shapes)
  names = sorted(n for n in shapes if not _is_ignored(n) and n != _OBJECT_GRAPH_KEY)
  return path, collections.OrderedDict((n, np.asarray(reader.get_tensor(n))) for n in names)


@dataclasses.dataclass
class LoadReport:
  """What `load_checkpoint` did: assigned names, heads left as initialized, unused names."""
  checkpoint: str
  loaded: list
  skipped_heads: list
  unused: list


def _format_list(title, items, limit=25):
  lines = ["  %s (%d):" % (title, len(items))]
  lines += ["    " + item for item in items[:limit]]
  if len(items) > limit:
    lines.append("    ... and %d more" % (len(items) - limit))
  return lines


def load_checkpoint(path, encoder=None, heads=(), strict=True):
  """Assigns a Google-layout checkpoint's values to the encoder's and heads' variables.

  With strict=False, missing and unexpected variables are tolerated (only matching
  names are assigned, like the original `get_assignment_map_from_checkpoint`), but
  a shape mismatch is still an error.
  """
  if hf_checkpoints.is_hf_folder(path):
    path, shapes, get_tensor = _open_hf_folder(path, encoder)
  else:
    path = resolve_checkpoint_path(path)
    reader = _open_reader(path)
    shapes, get_tensor = reader.get_variable_to_shape_map(), reader.get_tensor
    _check_google_layout(path, shapes)
  available = {n for n in shapes if not _is_ignored(n) and n != _OBJECT_GRAPH_KEY}

  assignments, missing, mismatched, skipped = [], [], [], []
  wanted = set()
  for group_name, group in variable_groups(encoder, heads):
    wanted.update(group)
    present = [n for n in group if n in available]
    if group_name != "encoder" and not present:
      skipped.append(group_name)
      continue
    for name, variable in group.items():
      if name not in available:
        missing.append(name)
        continue
      if list(shapes[name]) != list(variable.shape):
        mismatched.append("%s: checkpoint %s, model %s" % (name, list(shapes[name]),
                                                           list(variable.shape)))
        continue
      assignments.append((name, variable))
  leftovers = sorted(available - wanted)
  unexpected = [n for n in leftovers if not _is_known_head_name(n)]
  unused = [n for n in leftovers if _is_known_head_name(n)]

  if mismatched or (strict and (missing or unexpected)):
    lines = ["Checkpoint %s does not match the model:" % path]
    if missing:
      lines += _format_list("missing from the checkpoint", missing)
    if unexpected:
      lines += _format_list("in the checkpoint but not in the model", unexpected)
    if mismatched:
      lines += _format_list("shape mismatch", mismatched)
    lines.append("Check that --bert_config_file (layers, sizes, vocab) belongs to this "
                 "checkpoint.")
    raise UserInputError("\n".join(lines))

  for name, variable in assignments:
    variable.assign(np.asarray(get_tensor(name)).astype(variable.dtype))
  return LoadReport(checkpoint=path, loaded=[n for n, _ in assignments], skipped_heads=skipped,
                    unused=unused + (leftovers if not strict else []))


def save_checkpoint(prefix, encoder=None, heads=(), global_step=None, extra=None):
  """Writes the variables under Google's names as a TF checkpoint at `prefix`.

  `extra` maps further names to values (e.g. `<name>/adam_m` optimizer slots).

  The files are written beside their final names and then renamed, so an
  interrupted save never leaves a half-written checkpoint under `prefix`.
  Returns `prefix`.
  """
  prefix = str(prefix)
  names = variable_map(encoder, heads)
  tensors = [tf.convert_to_tensor(v) for v in names.values()]
  names = list(names)
  for name, value in (extra or {}).items():
    names.append(name)
    tensors.append(tf.convert_to_tensor(value))
  if global_step is not None:
    names.append("global_step")
    tensors.append(tf.constant(int(global_step), tf.int64))
  folder = os.path.dirname(prefix)
  if folder:
    tf.io.gfile.makedirs(folder)
  tmp = "%s.tmp-%s" % (prefix, uuid.uuid4().hex[:8])
  tf.raw_ops.SaveV2(prefix=tmp, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=tensors)
  tf.io.gfile.rename(tmp + ".data-00000-of-00001", prefix + ".data-00000-of-00001",
                     overwrite=True)
  tf.io.gfile.rename(tmp + ".index", prefix + ".index", overwrite=True)
  return prefix
