"""The task-neutral SavedModel core: tokenizer, weights, signatures in one folder, saved atomically.

`save_serving_module` saves a tf.Module that owns a `BertTextTokenizer`
(vocabulary and character tables are graph constants, so no path to vocab.txt
survives) and the models' variables, with one tf.function per signature, plus
`assets.extra/bert_tf_export.json`, a small human-readable description. Each
task's export lives in the task's package and calls the task model itself:
`bert_tf.tasks.glue.export`, `bert_tf.tasks.squad.export`, `bert_tf.tasks.swag.export`.

Loading needs only `import tensorflow, tensorflow_text` (the latter registers the
tokenizer's ops); bert_tf is not needed. Tools that do not import
tensorflow_text (the plain `saved_model_cli run`, a TF Serving binary built
without tf-text ops) cannot load the graph at all, `serve_ids` included. Signatures
are traced with `jit_compile=False`, so the serving process decides: graph mode
compiles nothing and takes any batch and length, and was as fast or faster for
float32 and bfloat16; for int8 the process can turn on XLA itself (TF_XLA_FLAGS
auto-clustering, docs/serving.md), which then compiles once per batch shape.
"""

import contextlib
import fcntl
import json
import logging
import os
import platform
import unicodedata
import uuid

from absl import logging as absl_logging
import tensorflow as tf

import bert_tf
from bert_tf.errors import UserInputError
from bert_tf.modeling import INPUT_NAMES
from bert_tf.text import BertTextTokenizer
from bert_tf.utils import precision

METADATA_DIR = "assets.extra"
METADATA_FILE = "bert_tf_export.json"
VOCAB_FILE = "vocab.txt"  # in METADATA_DIR, for exports with a tokenizer
DEFAULT_SIGNATURE = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY  # "serving_default"
IDS_SIGNATURE = "serve_ids"
IDS_INPUTS = INPUT_NAMES  # the three packed int32 inputs, TF Hub names


# ------------------------------------------------------------------------- core

class ServingModule(tf.Module):
  """Owns the tokenizer (None for an ids-only export) and the models' variables.

  The Keras models themselves are deliberately not tracked, only their underlying
  tf.Variables: a tracked Keras 3 variable is exported as a second tf.Variable
  beside the one the graph reads, and the TF1/C++ loader (TF Serving,
  `saved_model_cli run`) restores the checkpoint into that copy, leaving the read
  one uninitialized. Signature functions close over the models directly.
  """

  def __init__(self, tokenizer, models):
    super().__init__(name="bert_tf_export")
    self.tokenizer = tokenizer
    self.model_variables = _plain_variables(models)
    # What the models compute in (bert_tf.utils.precision), for the export's metadata.
    self.inference_precision = "/".join(sorted({precision.of(m) for m in models})) or None


def _plain_variables(models):
  """The tf.Variables behind the Keras models' weights, each once."""
  found, seen = [], set()
  for model in models:
    for weight in model.weights:
      variable = getattr(weight, "value", weight)
      if not isinstance(variable, tf.Variable):
        raise TypeError("Cannot export weight %s: not backed by a tf.Variable "
                        "(is the Keras backend TensorFlow?)." % weight.path)
      if id(variable) not in seen:
        seen.add(id(variable))
        found.append(variable)
  return found


def text_spec(name):
  """A batch of raw strings, one per example."""
  return tf.TensorSpec([None], tf.string, name=name)


def ids_specs():
  """The three packed int32 [batch, seq] inputs, named like the tokenizer's outputs."""
  return [tf.TensorSpec([None, None], tf.int32, name=n) for n in IDS_INPUTS]


def serving_function(fn, input_signature):
  """A signature tf.function: fixed input specs, no XLA (the loader's choice, see the module
  docstring), no AutoGraph (plain ops only)."""
  return tf.function(fn, input_signature=input_signature, jit_compile=False, autograph=False)


