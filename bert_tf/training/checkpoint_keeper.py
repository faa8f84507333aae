"""What a training run keeps in --output_dir, and how it resumes from it.

Layout of `output_dir`:
  training_state/ckpt-N   everything needed to resume (weights, optimizer slots, step,
                          loss scale, input position, dropout seed states); the last 3 kept
  training_state/settings.json
                          the settings that shape the state and the data (config, sequence
                          length, batch sizes, task, labels, vocab, casing, training file,
                          how long documents were cut); a resume with other values stops
                          and says which, before the run writes anything
  model.ckpt-N            the same weights in Google's layout (with adam_m/adam_v and
                          global_step, like the original's checkpoints), plus a `checkpoint`
                          state file so tf.train.latest_checkpoint works; the last
                          --keep_checkpoint_max (3) of each kind kept, and the best one
  best_checkpoint.json    with --eval_every_steps: every evaluation during training, the
                          metric that ranks them, and whether the run stopped early
                          (BestCheckpoint); the best model.ckpt-N is never pruned

Every worker of a multi-worker run saves (the save is collective), each into its own
training_state_<worker> folder; only the chief writes the Google-layout files.
"""

import json
import math
import os

from absl import logging
import tensorflow as tf

from bert_tf.checkpoints import run_folder
from bert_tf.errors import UserInputError, io_reason

# Settings a resumed run may change: they do not alter the saved state or the data order
# up to where it stopped (more epochs or steps continue the same schedule's data; logging
# and saving cadence are bookkeeping; how a classifier pools its windows' logits, and whether
# it takes its class weights back off them, apply at evaluation and prediction only).
CHANGEABLE_SETTINGS = ("num_train_epochs", "num_train_steps", "save_checkpoints_steps",
                       "iterations_per_loop",
                       "window_pooling", "window_no_label",  # pooling: logged
                       "correct_class_weights")
# Settings a run records only when they are not the default (every state saved before
# they existed was made with the default): absent, on either side, compares as the default.
# (window_training: states saved before it was recorded trained every window on its own.)
UNRECORDED_DEFAULTS = {"long_document": "truncate", "window_training": "window"}
_ABSENT = object()
# Errors that mean a state file is unreadable (cut short or corrupt), not mismatched.
_DAMAGE_ERRORS = (IndexError, tf.errors.DataLossError)


def _is_damage(error):
  if isinstance(error, _DAMAGE_ERRORS):
    return True
  text = str(error)
  return "Checksum does not match" in text or "Read less bytes" in text or "corrupt" in text


