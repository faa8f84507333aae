"""Checkpoint sources: open any of them once, load their weights, write Google's layout back.

A source is where pretrained weights come from: a Google-layout checkpoint (a
prefix such as `.../bert_model.ckpt`, its `.index` file, or a folder holding one)
or a Hugging Face folder (config.json + model.safetensors). `open_source` reads
either into one shape, `CheckpointSource`: Google-named weights, plus the config and
vocab found beside them. Every entry point (runners, extract_features.py,
export_tfhub.py, convert_checkpoint.py) goes through it, and `check_source` reads
every weight once so a damaged file stops before any work, naming the file.

`load_checkpoint` assigns a source's values to whatever declares its weights under
Google's names: the encoder and heads each have `checkpoint_variables()` (from the
table in bert_tf/checkpoints/names.py), so this module knows no layer classes. Loading is
strict by default: every mismatch (missing, unexpected, wrong shape) is reported at
once. A head is optional: if the source holds none of its variables it keeps its
initial values (fine-tuning from a pretraining checkpoint); if it holds some but not
all, that is an error. Variables of heads the model does not have (e.g.
`cls/predictions/*` when fine-tuning a classifier) are left unused.
`save_checkpoint` writes Google's names, shapes and dtypes, which the original code,
other ports and `tf.train.load_checkpoint` read. Optimizer slots (`adam_m`/`adam_v`)
and `global_step` are never model weights.
"""

import collections
import dataclasses
import json
import os
import uuid

import numpy as np
import tensorflow as tf

import bert_tf.checkpoints.hf_files as hf_files
import bert_tf.checkpoints.names as names
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError, io_reason

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
GOOGLE_CHECKPOINT_NAME = "bert_model.ckpt"
GOOGLE_CONFIG_NAME = "bert_config.json"


def variable_groups(encoder=None, heads=()):
  """[(group name, {google name: variable})]: the encoder ("encoder"), then each head."""
  groups = []
  if encoder is not None:
    groups.append(("encoder", encoder.checkpoint_variables()))
  for head in heads:
    groups.append((head.name, head.checkpoint_variables()))
  return groups


def variable_map(encoder=None, heads=()):
  """Google name -> variable for the encoder and heads, in a stable order."""
  out = collections.OrderedDict()
  for _, group in variable_groups(encoder, heads):
    out.update(group)
  return out


def variable_map_of(model):
  """Google name -> variable of everything a task model puts in Google-layout checkpoints."""
  out = collections.OrderedDict()
  for _, group in model.checkpoint_groups():
    out.update(group)
  return out


def encoder_variable_map(encoder):
  """Google name -> variable for every weight of a BertModel."""
  return encoder.checkpoint_variables()


def _damaged(path, name, error):
  reason = io_reason(error) if isinstance(error, tf.errors.OpError) else str(error)
  return UserInputError(
      "Checkpoint %s is damaged: reading %s failed (%s). Copy or download it again." %
      (path, name, reason.splitlines()[0] if reason else type(error).__name__))


@dataclasses.dataclass
class CheckpointSource:
  """Google-named weights from one source, and what was found beside them.

  `config_file`/`vocab_file` are None where the source has none beside it;
  `tokenizer` is an HF folder's casing ({"do_lower_case", "strip_accents"}) or None.
  """
  path: str
  kind: str  # "google" or "hf"
  shapes: dict  # google name -> list of dims (model weights only)
  _get: object = dataclasses.field(repr=False)
  config_file: str = None
  vocab_file: str = None
  tokenizer: dict = None
  heads: list = None  # HF: the head kinds the folder holds
  _config: BertConfig = dataclasses.field(default=None, repr=False)

  def get(self, name):
    """The value of one weight as numpy; a damaged file is a UserInputError naming it."""
    try:
      return np.asarray(self._get(name))
    except (tf.errors.OpError, IndexError, ValueError) as e:
      raise _damaged(self.path, name, e) from None

  def variables(self):
    """OrderedDict google name -> numpy array of every weight, sorted by name."""
    return collections.OrderedDict((n, self.get(n)) for n in sorted(self.shapes))

  @property
  def config(self):
    """The BertConfig found with the source (None when there is none beside it)."""
    if self._config is None and self.config_file:
      self._config = BertConfig.from_json_file(self.config_file)
    return self._config

  def verify(self):
    """Reads every weight once (checksums included), so damage shows now, not mid-run."""
    for name in self.shapes:
      self.get(name)
    return self


