"""Real command lines against the hostile cases of one --output_dir: two runs at once, resumes
with changed settings, damaged checkpoints (issue: nothing lost, nothing half-done)."""

from functools import partial
import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest
import tensorflow as tf

from bert_tf.runner.run_lock import LOCK_NAME
from helpers import FIXTURES, TINY, VOCAB_UNCASED, ScriptSession, damaged_copy, run_script

pytestmark = pytest.mark.slow

MRPC = str(FIXTURES / "classifier_data" / "MRPC")


def _classifier_args(output_dir, *extra, config=TINY.config, init=TINY.ckpt):
  return ["--task_name=MRPC", "--data_dir=%s" % MRPC, "--vocab_file=%s" % VOCAB_UNCASED,
          "--bert_config_file=%s" % config, "--init_checkpoint=%s" % init,
          "--max_seq_length=32", "--train_batch_size=4", "--num_train_epochs=1",
          "--save_checkpoints_steps=1", "--output_dir=%s" % output_dir, "--do_train", *extra]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, script_session):
  """The output folder of one finished run of _classifier_args (one epoch, a save every step),
  which the tests below copy and then resume in their own ways."""
  out = tmp_path_factory.mktemp("finished") / "run"
  result = run_script("run_classifier.py", *_classifier_args(out), shared=script_session)
  assert result.returncode == 0, result.stderr[-3000:]
  return out


def _error(result):
  lines = [l for l in result.stderr.splitlines() if l.startswith("error: ")]
  assert result.returncode == 2 and lines, result.stderr[-3000:]
  return "\n".join(result.stderr.splitlines()[result.stderr.splitlines().index(lines[0]):])


def test_a_second_run_on_a_folder_in_use_stops_at_once_naming_the_first(tmp_path,
                                                                         script_session):
  run_classifier = partial(run_script, "run_classifier.py", shared=script_session)
  out = tmp_path / "run"
  first = run_script("run_classifier.py", *_classifier_args(out, "--num_train_epochs=400"),
                     wait=False, stderr=subprocess.STDOUT)
  try:
    lock = out / ".bert_tf.lock"
    deadline = time.time() + 120
    while not (lock.exists() and lock.read_text().strip()) and time.time() < deadline:
      time.sleep(0.2)
    second = run_classifier(*_classifier_args(out, "--learning_rate=1e-3"))
    message = _error(second)
    assert "is in use by pid %d on host" % first.pid in message
    assert "run_classifier.py" in message and "started " in message
    assert first.poll() is None  # the first run goes on
  finally:
    first.kill()
    first.wait()
  # A killed run's lock does not block the next one.
  third = run_classifier(*_classifier_args(out, "--num_train_epochs=1"))
  assert third.returncode == 0, third.stderr[-2000:]


def test_resume_with_changed_settings_says_what_changed(finished_run, tmp_path, script_session):
  run_classifier = partial(run_script, "run_classifier.py", shared=script_session)
  out = tmp_path / "run"
  shutil.copytree(finished_run, out)
  smaller = run_classifier(*_classifier_args(out, "--train_batch_size=2"))
  message = _error(smaller)
  assert "holds a training state made with other settings" in message
  assert "train_batch_size: 4 when the state was saved, 2 now" in message
  assert "Traceback" not in smaller.stderr
  dropout = tmp_path / "bert_config.json"
  dropout.write_text(open(TINY.config).read().replace('"hidden_dropout_prob": 0.1',
                                                      '"hidden_dropout_prob": 0.2'))
  changed = run_classifier(*_classifier_args(out, config=str(dropout)))
  assert "bert_config:" in _error(changed)
  more = run_classifier(*_classifier_args(out, "--num_train_epochs=2"))
  assert more.returncode == 0, more.stderr[-2000:]
  assert "num_train_epochs changed from 1.0 to 2.0" in more.stderr
  assert "Resumed from" in more.stderr


def _digests(folder):
  """Each file under `folder`: its path -> the sha1 of its bytes. The run lock is left out: a
  process removes it as it ends, but the session's process lives on, holding it."""
  return {str(path): hashlib.sha1(path.read_bytes()).hexdigest()
          for path in sorted(folder.rglob("*")) if path.is_file() and path.name != LOCK_NAME}


