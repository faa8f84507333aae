"""One run per --output_dir: a lock that names its holder and dies with it.

Two runs training into one folder would overwrite each other's checkpoints and
results, and both could exit 0. So a run takes an exclusive lock on
`<output_dir>/.bert_tf.lock` (per worker role: the workers of one multi-worker run
share the folder on purpose, each holding its own role's lock) and writes who holds
it (pid, host, start time, command). The lock is the kernel's (flock): it is released
when the process ends however it ends, so a killed run never blocks the next one. A run
that ends normally (or stops on an error) also removes the file, so a run stopped by a
check leaves the folder as it found it.
Remote folders (gs://, s3://, hdfs://) cannot be locked this way; there the lock is
skipped and the log says so.
"""

import atexit
import datetime
import fcntl
import json
import os
import socket
import sys

from absl import logging

from bert_tf.errors import UserInputError

LOCK_NAME = ".bert_tf.lock"

# The locks this process holds (path -> open file), kept open for its lifetime.
_held = {}


def _describe(holder):
  if not holder:
    return "another run (it has not written its details yet)"
  return "pid %s on host %s, started %s: %s" % (holder.get("pid"), holder.get("host"),
                                               holder.get("started"), holder.get("command"))


def acquire(output_dir, role=""):
  """Locks `output_dir` for this process (and `role`, e.g. "worker_1"), or stops naming the
  run that holds it. Returns the lock file's path (None for a remote folder)."""
  if "://" in str(output_dir):
    logging.info("Not locking %s: a remote folder cannot hold a file lock; make sure no other "
                 "run writes there.", output_dir)
    return None
  path = os.path.join(output_dir, LOCK_NAME + ("." + role if role else ""))
  if path in _held:
    return path
  while True:
    handle = open(path, "a+")
    try:
      fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
      handle.seek(0)
      try:
        holder = json.loads(handle.read() or "null")
      except ValueError:
        holder = None
      handle.close()
      raise UserInputError(
          "--output_dir=%s is in use by %s. Two runs in one folder overwrite each other's "
          "checkpoints and results: wait for that run to end, stop it, or pass another "
          "--output_dir." % (output_dir, _describe(holder))) from None
    # The file may have been removed by the run that held it as it ended: then this lock is
    # on a file no one else can see; take the one now at `path`.
    try:
      same = os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
      same = False
    if same:
      break
    handle.close()
  handle.seek(0)
  handle.truncate()
  handle.write(json.dumps({
      "pid": os.getpid(), "host": socket.gethostname(),
      "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
      "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:])}) + "\n")
  handle.flush()
  _held[path] = handle
  return path


def release(path):
  """Removes the lock file and releases the lock (still held while the file goes, so no other
  run can take a lock on a file that is about to vanish)."""
  handle = _held.pop(path, None)
  if handle is None:
    return
  try:
    os.remove(path)
  except OSError:
    pass
  fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
  handle.close()


@atexit.register
def _release_all():
  for path in list(_held):
    release(path)