def resolve_checkpoint_path(path):
  """Accepts a checkpoint prefix, its .index file, or a folder holding bert_model.ckpt."""
  if not path:
    raise UserInputError("No checkpoint given: pass --init_checkpoint=PATH/bert_model.ckpt.")
  path = str(path)
  for suffix in (".index", ".data-00000-of-00001"):
    if path.endswith(suffix):
      path = path[:-len(suffix)]
  if os.path.isdir(path):
    if os.path.exists(os.path.join(path, GOOGLE_CHECKPOINT_NAME + ".index")):
      return os.path.join(path, GOOGLE_CHECKPOINT_NAME)
    latest = tf.train.latest_checkpoint(path)
    if latest:
      _check_not_past_best(path, latest)
      return latest
    raise UserInputError("Folder %s holds no checkpoint (no bert_model.ckpt.index and no "
                         "'checkpoint' state file)." % path)
  if not tf.io.gfile.exists(path + ".index"):
    raise UserInputError("Checkpoint %s does not exist: %s.index is missing (pass the "
                         "checkpoint prefix, e.g. .../bert_model.ckpt)." % (path, path))
  return path


def _check_not_past_best(folder, latest):
  """A run folder trained with --eval_every_steps answers with its best checkpoint, not its
  latest: a folder given for a checkpoint whose latest is not that best is ambiguous, and
  taking the latest would silently be another model than the run's outputs."""
  record = os.path.join(folder, "best_checkpoint.json")  # checkpoint_keeper.BestCheckpoint's
  try:
    with open(record, encoding="utf-8") as f:
      step = json.load(f).get("best_step")
  except (OSError, ValueError, AttributeError):
    return
  best = os.path.join(folder, "model.ckpt-%s" % step)
  if not isinstance(step, int) or not os.path.exists(best + ".index") or (
      os.path.normpath(best) == os.path.normpath(latest)):
    return
  raise UserInputError(
      "Folder %s was trained with --eval_every_steps: its best checkpoint (%s) is %s, its "
      "latest %s. Pass the one you mean: %s for the best, as the run's own outputs used." %
      (folder, record, os.path.basename(best), os.path.basename(latest), best))


def _open_google(path):
  path = resolve_checkpoint_path(path)
  try:
    reader = tf.train.load_checkpoint(path)
  except (tf.errors.OpError, ValueError) as e:
    message = getattr(e, "message", None) or str(e)
    raise UserInputError("Cannot read checkpoint %s: %s" %
                         (path, message.splitlines()[0])) from None
  all_shapes = reader.get_variable_to_shape_map()
  if _OBJECT_GRAPH_KEY in all_shapes and not any(n.startswith("bert/") for n in all_shapes):
    raise UserInputError(
        "Checkpoint %s is a TF2 object-based training checkpoint, not Google's layout; "
        "use the bert_model.ckpt that training exports (or its 'resume' state)." % path)
  shapes = {n: list(s) for n, s in all_shapes.items()
            if not names.is_ignored(n) and n != _OBJECT_GRAPH_KEY}
  folder = os.path.dirname(path)
  beside = lambda name: os.path.join(folder, name) if os.path.isfile(
      os.path.join(folder, name)) else None
  return CheckpointSource(path, "google", shapes, reader.get_tensor,
                          config_file=beside(GOOGLE_CONFIG_NAME),
                          vocab_file=beside(hf_files.VOCAB_NAME))


def _open_hf(path):
  hf = hf_files.read_hf_folder(path)
  vocab = os.path.join(os.fspath(path), hf_files.VOCAB_NAME)
  return CheckpointSource(
      os.fspath(path), "hf", {n: list(v.shape) for n, v in hf.variables.items()},
      hf.variables.__getitem__, config_file=hf.config_file,
      vocab_file=vocab if os.path.isfile(vocab) else None, tokenizer=hf.tokenizer,
      heads=hf.heads, _config=hf.config)


def open_source(path, kind=None):
  """A CheckpointSource for a Google prefix / .index / folder, or a Hugging Face folder.

  `kind` ("google" or "hf") reads `path` as that layout only, for callers that need one.
  """
  if isinstance(path, CheckpointSource):
    return path
  if kind == "hf" or (kind is None and hf_files.is_hf_folder(path)):
    return _open_hf(path)
  return _open_google(path)