class CheckpointKeeper:
  """Saves, prunes and restores a run's checkpoints (see the module docstring).

  Args:
    output_dir: the run's --output_dir.
    checkpoint: the tf.train.Checkpoint of the whole training state.
    write_google_checkpoint: fn(prefix, step) writing the Google-layout checkpoint.
    worker: "" for the chief, else the worker's name (its own state folder).
    settings: {name: JSON value} of what shapes the state and data, compared on resume.
  """

  def __init__(self, output_dir, checkpoint, write_google_checkpoint, worker="", settings=None,
               max_to_keep=3):
    self.output_dir = output_dir
    self.chief = not worker
    self.state_dir = run_folder.state_dir(output_dir, worker)
    self.checkpoint = checkpoint
    self.settings = settings
    self.max_to_keep = max_to_keep
    self._write_google_checkpoint = write_google_checkpoint
    self.manager = tf.train.CheckpointManager(checkpoint, self.state_dir, max_to_keep)
    self.protected_steps = frozenset  # () -> the steps whose model.ckpt-N pruning keeps

  # ---- resume ------------------------------------------------------------------------------

  def restore_latest(self, training=True, settings_checked=False):
    """Restores the newest intact training state; returns its path, or None if there is none.

    Its settings are checked first (check_settings; `training`: whether this run trains),
    unless the caller did (`settings_checked`). A damaged newest state (a save cut short by a
    crash or a full disk, a bad copy) falls back to the previous one and says so.
    """
    candidates = list(reversed(self.manager.checkpoints))
    latest = tf.train.latest_checkpoint(self.state_dir)
    if latest and latest not in candidates:
      candidates.insert(0, latest)
    if not candidates:
      return None
    if not settings_checked:
      self.check_settings(training)
    for i, path in enumerate(candidates):
      try:
        self.checkpoint.restore(path).assert_existing_objects_matched()
      except Exception as e:  # TensorFlow raises many types for unreadable or unlike states
        if _is_damage(e):
          older = candidates[i + 1] if i + 1 < len(candidates) else None
          logging.warning("Training state %s is damaged (%s); %s", path,
                          str(e).splitlines()[0] if str(e) else type(e).__name__,
                          "falling back to %s" % older if older else "no older state is left")
          continue
        raise UserInputError(
            "The training state %s in %s does not fit this run (%s). It was made with other "
            "settings: start a new --output_dir, or run with the settings it was made with." %
            (path, self.output_dir, str(e).splitlines()[0] if str(e) else type(e).__name__)
        ) from None
      if i:
        logging.warning("Resumed from the older intact state %s; the newer one(s) were damaged.",
                        path)
      return path
    raise UserInputError(
        "Every training state in %s is damaged (%s). Remove that folder and the model.ckpt-* "
        "files beside it to start over from --init_checkpoint." %
        (self.state_dir, ", ".join(candidates)))

  def _settings_file(self):
    return os.path.join(self.state_dir, run_folder.SETTINGS_NAME)

  def check_settings(self, training):
    """Stops with the list of changed settings when the saved state was made with others."""
    check_settings(self.output_dir, self.state_dir, self.settings, training)

  def _write_settings(self):
    """The settings of the run that saved (a run that only evaluates saves nothing)."""
    if self.settings is None:
      return
    run_folder.write_json(self._settings_file(), self.settings)

  # ---- save --------------------------------------------------------------------------------

  def save(self, step):
    """Saves the training state and the Google-layout checkpoint of this step.

    A failed save (a full disk, a lost file system) removes its partial files and stops with
    one message; the previous complete checkpoint stays what a rerun resumes from.
    """
    try:
      self.manager.save(checkpoint_number=step)
      self._write_settings()
      if self.chief:
        self._write_google_checkpoint(os.path.join(self.output_dir, "model.ckpt-%d" % step), step)
        self.prune()
    except (tf.errors.OpError, OSError) as e:
      self._remove_partial_save(step)
      previous = self.manager.latest_checkpoint
      raise UserInputError(
          "Saving the checkpoint of step %d in %s failed: %s. %s; free space or fix the folder, "
          "then run the same command again." %
          (step, self.output_dir, io_reason(e),
           "The run will resume from %s" % previous if previous
           else "No earlier checkpoint exists, so the run will start over")) from None

  def ensure_google_checkpoint(self, step):
    """Writes the Google-layout checkpoint of the restored `step` if a run stopped between
    saving its training state and writing it: its evaluation could not pick it otherwise."""
    if self.chief and not tf.io.gfile.exists(google_checkpoint(self.output_dir, step) + ".index"):
      logging.info("Writing the missing model.ckpt-%d from the training state of that step.", step)
      self._write_google_checkpoint(google_checkpoint(self.output_dir, step), step)

  def prune(self):
    """Removes the Google-layout checkpoints older than the last max_to_keep, except the
    protected ones (the best), and rewrites the `checkpoint` state file (newest last)."""
    kept = sorted(tf.io.gfile.glob(os.path.join(self.output_dir, "model.ckpt-*.index")),
                  key=_step_of)
    if not kept:
      return
    protected = set(self.protected_steps())
    old = [p for p in kept[:-self.max_to_keep] if _step_of(p) not in protected]
    for index in old:
      for path in tf.io.gfile.glob(index[:-len(".index")] + ".*"):
        tf.io.gfile.remove(path)
    write_checkpoint_state(self.output_dir, [os.path.basename(p[:-len(".index")])
                                             for p in kept if p not in old])

  def _remove_partial_save(self, step):
    partial = tf.io.gfile.glob(os.path.join(self.state_dir, "ckpt-%d_temp" % step))
    partial += tf.io.gfile.glob(os.path.join(self.output_dir, "model.ckpt-%d.tmp-*" % step))
    if not tf.io.gfile.exists(os.path.join(self.output_dir, "model.ckpt-%d.index" % step)):
      partial += tf.io.gfile.glob(os.path.join(self.output_dir, "model.ckpt-%d.data-*" % step))
    for path in partial:
      try:
        if tf.io.gfile.isdir(path):
          tf.io.gfile.rmtree(path)
        else:
          tf.io.gfile.remove(path)
      except tf.errors.OpError:
        logging.warning("Could not remove the partial file %s", path)