def checked_ids(input_word_ids, input_mask, input_type_ids, config):
  """The encoder's input dict, checked: a too-long batch, or an id or type id outside the
  model's tables (negative ones included, which a gather would silently wrap), fails with a
  one-line message saying what is wrong (the offending value and the limit) instead of a
  Gather error deep inside the model or another token's logits. Every ids signature and the
  TF Hub encoder call this, so the checks are written once.

  Each check is one min or max, one StringFormat of a scalar and one Assert op: with a string
  message tf.debugging.Assert is that bare op, where tf.debugging.assert_less and kin add a
  guarding cond of about eight ops each, which every request would run."""
  word_min, word_max = tf.reduce_min(input_word_ids), tf.reduce_max(input_word_ids)
  type_min, type_max = tf.reduce_min(input_type_ids), tf.reduce_max(input_type_ids)
  length = tf.shape(input_word_ids)[1]
  checks = [
      _check(length <= config.max_position_embeddings,
             "sequence length {} exceeds max_position_embeddings %d" %
             config.max_position_embeddings, length),
      _check(word_min >= 0, "input_word_ids holds id {}; ids must not be negative", word_min),
      _check(word_max < config.vocab_size,
             "input_word_ids holds id {}, the vocab has %d entries" % config.vocab_size, word_max),
      _check(type_min >= 0, "input_type_ids holds type id {}; type ids must not be negative",
             type_min),
      _check(type_max < config.type_vocab_size,
             "input_type_ids holds type id {}, type_vocab_size is %d" % config.type_vocab_size,
             type_max),
  ]
  with tf.control_dependencies(checks):
    return {"input_word_ids": tf.identity(input_word_ids), "input_mask": input_mask,
            "input_type_ids": tf.identity(input_type_ids)}


def _check(condition, template, value):
  """An Assert op failing (InvalidArgumentError) with `template`, its {} the scalar `value`,
  where `condition` is false; an empty batch's min and max are the dtype's extremes, so it
  passes every check."""
  return tf.debugging.Assert(condition, [tf.strings.format(template, value)])


def make_tokenizer(vocab_file, do_lower_case, strip_accents=None):
  """The in-graph tokenizer an export embeds (strip_accents None: tied to lower-casing)."""
  return BertTextTokenizer(os.fspath(vocab_file), do_lower_case=do_lower_case,
                           strip_accents=strip_accents)


def _signature_io(concrete):
  """{"inputs": {name: spec}, "outputs": {name: spec}} of a concrete function, as strings."""

  def describe(spec):
    return {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}

  args, kwargs = concrete.structured_input_signature
  inputs = {s.name: describe(s) for s in tf.nest.flatten((args, kwargs))}
  outputs = {k: describe(tf.TensorSpec.from_tensor(v))
             for k, v in concrete.structured_outputs.items()}
  return {"inputs": inputs, "outputs": outputs}


class _CaptureRenameFilter(logging.Filter):
  """Drops TensorFlow's note that a signature "contains input name(s) ... with unsupported
  characters which will be renamed". The names it means are those of the tensors the graph
  captures (variable handles, the tokenizer's tables: `resource`, `table_handle`, ...), which
  TensorFlow names after their scoped op and no caller ever passes; the signatures' inputs keep
  the names bert_tf gives them (plain lower-case words). Users read the note as a failure."""

  def filter(self, record):
    return "with unsupported characters which will be renamed" not in str(record.msg)


@contextlib.contextmanager
def _quiet_capture_renames():
  logger, note = absl_logging.get_absl_logger(), _CaptureRenameFilter()  # TF logs it with absl
  logger.addFilter(note)
  try:
    yield
  finally:
    logger.removeFilter(note)


def _is_nonempty_dir(path):
  return tf.io.gfile.isdir(path) and bool(tf.io.gfile.listdir(path))


def holds_files(export_dir):
  """Whether `export_dir` is a folder with something in it (an export to be replaced)."""
  return _is_nonempty_dir(os.fspath(export_dir))


