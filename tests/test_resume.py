"""Exact resume with dropout on: SIGTERM/SIGINT mid-run (preemption) and SIGKILL, then the same
command."""

import os
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import FIXTURES, TINY_CKPT, TINY_CONFIG, VOCAB_UNCASED

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.slow


def _dropout_is_on():
  import json
  config = json.loads(open(TINY_CONFIG).read())
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
  script, *args = make_args(tmp_path, output_dir)
  return [sys.executable, os.path.join(ROOT, script), *args, "--do_train",
          "--vocab_file=%s" % VOCAB_UNCASED, "--bert_config_file=%s" % TINY_CONFIG,
          "--init_checkpoint=%s" % TINY_CKPT, "--save_checkpoints_steps=8",
          "--iterations_per_loop=1", "--output_dir=%s" % output_dir]


def _weights(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def _final_weights(output_dir):
  return _weights(tf.train.latest_checkpoint(str(output_dir)))


def _stop_at_step(command, at_step, signum):
  """Starts `command`, sends `signum` once it has logged step `at_step`; returns (code, stderr)."""
  process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
  seen = []
  for line in process.stderr:
    seen.append(line)
    if re.search(r"\] step %d: loss" % at_step, line):
      process.send_signal(signum)
      break
  rest = process.communicate(timeout=300)[1]
  return process.returncode, "".join(seen) + rest


@pytest.mark.parametrize("make_args,signum", [(_classifier, signal.SIGTERM),
                                              (_squad, signal.SIGTERM),
                                              (_swag, signal.SIGINT)],
                         ids=["classifier-SIGTERM", "squad-SIGTERM", "swag-SIGINT"])
def test_stopped_by_a_signal_then_rerun_ends_with_the_uninterrupted_weights(
    make_args, signum, tmp_path, script_session):
  assert _dropout_is_on()  # the point of the test: dropout masks must continue exactly
  straight = tmp_path / "straight"
  script, *args = _command(make_args, tmp_path, straight)[1:]
  # This run and the rerun below: the module's process of the script; the stopped run has its
  # own.
  session = script_session(os.path.basename(script))
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

  resumed = session(*command[2:])
  assert resumed.returncode == 0, resumed.stderr
  assert re.search(r"Resumed from \S+ckpt-%d at step %d" % (step, step), resumed.stderr)
  got = _final_weights(stopped)
  assert sorted(got) == sorted(want)
  for key in want:
    np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-6, err_msg=key)
