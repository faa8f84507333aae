"""Exact resume with dropout on: SIGTERM/SIGINT mid-run (preemption) and SIGKILL, then the same
command; and which settings a resume compares (checkpoint_keeper.check_settings)."""

from functools import partial
import json
import re
import shutil
import signal
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import UserInputError
from bert_tf.training import checkpoint_keeper
from helpers import FIXTURES, TINY, VOCAB_UNCASED, run_script


def _dropout_is_on():
  config = json.loads(open(TINY.config).read())
  return config["hidden_dropout_prob"] > 0 and config["attention_probs_dropout_prob"] > 0


# Each task's run is 30 steps of batch 4 (a save every 8): MRPC's 12 examples for 10 epochs,
# SQuAD's 20 windows for 6, SWAG's 40 for 3.
def _classifier(tmp_path, output_dir):
  return ["run_classifier.py", "--task_name=MRPC",
          "--data_dir=%s" % (FIXTURES / "classifier_data" / "MRPC"),
          "--max_seq_length=32", "--train_batch_size=4", "--num_train_epochs=10"]


def _squad(tmp_path, output_dir):
  return ["run_squad.py", "--train_file=%s" % (FIXTURES / "squad" / "squad_v2_tiny.json"),
          "--version_2_with_negative", "--max_seq_length=64", "--doc_stride=32",
          "--max_query_length=16", "--train_batch_size=4", "--num_train_epochs=6"]


def _swag(tmp_path, output_dir):
  data = tmp_path / "swag"
  if not data.exists():
    data.mkdir()
    shutil.copy(FIXTURES / "swag" / "train.csv", data / "train.csv")
  return ["run_swag.py", "--data_dir=%s" % data, "--max_seq_length=48",
          "--train_batch_size=4", "--num_train_epochs=3"]


def _command(make_args, tmp_path, output_dir):
  """The script and its arguments."""
  script, *args = make_args(tmp_path, output_dir)
  return [script, *args, "--do_train",
          "--vocab_file=%s" % VOCAB_UNCASED, "--bert_config_file=%s" % TINY.config,
          "--init_checkpoint=%s" % TINY.ckpt, "--save_checkpoints_steps=8",
          "--iterations_per_loop=1", "--output_dir=%s" % output_dir]


def _weights(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def _final_weights(output_dir):
  return _weights(tf.train.latest_checkpoint(str(output_dir)))


def _stop_at_step(command, at_step, signum):
  """Starts `command` (a script and its arguments), sends `signum` once it has logged step
  `at_step`; returns (code, stderr)."""
  process = run_script(*command, wait=False, stdout=subprocess.DEVNULL)
  seen = []
  for line in process.stderr:
    seen.append(line)
    if re.search(r"\] step %d: loss" % at_step, line):
      process.send_signal(signum)
      break
  rest = process.communicate(timeout=300)[1]
  return process.returncode, "".join(seen) + rest


@pytest.mark.slow
@pytest.mark.parametrize("make_args,signum", [(_classifier, signal.SIGTERM),
                                              (_squad, signal.SIGTERM),
                                              (_swag, signal.SIGINT)],
                         ids=["classifier-SIGTERM", "squad-SIGTERM", "swag-SIGINT"])
def test_stopped_by_a_signal_then_rerun_ends_with_the_uninterrupted_weights(
    make_args, signum, tmp_path, script_session):
  assert _dropout_is_on()  # the point of the test: dropout masks must continue exactly
  straight = tmp_path / "straight"
  script, *args = _command(make_args, tmp_path, straight)
  # This run and the rerun below: the module's process of the script; the stopped run has its
  # own.
  session = partial(run_script, script, shared=script_session)
  result = session(*args)
  assert result.returncode == 0, result.stderr
  want = _final_weights(straight)
  final_step = int(want["global_step"])

  stopped = tmp_path / "stopped"
  command = _command(make_args, tmp_path, stopped)
  code, stderr = _stop_at_step(command, 3, signum)
  name = signal.Signals(signum).name
  assert code == 128 + signum, stderr[-3000:]
  match = re.search(r"stopped: preempted by %s after step (\d+)" % name, stderr)
  assert match, stderr[-3000:]
  step = int(match.group(1))
  assert 3 <= step < final_step and step % 8 != 0  # saved at a step that is not a save step
  assert (stopped / "training_state" / ("ckpt-%d.index" % step)).exists()
  assert "Traceback" not in stderr

  resumed = session(*command[1:])
  assert resumed.returncode == 0, resumed.stderr
  assert re.search(r"Resumed from \S+ckpt-%d at step %d" % (step, step), resumed.stderr)
  got = _final_weights(stopped)
  assert sorted(got) == sorted(want)
  for key in want:
    np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-6, err_msg=key)


# ---- which settings a resume compares ----------------------------------------------------

