"""Helpers several test files share: running this checkout's scripts, running code in a
process that cannot import bert_tf (as a server would), and calling a model from many threads."""

import json
import os
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_script(script, *args, cwd=ROOT, timeout=300):
  """A script of this checkout run with this Python; output captured as text."""
  return subprocess.run([sys.executable, os.path.join(ROOT, script), *args], cwd=cwd,
                        capture_output=True, text=True, timeout=timeout)


def run_isolated(command, cwd, timeout=120):
  """`command` without PYTHONPATH (bert_tf is not importable from this checkout) and with
  TensorFlow's C++ logs quiet: what a deployment sees."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  env.pop("PYTHONPATH", None)
  return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                        timeout=timeout)


def run_isolated_script(source, folder, *args, timeout=120):
  """Python `source` written to `folder` and run there by run_isolated; the JSON of the last
  line it prints (the test fails with stderr's tail if it fails)."""
  script = folder / "isolated.py"
  script.write_text(source)
  result = run_isolated([sys.executable, str(script), *args], folder, timeout)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


_SERVING_PREAMBLE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the text ops of the SavedModels)
assert not any(m.startswith("bert_tf") for m in sys.modules)
args = json.loads(sys.argv[1])
models = [tf.saved_model.load(path) for path in sys.argv[2:]]
"""


def run_serving_script(body, folder, saved_models, args, timeout=120):
  """`body` by run_isolated_script, after a preamble that imports TensorFlow and
  tensorflow_text only (bert_tf must stay out), loads `saved_models` as `models` and the
  JSON-able `args` as `args`; the JSON of the last line it prints."""
  return run_isolated_script(_SERVING_PREAMBLE + body, folder, json.dumps(args),
                             *map(str, saved_models), timeout=timeout)


def call_concurrently(call, inputs, repeats=3):
  """`call(*inputs[i])` `repeats` times in thread i, all threads released together (the
  race a server sees); the results per input. Any thread's exception fails the test."""
  results, errors = [None] * len(inputs), []
  barrier = threading.Barrier(len(inputs))

  def worker(index):
    try:
      barrier.wait()
      results[index] = [call(*inputs[index]) for _ in range(repeats)]
    except Exception as e:  # pylint: disable=broad-exception-caught
      errors.append(e)

  threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(inputs))]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert not errors, errors
  return results


def run_saved_model_cli(*args, cwd):
  """`saved_model_cli *args` by run_isolated, after importing tensorflow_text (whose ops the
  text signatures need and which the plain command does not import)."""
  main = ("import sys, tensorflow_text; "
          "from tensorflow.python.tools.saved_model_cli import main; "
          "sys.argv[0] = 'saved_model_cli'; sys.exit(main())")
  return run_isolated([sys.executable, "-c", main, *args], cwd)


def run_tf_keras_script(source, folder, *args, timeout=300):
  """Python `source` run as run_isolated_script runs it, but with TF_USE_LEGACY_KERAS=1 (tf.keras
  is then tf_keras, Keras 2, as TF Hub's tutorials run: hub.KerasLayer needs it); the JSON of
  the last line it prints."""
  script = folder / "tf_keras_script.py"
  script.write_text(source)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_USE_LEGACY_KERAS="1")
  env.pop("PYTHONPATH", None)
  result = subprocess.run([sys.executable, str(script), *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=timeout)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def damaged_copy(source_dir, target_dir, how):
  """A copy of a Google release folder whose .data file is cut in half ("truncated") or has one
  bit flipped ("bit_flipped"); returns the checkpoint prefix."""
  import shutil
  shutil.copytree(source_dir, target_dir)
  data = os.path.join(target_dir, "bert_model.ckpt.data-00000-of-00001")
  with open(data, "rb") as f:
    raw = bytearray(f.read())
  if how == "truncated":
    raw = raw[:len(raw) // 2]
  else:
    raw[len(raw) // 3] ^= 0x40
  with open(data, "wb") as f:
    f.write(bytes(raw))
  return os.path.join(target_dir, "bert_model.ckpt")