def test_resume_on_windows_of_a_truncate_state_writes_nothing(finished_run, tmp_path,
                                                              script_session):
  """The finished run trained on truncated records: training it on windows would mix two
  datasets, so that stops before writing anything. Truncate is not recorded (states saved
  before windows existed are truncate ones): the same command, without windows, resumes."""
  run_classifier = partial(run_script, "run_classifier.py", shared=script_session)
  out = tmp_path / "run"
  shutil.copytree(finished_run, out)
  settings = json.loads((out / "training_state" / "settings.json").read_text())
  assert "long_document" not in settings and "doc_stride" not in settings
  before = _digests(out)
  windows = run_classifier(*_classifier_args(out, "--long_document=windows"))
  message = _error(windows)
  assert 'long_document: "truncate" when the state was saved, "windows" now' in message
  assert "doc_stride: (not recorded) when the state was saved, 128 now" in message
  assert "Traceback" not in windows.stderr
  assert _digests(out) == before
  again = run_classifier(*_classifier_args(out))
  assert again.returncode == 0, again.stderr[-2000:]
  assert "Resumed from" in again.stderr and "Already trained to step" in again.stderr


_DAMAGES = ("truncated", "bit_flipped")


def _damaged_init_commands(tmp_path, prefix):
  out = tmp_path / "out"
  return {
      "run_classifier.py": _classifier_args(out, init=prefix),
      "extract_features.py": ["--input_file=%s" % (FIXTURES / "extract_features" / "input.txt"),
                              "--output_file=%s" % (tmp_path / "f.jsonl"),
                              "--vocab_file=%s" % VOCAB_UNCASED,
                              "--bert_config_file=%s" % TINY.config,
                              "--init_checkpoint=%s" % prefix, "--max_seq_length=32",
                              "--layers=-1"],
      "convert_checkpoint.py": ["--to=hf", "--input=%s" % prefix,
                                "--output_dir=%s" % (tmp_path / "hf")],
      "export_tfhub.py": ["--bert_config_file=%s" % TINY.config, "--vocab_file=%s" % VOCAB_UNCASED,
                          "--init_checkpoint=%s" % prefix,
                          "--encoder_export_dir=%s" % (tmp_path / "hub"),
                          "--preprocessor_export_dir=%s" % (tmp_path / "pre")],
  }


@pytest.fixture(scope="module")
def damaged_init_runs(tmp_path_factory, script_session):
  """Each script of _damaged_init_commands given a truncated and a bit-flipped copy of the tiny
  release, in a folder per damage; one process per script runs its two command lines (the
  module's run_classifier process for run_classifier.py).
  damage -> (folder, checkpoint prefix, {script: result})."""
  runs = {}
  for how in _DAMAGES:
    folder = tmp_path_factory.mktemp(how)
    prefix = damaged_copy(TINY.dir, folder / ("release_" + how), how)
    shutil.copy(VOCAB_UNCASED, folder / ("release_" + how) / "vocab.txt")
    runs[how] = (folder, prefix, {})
  commands = {how: _damaged_init_commands(folder, prefix) for how, (folder, prefix, _) in
              runs.items()}
  for script in commands[_DAMAGES[0]]:
    if script == "run_classifier.py":
      results = [run_script(script, *commands[how][script], shared=script_session)
                 for how in _DAMAGES]
    else:  # a process of the script's own for its two command lines, ended after them
      with ScriptSession(script) as session:
        results = [run_script(script, *commands[how][script], shared=session)
                   for how in _DAMAGES]
    for how, result in zip(_DAMAGES, results):
      runs[how][2][script] = result
  return runs


@pytest.mark.parametrize("how", _DAMAGES)
def test_damaged_init_checkpoint_is_one_line_before_any_work(damaged_init_runs, how):
  tmp_path, prefix, results = damaged_init_runs[how]
  out = tmp_path / "out"
  for script, result in results.items():
    message = _error(result)
    assert "Checkpoint %s is damaged" % prefix in message and "\n" not in message.strip(), script
    assert "Traceback" not in result.stderr, script
  assert not (out / "train.tf_record").exists()
  assert not (tmp_path / "hf").exists() and not (tmp_path / "hub").exists()


