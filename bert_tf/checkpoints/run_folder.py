"""A runner's --output_dir: made and proven writable before any work, and what it records
about its run, read back by whoever takes a checkpoint from it (a conversion, a later
fine-tuning run, an export).

A training run keeps its settings (config, casing, labels, vocab digest) in
`training_state/settings.json` (checkpoint_keeper writes it) and copies `bert_config.json` and
`vocab.txt` beside its `model.ckpt-N`, so the folder converts and exports with no other file.
"""

import hashlib
import json
import os
import uuid

from absl import logging
import tensorflow as tf

from bert_tf.errors import UserInputError, io_reason

STATE_DIR = "training_state"
SETTINGS_NAME = "settings.json"
CONFIG_NAME = "bert_config.json"
VOCAB_NAME = "vocab.txt"


def file_digest(path):
  """sha1 of a file's bytes (a vocab, a data file): its identity wherever it is copied."""
  digest = hashlib.sha1()
  update_digest(digest, path)
  return digest.hexdigest()


def update_digest(digest, path):
  """Feeds a file's bytes to `digest` (a hashlib object), a block at a time."""
  with tf.io.gfile.GFile(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)


def settings_path(output_dir, worker=""):
  return os.path.join(state_dir(output_dir, worker), SETTINGS_NAME)


def state_dir(output_dir, worker=""):
  return os.path.join(output_dir, STATE_DIR + ("_" + worker if worker else ""))


def has_training_state(output_dir, worker=""):
  """Whether a run in `output_dir` resumes from a saved training state."""
  return bool(tf.train.latest_checkpoint(state_dir(output_dir, worker)))


def checkpoint_folder(checkpoint):
  """The folder a checkpoint prefix (or a folder) lives in."""
  path = os.fspath(checkpoint)
  return path if tf.io.gfile.isdir(path) else os.path.dirname(path)


def recorded_settings(checkpoint):
  """The settings of the run whose --output_dir holds `checkpoint` ({} when none recorded)."""
  return _read_record(settings_path(checkpoint_folder(checkpoint)))


def _read_record(path):
  """The JSON object a run wrote at `path`; {} when there is none or it cannot be read."""
  if not tf.io.gfile.exists(path):
    return {}
  try:
    with tf.io.gfile.GFile(path, "r") as f:
      record = json.loads(f.read())
  except (ValueError, tf.errors.OpError) as e:
    logging.warning("Ignoring %s: it cannot be read (%s).", path, e)
    return {}
  return record if isinstance(record, dict) else {}


def write_json(path, data, sort_keys=True):
  """Writes `data` as indented JSON to `path`, whole or not at all (a .tmp file renamed over
  it): a crash mid-write leaves the previous record, never half of one."""
  with tf.io.gfile.GFile(path + ".tmp", "w") as f:
    f.write(json.dumps(data, indent=2, sort_keys=sort_keys) + "\n")
  tf.io.gfile.rename(path + ".tmp", path, overwrite=True)


def keep_model_files(output_dir, config_file, vocab_file):
  """Copies the run's bert_config.json and vocab.txt into --output_dir, so its checkpoints
  convert and export on their own. A different copy beside a saved training state is left as
  it is: the state's settings decide whether this run may resume from it."""
  for source, name in ((config_file, CONFIG_NAME), (vocab_file, VOCAB_NAME)):
    if not source:
      continue
    target = os.path.join(output_dir, name)
    if os.path.abspath(source) == os.path.abspath(target):
      continue
    try:
      if tf.io.gfile.exists(target) and (file_digest(target) == file_digest(source) or
                                         has_training_state(output_dir)):
        continue
      tf.io.gfile.copy(source, target + ".tmp", overwrite=True)
      tf.io.gfile.rename(target + ".tmp", target, overwrite=True)
    except tf.errors.OpError as e:
      raise UserInputError("Cannot copy %s to %s: %s." % (source, target, io_reason(e))) from None


