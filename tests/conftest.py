"""The tests' shared fixtures (the constants and helpers they use are in helpers.py)."""

import bert_tf  # noqa: F401  (sets TensorFlow environment defaults before TF loads)  # isort: skip
import pytest

from helpers import TINY, VOCAB_UNCASED, ScriptSession


@pytest.fixture
def release_dir(tmp_path):
  """A Google-release-shaped folder (config, vocab, checkpoint) in a temp dir."""
  import shutil
  out = tmp_path / "uncased_L-2_H-32_A-4"
  shutil.copytree(TINY.dir, out)
  shutil.copy(VOCAB_UNCASED, out / "vocab.txt")
  return out


@pytest.fixture(scope="module")
def script_session():
  """The module's processes of this checkout's scripts: run_script(script, *args,
  shared=script_session) runs a command line in the module's one helpers.ScriptSession of
  `script` (its command lines share one process instead of starting Python and TensorFlow
  each), started at its first and closed after the module."""
  sessions = {}

  def session(script):
    if script not in sessions:
      sessions[script] = ScriptSession(script)
    return sessions[script]

  yield session
  for started in sessions.values():
    started.close()