def test_damaged_latest_training_state_falls_back_to_the_previous_one(finished_run, tmp_path,
                                                                      script_session):
  out = tmp_path / "run"
  shutil.copytree(finished_run, out)
  state = out / "training_state"
  latest = tf.train.latest_checkpoint(str(state))
  step = int(latest.rsplit("-", 1)[1])
  data = tf.io.gfile.glob(latest + ".data-*")[0]
  with open(data, "r+b") as f:
    f.truncate(os.path.getsize(data) // 2)
  again = run_script("run_classifier.py", *_classifier_args(out, "--num_train_epochs=2"),
                     shared=script_session)
  assert again.returncode == 0, again.stderr[-2000:]
  assert "ckpt-%d is damaged" % step in again.stderr
  assert "Resumed from %s at step %d" % (str(state / ("ckpt-%d" % (step - 1))), step - 1) in (
      again.stderr)


def test_squad_file_with_a_duplicated_question_id_is_refused(tmp_path):
  from bert_tf.errors import UserInputError
  from bert_tf.tasks import squad
  data = {"data": [{"paragraphs": [
      {"context": "Paris is in France.", "qas": [{"id": "q1", "question": "Where is Paris?"}]},
      {"context": "Rome is in Italy.", "qas": [{"id": "q1", "question": "Where is Rome?"}]}]}]}
  path = tmp_path / "dup.json"
  path.write_text(json.dumps(data))
  with pytest.raises(UserInputError, match=r"question id 'q1' appears more than once"):
    squad.read_squad_examples(str(path), is_training=False)


def test_rerunning_a_finished_command_keeps_or_replaces_its_own_export(tmp_path, script_session):
  run_classifier = partial(run_script, "run_classifier.py", shared=script_session)
  out, exp = tmp_path / "run", tmp_path / "exp"
  first = run_classifier(*_classifier_args(out, "--export_dir=%s" % exp))
  assert first.returncode == 0, first.stderr[-3000:]
  assert "Exported a SavedModel to %s" % exp in first.stderr
  saved = (exp / "saved_model.pb").read_bytes()
  # The same command again: training is done, the export is this run's from the same step.
  again = run_classifier(*_classifier_args(out, "--export_dir=%s" % exp))
  assert again.returncode == 0, again.stderr[-3000:]
  assert "Kept the SavedModel in %s: this run exported it from the same weights" % exp in (
      again.stderr)
  assert (exp / "saved_model.pb").read_bytes() == saved
  assert not [p for p in tmp_path.iterdir() if ".replaced-" in p.name]
  # Predicting from the trained state with windows: the truncating export no longer answers
  # what test_results.tsv says, so it is replaced, saying why; so is one of another pooling.
  windows = [a for a in _classifier_args(out, "--export_dir=%s" % exp, "--do_predict",
                                         "--long_document=windows") if a != "--do_train"]
  for extra, why in (
      ([], 'doc_stride was unset, now 128; long_document was "truncate", now "windows"; '
           "window_pooling was unset, now \"mean\""),
      (["--window_pooling=max"], 'window_pooling was "mean", now "max"')):
    rerun = run_classifier(*windows, *extra)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "Replaced this run's earlier export in %s: %s." % (exp, why) in rerun.stderr
    metadata = json.loads((exp / "assets.extra" / "bert_tf_export.json").read_text())
    assert metadata["window_pooling"] == (extra[0].split("=")[1] if extra else "mean")
  assert (out / "test_results.tsv").exists()
  # Another run folder may not write over it, unless told to: nothing runs before that.
  other = tmp_path / "other"
  refused = run_classifier(*_classifier_args(other, "--export_dir=%s" % exp))
  assert ("Export folder %s already exists and is not empty; choose another --export_dir, or "
          "pass --overwrite_export to replace it." % exp) in _error(refused)
  assert not other.exists() or not list(other.glob("*.tf_record"))
  export_only = [a for a in _classifier_args(other, "--export_dir=%s" % exp, "--overwrite_export")
                 if a != "--do_train"]
  replaced = run_classifier(*export_only)
  assert replaced.returncode == 0, replaced.stderr[-3000:]
  assert (exp / "saved_model.pb").exists()
  assert not [p for p in tmp_path.iterdir() if ".replaced-" in p.name]


def test_evaluating_a_head_of_another_task_is_one_line_naming_both(finished_run, tmp_path,
                                                                   script_session):
  """Issue 38 case 7: MRPC's head evaluated as SST-2 (both label sets "0", "1") is refused
  with the two tasks and the fix, before any evaluation."""
  data = tmp_path / "SST-2"
  data.mkdir()
  (data / "dev.tsv").write_text("sentence\tlabel\na fine film .\t1\na dull one .\t0\n")
  args = [a for a in _classifier_args(tmp_path / "sst2", init=finished_run) if a != "--do_train"]
  args[:2] = ["--task_name=SST-2", "--data_dir=%s" % data]
  refused = run_script("run_classifier.py", *args, "--do_eval", shared=script_session)
  message = _error(refused)
  assert len(message.splitlines()) == 1 and "Traceback" not in refused.stderr
  assert "fine-tuned for task mrpc" in message and "not for --task_name=sst-2" in message
  assert "Pass --task_name=mrpc to use it" in message
  assert not (tmp_path / "sst2" / "eval_results.txt").exists()