def check_export_dir(export_dir, overwrite=False,
                     fix="choose another folder or pass overwrite=True to replace it"):
  """Fails early (e.g. before training) if an export to `export_dir` would be refused;
  `fix` is what the message tells the user to do (a script names its flag)."""
  export_dir = os.fspath(export_dir)
  if tf.io.gfile.exists(export_dir) and not tf.io.gfile.isdir(export_dir):
    raise UserInputError("Export path %s is a file, not a folder." % export_dir)
  if not overwrite and _is_nonempty_dir(export_dir):
    raise UserInputError("Export folder %s already exists and is not empty; %s." %
                         (export_dir, fix))
  parent = os.path.dirname(export_dir.rstrip("/")) or "."
  if not tf.io.gfile.isdir(parent):
    raise UserInputError("Folder %s (for the export) does not exist." % parent)


def _target(export_dir):
  """The folder `export_dir` names, a symlink resolved (a local path): the export is moved
  and written there, and the link is left as it is, pointing at the new export (moved aside
  itself, the link would be lost, and deleting it as a folder fails)."""
  return export_dir if "://" in export_dir else os.path.realpath(export_dir)


@contextlib.contextmanager
def replacing(export_dir):
  """Moves an existing export at `export_dir` aside while a new one is written there: it is
  deleted once the new one is saved, and put back if writing fails or is interrupted (Ctrl-C),
  so nothing is lost. Whatever the failed write left at `export_dir` (a whole new export, if
  the interrupt came after its rename) is removed first: the folder holds the old export or
  the new one whole, never both. Hold `locked(export_dir)` around it, so no other process
  writes there meanwhile. A symlink is left in place: its target is what is replaced."""
  export_dir = _target(os.fspath(export_dir).rstrip("/") or "/")
  aside = None
  if _is_nonempty_dir(export_dir):
    aside = "%s.replaced-%d-%s" % (export_dir, os.getpid(), uuid.uuid4().hex[:8])
    tf.io.gfile.rename(export_dir, aside)
  try:
    yield
  except BaseException:
    if (aside is not None and tf.io.gfile.exists(export_dir)) or _is_nonempty_dir(export_dir):
      tf.io.gfile.rmtree(export_dir)
    if aside is not None:
      tf.io.gfile.rename(aside, export_dir)
    raise
  if aside is not None:
    tf.io.gfile.rmtree(aside)


def _lock_path(export_dir):
  """The lock file of `export_dir`: beside it, since the folder itself is moved and replaced."""
  parent, name = os.path.split(os.path.abspath(export_dir))
  return os.path.join(parent, ".%s.bert_tf_export.lock" % name)


@contextlib.contextmanager
def locked(export_dir):
  """Holds an exclusive lock on `export_dir` (waiting for another process's export there to
  end), so that deciding what the folder holds and writing it are one step: two runs exporting
  to one folder take turns, and the second sees what the first wrote. The kernel's lock
  (flock), as run_lock's: released however the holder ends. Remote folders (gs://) are not
  locked; the log says so."""
  export_dir = os.fspath(export_dir)
  if "://" in export_dir:
    absl_logging.info("Not locking %s: a remote folder cannot hold a file lock; make sure no "
                      "other run exports there.", export_dir)
    yield
    return
  path = _lock_path(export_dir)
  while True:
    try:
      handle = open(path, "a+")
    except OSError as e:
      raise UserInputError("Cannot export to %s: its lock file %s cannot be written (%s)." %
                           (export_dir, path, e.strerror or e)) from None
    try:
      try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        absl_logging.info("Waiting for another run's export to %s to end.", export_dir)
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
      # The holder before may have removed the file as it ended: then this lock is on a file
      # no one else can see; take the one now at `path`.
      try:
        same = os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
      except FileNotFoundError:
        same = False
    except BaseException:
      handle.close()
      raise
    if same:
      break
    handle.close()
  try:
    yield
  finally:
    try:
      os.remove(path)  # still locked, so no one locks a file that is about to vanish
    except OSError:
      pass
    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    handle.close()