def _step_of(index_path):
  """N of .../model.ckpt-N.index."""
  return int(index_path.rsplit("-", 1)[1].split(".")[0])


def google_checkpoint(output_dir, step):
  """The prefix of the Google-layout checkpoint of `step` in `output_dir`."""
  return os.path.join(output_dir, "model.ckpt-%d" % step)


def lower_is_better(metric):
  """The direction rule of --best_metric: a name holding "loss" or "mse" is minimised (eval_loss,
  eval_mse), any other maximised (accuracy, F1, correlations)."""
  return "loss" in metric or "mse" in metric


class BestCheckpoint:
  """The evaluations a run made during training and the best checkpoint they pick, kept in
  output_dir/best_checkpoint.json.

  The best and the patience count are derived from the evaluations each time, not stored: a
  resumed run, or one with another --best_metric or --early_stopping_patience, reads the same
  list its own way. The best is the first evaluation with the best value of `metric` whose
  model.ckpt-N is on disk (another metric's best may have been pruned); an evaluation counts
  against the patience when it comes after the best and does not beat it.
  """

  NAME = "best_checkpoint.json"

  def __init__(self, output_dir, metric, every_steps=None, patience=0):
    self.output_dir = output_dir
    self.metric = metric
    self.every_steps = every_steps
    self.patience = patience
    self.evaluations = []  # [{"step": N, metric name: value, ...}] in step order
    self.stopped_early = None  # the step the run stopped at, when it did

  @property
  def path(self):
    return os.path.join(self.output_dir, self.NAME)

  @classmethod
  def recorded(cls, output_dir, step, metric=None):
    """The record in `output_dir`, ranked by `metric` (default: its own), up to `step`; None
    if none."""
    best = cls(output_dir, None)
    record = best._read()
    if record is None:
      return None
    best.metric = metric or record.get("metric")
    best.load(step, record)
    return best

  def _read(self):
    if not tf.io.gfile.exists(self.path):
      return None
    try:
      with tf.io.gfile.GFile(self.path, "r") as f:
        record = json.loads(f.read())
      _check_record(record)
    except (ValueError, tf.errors.OpError) as e:
      raise UserInputError("Cannot read %s (%s): it records the evaluations of --eval_every_steps. "
                           "Restore it, or start a new --output_dir." % (self.path, io_reason(e))
                           ) from None
    return record

  def load(self, step, record=None):
    """Continues the record of earlier runs from the restored training state at `step`:
    evaluations of later steps (a state since lost) are dropped. A changed metric, cadence or
    patience is allowed and logged."""
    record = self._read() if record is None else record
    if record is None:
      return
    evaluations = [e for e in record["evaluations"] if e.get("step", 0) <= step]
    if len(evaluations) < len(record["evaluations"]):
      logging.warning("%s: dropped the evaluations after step %d, the step this run resumes "
                      "from.", self.path, step)
    self.evaluations = sorted(evaluations, key=lambda e: e["step"])
    stopped = record.get("stopped_early")
    self.stopped_early = stopped if stopped is not None and stopped <= step else None
    self._check_metric()
    for name, flag in (("metric", "best_metric"), ("every_steps", "eval_every_steps"),
                       ("patience", "early_stopping_patience")):
      before, now = record.get(name), getattr(self, name)
      if now is not None and before is not None and before != now:
        logging.info("Resuming with --%s=%s (the record %s has %s; allowed: the evaluations so "
                     "far are ranked %s).", flag, now, self.path, before,
                     "by %s among the checkpoints still kept" % now if name == "metric"
                     else "as before")

  def _check_metric(self):
    """A metric no recorded evaluation has would pick no best, and the run would use the last
    step's weights as if nothing were wrong: stop, naming those recorded."""
    if self.metric is None or not self.evaluations or any(
        self.metric in e for e in self.evaluations):
      return
    names = sorted({k for e in self.evaluations for k in e if k != "step"})
    raise UserInputError(
        "--best_metric=%s is not among the metrics recorded in %s (%s); pass one of them." %
        (self.metric, self.path, ", ".join(names)))

  def value(self, evaluation):
    return evaluation[self.metric]

  def better(self, value, than):
    """Whether `value` beats `than` (a NaN beats nothing)."""
    return value < than if lower_is_better(self.metric) else value > than

  def best(self, on_disk=True):
    """The best evaluation whose model.ckpt-N is on disk (any, with on_disk=False), or None."""
    chosen = None
    for evaluation in self.evaluations:
      if not _finite(evaluation.get(self.metric)) or on_disk and not (
          tf.io.gfile.exists(google_checkpoint(self.output_dir, evaluation["step"]) + ".index")):
        continue
      if chosen is None or self.better(self.value(evaluation), self.value(chosen)):
        chosen = evaluation
    return chosen

  def protected_steps(self):
    best = self.best()
    return frozenset() if best is None else frozenset([best["step"]])

  def without_improvement(self):
    """How many evaluations came after the best one."""
    best = self.best()
    if best is None:
      return 0
    return sum(1 for e in self.evaluations if e["step"] > best["step"])

  def should_stop(self):
    return bool(self.patience) and self.without_improvement() >= self.patience

  def evaluated(self, step):
    return any(e["step"] == step for e in self.evaluations)

  def add(self, step, metrics):
    """Records the evaluation of the checkpoint of `step`; returns whether it is the new best.
    A metric the evaluation lacks stops the run, naming those it has."""
    metrics = {k: float(v) for k, v in metrics.items() if k != "global_step"}
    if self.metric not in metrics:
      raise UserInputError(
          "--best_metric=%s is not among this run's metrics (%s); pass one of them. The "
          "checkpoint of step %d is kept: the same command with another --best_metric resumes "
          "from it." % (self.metric, ", ".join(sorted(metrics)), step))
    previous = self.best()
    self.evaluations = [e for e in self.evaluations if e["step"] != step]
    self.evaluations.append(dict(metrics, step=step))
    self.evaluations.sort(key=lambda e: e["step"])
    self.write()
    return previous is None or self.better(metrics[self.metric], self.value(previous))

  def stop(self, step):
    self.stopped_early = step
    self.write()

  def describe(self, evaluation):
    return "step %d (%s = %.6g)" % (evaluation["step"], self.metric, self.value(evaluation))

  def write(self):
    """The record, written beside its name and renamed, so it is never half-written."""
    best = self.best()
    record = {"metric": self.metric, "lower_is_better": lower_is_better(self.metric),
              "every_steps": self.every_steps, "patience": self.patience,
              "best_step": best["step"] if best else None,
              "best_value": self.value(best) if best else None,
              "stopped_early": self.stopped_early,
              "evaluations": [{k: v if _finite(v) else None for k, v in e.items()}
                              for e in self.evaluations]}  # NaN is not JSON: null
    run_folder.write_json(self.path, record)