def check_source(path):
  """The opened, fully read source; any problem is one UserInputError naming the file."""
  return open_source(path).verify()


def read_variables(path):
  """(resolved path, OrderedDict name -> numpy array) of a source's weights."""
  source = open_source(path)
  return source.path, source.variables()


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


def _check_hf_architecture(source, config):
  differences = source.config.architecture_differences(config)
  if differences:
    model_config = config.source_file or "the model's BertConfig"
    raise UserInputError(
        "Hugging Face config %s does not describe the same network as %s (%s; HF's "
        "\"gelu\" is bert_tf's \"gelu_exact\"). Pass --bert_config_file=%s, or the "
        "bert_config.json that convert_checkpoint.py --to=google writes for it." %
        (source.config_file, model_config, ", ".join(differences), source.config_file))


def load_checkpoint(path, encoder=None, heads=(), strict=True):
  """Assigns a source's values to the encoder's and heads' variables (see `load_groups`)."""
  return load_groups(path, variable_groups(encoder, heads), strict,
                     config=encoder.config if encoder is not None else None)


def load_groups(path, groups, strict=True, config=None):
  """Assigns a source's values to variable groups [(name, {google name: variable})].

  `path` is anything `open_source` takes, or an opened CheckpointSource. The group
  named "encoder" must be whole; any other group (a head) may be absent. `config`,
  the model's BertConfig, is compared with an HF folder's. With strict=False, missing
  and unexpected variables are tolerated (only matching names are assigned, like the
  original `get_assignment_map_from_checkpoint`), but a shape mismatch is still an error.
  """
  source = open_source(path)
  if source.kind == "hf" and config is not None and any(g == "encoder" for g, _ in groups):
    _check_hf_architecture(source, config)
  available = set(source.shapes)
  assignments, missing, mismatched, skipped = [], [], [], []
  wanted = set()
  for group_name, group in groups:
    wanted.update(group)
    if group_name != "encoder" and not any(n in available for n in group):
      skipped.append(group_name)
      continue
    for name, variable in group.items():
      if name not in available:
        missing.append(name)
      elif list(source.shapes[name]) != list(variable.shape):
        mismatched.append("%s: checkpoint %s, model %s" % (name, list(source.shapes[name]),
                                                           list(variable.shape)))
      else:
        assignments.append((name, variable))
  leftovers = sorted(available - wanted)
  unexpected = [n for n in leftovers if not names.is_head_name(n)]
  unused = [n for n in leftovers if names.is_head_name(n)]

  if mismatched or (strict and (missing or unexpected)):
    lines = ["Checkpoint %s does not match the model:" % source.path]
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
    variable.assign(source.get(name).astype(variable.dtype))
  return LoadReport(checkpoint=source.path, loaded=[n for n, _ in assignments],
                    skipped_heads=skipped, unused=unused + (leftovers if not strict else []))


def save_checkpoint(prefix, encoder=None, heads=(), global_step=None, extra=None):
  """Writes the variables under Google's names as a TF checkpoint at `prefix`.

  `extra` maps further names to values (e.g. `<name>/adam_m` optimizer slots).

  The files are written beside their final names and then renamed, so an
  interrupted save never leaves a half-written checkpoint under `prefix`.
  Returns `prefix`.
  """
  prefix = str(prefix)
  variables = variable_map(encoder, heads)
  tensors = [tf.convert_to_tensor(v) for v in variables.values()]
  tensor_names = list(variables)
  for name, value in (extra or {}).items():
    tensor_names.append(name)
    tensors.append(tf.convert_to_tensor(value))
  if global_step is not None:
    tensor_names.append("global_step")
    tensors.append(tf.constant(int(global_step), tf.int64))
  folder = os.path.dirname(prefix)
  if folder:
    tf.io.gfile.makedirs(folder)
  tmp = "%s.tmp-%s" % (prefix, uuid.uuid4().hex[:8])
  tf.raw_ops.SaveV2(prefix=tmp, tensor_names=tensor_names,
                    shape_and_slices=[""] * len(tensor_names), tensors=tensors)
  tf.io.gfile.rename(tmp + ".data-00000-of-00001", prefix + ".data-00000-of-00001",
                     overwrite=True)
  tf.io.gfile.rename(tmp + ".index", prefix + ".index", overwrite=True)
  return prefix
