"""One run per --output_dir: a second run stops naming the first; a killed run's lock is gone."""

import os
import signal

import pytest

from bert_tf.errors import UserInputError
from bert_tf.runner import run_lock
from helpers import PROGRAMS, run_script


def _start_holder(folder):
  process = run_script(PROGRAMS + "hold_run_lock.py", folder, "--fake_flag=1", wait=False,
                       stderr=None)
  assert process.stdout.readline().strip() == "locked"
  return process


def test_second_run_stops_naming_the_first_and_a_killed_run_does_not_block(tmp_path):
  holder = _start_holder(tmp_path)
  try:
    with pytest.raises(UserInputError) as e:
      run_lock.acquire(str(tmp_path))
    message = str(e.value)
    assert "is in use by pid %d on host " % holder.pid in message
    assert "started 20" in message and "--fake_flag=1" in message
    assert "pass another --output_dir" in message
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
  path = run_lock.acquire(str(tmp_path))  # the kernel released the dead run's lock
  try:
    assert path == os.path.join(str(tmp_path), ".bert_tf.lock")
    assert '"pid": %d' % os.getpid() in open(path).read()
  finally:
    run_lock.release(path)
  assert not os.path.exists(path)  # a run that ends leaves no lock file behind


def test_workers_of_one_run_hold_their_own_roles(tmp_path):
  chief = run_lock.acquire(str(tmp_path))
  worker = run_lock.acquire(str(tmp_path), role="worker_1")
  try:
    assert chief != worker and os.path.exists(worker)
    assert run_lock.acquire(str(tmp_path)) == chief  # taking it again in one process is fine
  finally:
    run_lock.release(chief)
    run_lock.release(worker)


def test_remote_folders_are_not_locked():
  assert run_lock.acquire("gs://bucket/run") is None