def _finite(value):
  """Whether a recorded metric value ranks (a NaN or infinity, written as null, does not)."""
  return value is not None and math.isfinite(value)


def _check_record(record):
  """Raises ValueError, saying what is wrong, unless `record` is a best-checkpoint record
  whose evaluations each have an integer step and numeric metrics (as BestCheckpoint.write
  writes them): a hand-edited one would otherwise fail deep in the ranking."""
  if not isinstance(record, dict) or not isinstance(record.get("evaluations"), list):
    raise ValueError("not a best-checkpoint record")
  if not isinstance(record.get("metric"), (str, type(None))):
    raise ValueError("its metric is not a name")
  if not isinstance(record.get("stopped_early"), (int, type(None))) or isinstance(
      record.get("stopped_early"), bool):
    raise ValueError("its stopped_early is not a step")
  for evaluation in record["evaluations"]:
    step = evaluation.get("step") if isinstance(evaluation, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
      text = json.dumps(evaluation)
      raise ValueError("an evaluation without a whole-number step: %s" %
                       (text if len(text) <= 60 else text[:57] + "..."))
    for name, value in evaluation.items():
      if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
        raise ValueError("step %d's %s is not a number" % (step, name))


def check_settings(output_dir, state_dir, settings, training):
  """Stops, naming each change, when `state_dir` holds a training state saved with other
  `settings` ({name: JSON value}); logs the allowed changes (CHANGEABLE_SETTINGS).

  A run that trains compares every setting both ways: one the saved state has and this run
  lacks is a change too (a state trained on windows and a re-run without them). A run that
  only evaluates or predicts states only what shapes the weights (it reads no training data,
  so it may cut its own data otherwise), and only those are compared. Nothing is read or
  written besides the settings file: callers check before writing any feature file.
  """
  path = os.path.join(state_dir, run_folder.SETTINGS_NAME)
  # No `checkpoint` state file: no state to resume from (a stale settings file is ignored).
  if settings is None or not tf.io.gfile.exists(os.path.join(state_dir, "checkpoint")) or (
      not tf.io.gfile.exists(path)):
    return
  try:
    with tf.io.gfile.GFile(path, "r") as f:
      saved = json.loads(f.read())
    if not isinstance(saved, dict):
      raise ValueError("not a JSON object")
  except (ValueError, tf.errors.OpError) as e:
    raise UserInputError("Cannot read %s (%s): it records the settings of the training state "
                         "in %s. Restore it, or start a new --output_dir." %
                         (path, io_reason(e), output_dir)) from None
  current = json.loads(json.dumps(settings))  # compare as JSON: tuples -> lists
  names = sorted(set(current) | set(saved)) if training else sorted(current)
  values = {name: tuple(side.get(name, UNRECORDED_DEFAULTS.get(name, _ABSENT))
                        for side in (saved, current)) for name in names}
  different = [name for name in names if values[name][0] != values[name][1]]
  changed = [name for name in different if name not in CHANGEABLE_SETTINGS]
  for name in different:
    if name in CHANGEABLE_SETTINGS and _ABSENT not in values[name]:
      logging.info("Resuming with %s changed from %s to %s (allowed: it does not change the "
                   "saved state).", name, *map(json.dumps, values[name]))
  if changed:
    lines = ["  %s: %s when the state was saved, %s now" %
             (name, _shown(values[name][0], "(not recorded)"),
              _shown(values[name][1], "(not set)")) for name in changed]
    raise UserInputError(
        "--output_dir %s holds a training state made with other settings:\n%s\nResuming "
        "would mix the two runs. Start a new --output_dir, or run with the old values. "
        "(Settings that may change on resume: %s.)" %
        (output_dir, "\n".join(lines), ", ".join(CHANGEABLE_SETTINGS)))


def _shown(value, absent):
  return absent if value is _ABSENT else json.dumps(value)


def write_checkpoint_state(folder, names):
  """The `checkpoint` state file TF1 tools read (tf.train.latest_checkpoint), atomically."""
  text = 'model_checkpoint_path: "%s"\n' % names[-1]
  text += "".join('all_model_checkpoint_paths: "%s"\n' % n for n in names)
  tmp = os.path.join(folder, "checkpoint.tmp")
  with tf.io.gfile.GFile(tmp, "w") as f:
    f.write(text)
  tf.io.gfile.rename(tmp, os.path.join(folder, "checkpoint"), overwrite=True)