def save_serving_module(export_dir, module, signatures, metadata, overwrite=False):
  """Saves `module` as a SavedModel at `export_dir`, all or nothing.

  Args:
    export_dir: destination folder; an existing non-empty one is replaced only if
      `overwrite`.
    module: a ServingModule.
    signatures: {signature name: tf.function with an input_signature}, each
      returning a dict of named tensors; also kept as attributes of `module`.
    metadata: JSON-serialisable dict, written to assets.extra/bert_tf_export.json
      together with the signatures' inputs and outputs.
    overwrite: replace an existing non-empty export_dir.

  The SavedModel is written to a temporary folder beside export_dir and renamed,
  so readers (a model server watching the folder) never see half an export (on
  local disks; object stores such as GCS have no atomic folder rename).
  Returns export_dir. A symlink export_dir is left in place, the export written where it
  points.
  """
  link = os.fspath(export_dir).rstrip("/") or "/"
  export_dir = _target(link)
  for path in dict.fromkeys((link, export_dir)):  # as given, and where a link points
    check_export_dir(path, overwrite)
  concrete = {}
  for name, fn in signatures.items():
    setattr(module, name, fn)
    concrete[name] = fn.get_concrete_function()
  metadata = dict(metadata)
  tokenizer = module.tokenizer
  if tokenizer is not None:  # an encoder-only export records these itself
    metadata.update({"do_lower_case": tokenizer.do_lower_case,
                     "strip_accents": tokenizer.strip_accents,
                     "vocab_size": tokenizer.vocab_size})
  metadata["signatures"] = {name: _signature_io(c) for name, c in concrete.items()}
  if module.inference_precision:  # None: no model (the TF Hub preprocessor)
    metadata["inference_precision"] = module.inference_precision
  metadata.update({
      "bert_tf_version": bert_tf.__version__,
      "tensorflow_version": tf.__version__,
      # The tokenizer's character tables come from this Python's unicodedata.
      "unicode_version": unicodedata.unidata_version,
      "python_version": platform.python_version(),
  })

  suffix = uuid.uuid4().hex[:8]
  tmp = "%s.tmp-%s" % (export_dir, suffix)
  old = "%s.old-%s" % (export_dir, suffix)
  try:
    with _quiet_capture_renames():
      tf.saved_model.save(module, tmp, signatures=concrete)
    tf.io.gfile.makedirs(os.path.join(tmp, METADATA_DIR))
    with tf.io.gfile.GFile(os.path.join(tmp, METADATA_DIR, METADATA_FILE), "w") as f:
      f.write(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
    if getattr(tokenizer, "vocab_text", None):  # the vocab by id, for LiteRT's metadata
      with tf.io.gfile.GFile(os.path.join(tmp, METADATA_DIR, VOCAB_FILE), "w") as f:
        f.write(tokenizer.vocab_text)
    # Checked again: another process may have written export_dir meanwhile.
    check_export_dir(link, overwrite)
    if tf.io.gfile.isdir(export_dir):
      tf.io.gfile.rename(export_dir, old)  # Empty, or overwrite=True; deleted below.
    try:
      tf.io.gfile.rename(tmp, export_dir)
    except Exception:
      if tf.io.gfile.exists(old):
        tf.io.gfile.rename(old, export_dir)
      raise
  finally:
    for leftover in (tmp, old):
      if tf.io.gfile.exists(leftover):
        tf.io.gfile.rmtree(leftover)
  return link


def read_metadata(export_dir):
  """The bert_tf_export.json of an export, as a dict."""
  with tf.io.gfile.GFile(os.path.join(export_dir, METADATA_DIR, METADATA_FILE)) as f:
    return json.load(f)