def make_output_dir(path, flag="--output_dir"):
  """Creates the output folder and proves it writable, so a read-only disk or a file in the
  way stops before any work rather than at the first checkpoint."""
  if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
    raise UserInputError("%s=%s is a file; pass a folder." % (flag, path))
  # One probe name per process: workers of a multi-worker run share the folder.
  probe = os.path.join(path, ".bert_tf_write_test.%d.%s" % (os.getpid(), uuid.uuid4().hex[:8]))
  try:
    tf.io.gfile.makedirs(path)
    with tf.io.gfile.GFile(probe, "w") as f:
      f.write("")
    tf.io.gfile.remove(probe)
  except (tf.errors.OpError, OSError) as e:
    raise UserInputError("%s=%s is not writable: %s. Pick a folder you can write to." %
                         (flag, path, io_reason(e))) from None


EXPORTS_NAME = "exports.json"  # what each --export_dir of the run was exported from
FILES_CHANGED = "its files changed since this run wrote it"


def _exports(output_dir):
  return _read_record(os.path.join(output_dir, EXPORTS_NAME))


def _saved_model_digest(export_dir):
  path = os.path.join(export_dir, "saved_model.pb")
  return file_digest(path) if tf.io.gfile.exists(path) else None


def export_digest(export_dir):
  """sha1 over every file under `export_dir`, names and bytes (None when there is none): a
  deleted or swapped `variables/` changes it, where saved_model.pb alone stays the same."""
  if not tf.io.gfile.isdir(export_dir):
    return None
  digest, found = hashlib.sha1(), False
  for folder, _, names in sorted(tf.io.gfile.walk(export_dir)):
    for name in sorted(names):
      path = os.path.join(folder, name)
      relative = os.path.relpath(path, export_dir).replace(os.sep, "/")
      digest.update(b"%s\0%d\0" % (relative.encode("utf-8"), tf.io.gfile.stat(path).length))
      update_digest(digest, path)
      found = True
  return digest.hexdigest() if found else None


def recorded_export(output_dir, export_dir):
  """What this run exported to `export_dir` (a dict), or None when the folder holds no export
  of this run's (never exported, or replaced by something else since: its saved_model.pb is
  not the one this run wrote)."""
  entry = _exports(output_dir).get(os.path.abspath(export_dir))
  if not isinstance(entry, dict) or entry.get("saved_model_sha1") is None:
    return None
  if entry["saved_model_sha1"] != _saved_model_digest(export_dir):
    return None
  return entry


# How export_changes names a source key whose value is not worth printing.
_DESCRIBED = {"step": "the weights' training step", "weights_sha1": "the weights' values",
              "bert_config": "the BERT config",
              "vocab_sha1": "the vocab's content", "labels": "the labels"}


def export_changes(recorded, source, export_dir):
  """Why `export_dir`, this run's export `recorded` (recorded_export's), is not one of
  `source` (the settings it would be built from now): a line per difference, [] when it can be
  kept. Every file counts (names and bytes), and every key of `source`."""
  changes = []
  for key in sorted(source):
    old, new = recorded.get(key), source[key]
    if key in recorded and old == new:
      continue
    if key in _DESCRIBED or isinstance(new, (dict, list)) or isinstance(old, (dict, list)):
      changes.append("%s changed" % _DESCRIBED.get(key, key))
    else:
      changes.append("%s was %s, now %s" % (
          key, json.dumps(old) if key in recorded else "unset", json.dumps(new)))
  if recorded.get("files_sha1") is None or recorded["files_sha1"] != export_digest(export_dir):
    changes.append(FILES_CHANGED)
  return changes


def export_record(output_dir, export_dir):
  """The exports.json entry of `export_dir` as it is (None when there is none), for
  restore_export_record."""
  return _exports(output_dir).get(os.path.abspath(export_dir))


def record_export(output_dir, export_dir, source):
  """Records that `export_dir` now holds this run's export of `source` (a JSON dict)."""
  restore_export_record(output_dir, export_dir, dict(
      source, saved_model_sha1=_saved_model_digest(export_dir),
      files_sha1=export_digest(export_dir)))


def restore_export_record(output_dir, export_dir, entry):
  """Sets the exports.json entry of `export_dir` to `entry` (export_record's; None removes
  it), written whole or not at all."""
  exports = _exports(output_dir)
  key = os.path.abspath(export_dir)
  if entry is None:
    exports.pop(key, None)
  else:
    exports[key] = entry
  write_json(os.path.join(output_dir, EXPORTS_NAME), exports)