_WINDOWS = {"labels": ["0", "1"], "train_data": {"sha1": "d"}, "long_document": "windows",
            "doc_stride": 16, "window_pooling": "mean"}
_TRUNCATE = {"labels": ["0", "1"], "train_data": {"sha1": "d"}}  # truncate is not recorded
_EVAL_ONLY = {"labels": ["0", "1"]}  # what a run without --do_train states


def _state(folder, saved):
  """A training state folder holding ckpt-3 (its files empty: only the settings are read)
  saved with `saved` (None: no settings file); returns the folder."""
  state = folder / "training_state"
  state.mkdir(parents=True)
  (state / "ckpt-3.index").write_bytes(b"")
  checkpoint_keeper.write_checkpoint_state(str(state), ["ckpt-3"])
  if saved is not None:
    (state / "settings.json").write_text(json.dumps(saved))
  return state


def _check(state, settings, training):
  checkpoint_keeper.check_settings("out", str(state), settings, training)


def _refusal(state, settings, training=True):
  with pytest.raises(UserInputError) as e:
    _check(state, settings, training)
  return [line.strip() for line in str(e.value).splitlines()[1:-1]]


def test_training_resume_compares_the_saved_settings_both_ways(tmp_path):
  windows = _state(tmp_path / "w", _WINDOWS)
  # Windows -> truncate: the state has the windows entries this run lacks.
  assert _refusal(windows, _TRUNCATE) == [
      "doc_stride: 16 when the state was saved, (not set) now",
      'long_document: "windows" when the state was saved, "truncate" now']
  assert _refusal(windows, dict(_WINDOWS, doc_stride=8)) == [
      "doc_stride: 16 when the state was saved, 8 now"]
  assert _refusal(windows, {k: v for k, v in _WINDOWS.items() if k != "labels"}) == [
      'labels: ["0", "1"] when the state was saved, (not set) now']
  truncate = _state(tmp_path / "t", _TRUNCATE)
  assert _refusal(truncate, _WINDOWS) == [
      "doc_stride: (not recorded) when the state was saved, 16 now",
      'long_document: "truncate" when the state was saved, "windows" now']
  _check(truncate, _TRUNCATE, True)
  _check(windows, _WINDOWS, True)


def test_an_absent_long_document_is_truncate_on_either_side(tmp_path):
  """Runs record only windows, so states saved before windows existed are truncate ones."""
  explicit = _state(tmp_path / "e", dict(_TRUNCATE, long_document="truncate"))
  _check(explicit, _TRUNCATE, True)
  _check(_state(tmp_path / "a", _TRUNCATE), dict(_TRUNCATE, long_document="truncate"), True)
  assert _refusal(explicit, _WINDOWS) == [
      "doc_stride: (not recorded) when the state was saved, 16 now",
      'long_document: "truncate" when the state was saved, "windows" now']


def test_a_run_that_only_evaluates_compares_only_what_it_states(tmp_path):
  windows = _state(tmp_path, _WINDOWS)
  _check(windows, _EVAL_ONLY, False)  # it may cut its own data otherwise
  assert _refusal(windows, {"labels": ["1", "0"]}, training=False) == [
      'labels: ["0", "1"] when the state was saved, ["1", "0"] now']
  # The same settings from a run that trains are a change: it would train on other data.
  assert "train_data" in "\n".join(_refusal(windows, _EVAL_ONLY))


def test_window_pooling_may_change_on_resume_and_the_log_says_so(tmp_path, caplog):
  windows = _state(tmp_path, _WINDOWS)
  caplog.set_level("INFO", logger="absl")  # absl's logger has its own level
  _check(windows, dict(_WINDOWS, window_pooling="max"), True)
  assert ('Resuming with window_pooling changed from "mean" to "max" (allowed: it does not '
          'change the saved state).') in caplog.text
  # A state saved before the pooling was recorded: nothing to compare, nothing said.
  caplog.clear()
  old = _state(tmp_path / "old", {k: v for k, v in _WINDOWS.items() if k != "window_pooling"})
  _check(old, _WINDOWS, True)
  assert "window_pooling" not in caplog.text


def test_settings_are_checked_only_beside_a_state_and_must_be_readable(tmp_path):
  no_settings = _state(tmp_path / "a", None)
  _check(no_settings, _TRUNCATE, True)  # an older run without settings.json
  stale = tmp_path / "b" / "training_state"
  stale.mkdir(parents=True)
  (stale / "settings.json").write_text(json.dumps(_WINDOWS))
  _check(stale, _TRUNCATE, True)  # no state to resume from: the run starts over
  broken = _state(tmp_path / "c", None)
  (broken / "settings.json").write_text("[1, 2")
  with pytest.raises(UserInputError, match=r"Cannot read .*settings.json .*Restore it, or "
                                           r"start a new --output_dir"):
    _check(broken, _TRUNCATE, False)
