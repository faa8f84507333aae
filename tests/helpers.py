"""What several test files share: the checkout's paths and the tiny Google-layout reference
model, float32 bounds, the one way to run a script (run_script: this checkout's scripts and
the test programs of tests/programs/, in a shared process or one of their own, with or
without bert_tf importable), and calling a model from many threads. One definition each;
conftest.py holds the fixtures only."""

import json
import os
import pathlib
import subprocess
import sys
import threading
import typing

import numpy as np
import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
# The programs the tests run in a process of their own, from ROOT (run_script(PROGRAMS + name)).
PROGRAMS = "tests/programs/"
FIXTURES = pathlib.Path(__file__).parent / "fixtures"
VOCAB_UNCASED = str(FIXTURES / "vocab_uncased.txt")


class TinyModel(typing.NamedTuple):
  """The tiny reference model's files in Google's release layout (its vocab is VOCAB_UNCASED):
  2 layers, hidden 32."""
  dir: pathlib.Path
  ckpt: str
  config: str


_TINY_DIR = FIXTURES / "checkpoint" / "tiny_uncased_L-2_H-32_A-4"
TINY = TinyModel(_TINY_DIR, str(_TINY_DIR / "bert_model.ckpt"), str(_TINY_DIR / "bert_config.json"))

# Largest |difference| from float32 allowed to the inference precisions (bert_tf.utils.precision) on
# real sentences, for the tiny model (hidden 32): bfloat16 keeps 8 bits of mantissa in every
# matmul, int8 quantizes the Dense weights per column and their inputs per token. The sequence
# output, which LayerNorm keeps near unit scale, moves more than the classifier logits; each
# bound is several times the difference measured (docs/performance.md, inference precision).
PRECISION_TOLERANCE = {
    "bfloat16": {"logits": 0.01, "sequence_output": 0.15, "mean_sequence": 0.02},
    "int8": {"logits": 0.02, "sequence_output": 0.3, "mean_sequence": 0.04}}

# float32 resolves 2**-23 of a value: FLOAT32_EPS * |x| is 1-2 ulps of x (1.3e-6 at a loss of
# 11, where 1e-6 is one ulp). Two float32 computations of the same numbers that sum in other
# orders (oneDNN and Eigen pick other kernels on AVX2, AVX-512 and AMX, and for other shapes)
# land an ulp or a few apart, so a bound between them scales with the magnitude.
FLOAT32_EPS = float(np.finfo(np.float32).eps)
# extract_features writes round(x, 6): a written value is up to this far from its float32.
JSONL_ROUNDING = 5e-7


def float32_approx(expected, ulps=4):
  """pytest.approx within `ulps` float32 epsilons of |expected| (a float32 loss, a sum)."""
  return pytest.approx(expected, rel=ulps * FLOAT32_EPS, abs=0)


def assert_float32_close(actual, expected, ulps=4, atol=0.0, err_msg=""):
  """assert_allclose within `atol` plus `ulps` float32 epsilons of the largest |expected|:
  rounding in sums and matmuls scales with the magnitudes summed, not with each output."""
  atol = atol + ulps * FLOAT32_EPS * float(np.max(np.abs(expected)))
  np.testing.assert_allclose(actual, expected, rtol=0, atol=atol, err_msg=err_msg)


def tiny_config():
  from bert_tf.config import BertConfig
  return BertConfig.from_json_file(TINY.config)


def tiny_pretraining_model():
  """The tiny reference encoder with its MLM and NSP heads, loaded from the checkpoint."""
  from bert_tf import checkpoints, heads
  from bert_tf.modeling import BertModel
  config = tiny_config()
  encoder = BertModel(config)
  mlm = heads.MaskedLMHead(config, encoder.get_embedding_table(), name="mlm")
  nsp = heads.NextSentenceHead(config, name="nsp")
  mlm.build()
  nsp.build()
  checkpoints.load_checkpoint(TINY.ckpt, encoder, [mlm, nsp])
  return encoder, mlm, nsp


def pretraining_model(config):
  """A fresh encoder with built MLM and NSP heads, named as in the tests' checkpoints."""
  from bert_tf import heads
  from bert_tf.modeling import BertModel
  encoder = BertModel(config)
  mlm = heads.MaskedLMHead(config, encoder.get_embedding_table(), name="mlm")
  nsp = heads.NextSentenceHead(config, name="nsp")
  mlm.build()
  nsp.build()
  return encoder, mlm, nsp


def with_tiny_weights(model, head_scale):
  """Task `model` (on tiny_config()) with the tiny checkpoint's encoder and its heads drawn from
  N(0, head_scale): away from zero, so that its answers differ by row and mean something."""
  from bert_tf import checkpoints
  checkpoints.load_checkpoint(TINY.ckpt, model.encoder)
  for head in model.heads:
    for weight in head.weights:
      weight.assign(np.random.RandomState(1).normal(0, head_scale, weight.shape)
                    .astype(np.float32))
  return model


def run_script(script, *args, shared=None, python=None, env=None, isolated=False, cwd=ROOT,
               timeout=300, wait=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
  """The one way the tests run a script: `script` (a path from ROOT: one of this checkout's
  scripts, such as "run_ner.py", or a test program, PROGRAMS + "name.py"; a name without .py
  is a module, run as `python -m`) given `args`; a subprocess.CompletedProcess, output as text.

  shared: where it runs. The module's `script_session` fixture (or a ScriptSession of `script`):
  in that one process of the script, TensorFlow imported once, which is cheaper. None: in a
  process of its own, of `python` (default this one) in `cwd`, with `env`'s variables set (a
  value None unsets one). A test program finds bert_tf and helpers.py; isolated=True runs it
  (or anything) without PYTHONPATH and with TensorFlow's C++ logs quiet: what a deployment
  sees, bert_tf not importable. wait=False: the started subprocess.Popen, to read or signal
  while it runs (`stdout`, `stderr`: where its output goes, as subprocess takes them)."""
  args = [str(a) for a in args]
  if shared is not None:
    assert (python, env, isolated, cwd, wait) == (None, None, False, ROOT, True), (
        "a shared process runs command lines of this checkout's scripts only")
    session = shared if isinstance(shared, ScriptSession) else shared(script)
    return session(*args)
  command = ([os.path.join(ROOT, script)] if script.endswith(".py") else ["-m", script])
  variables = dict(os.environ)
  if script.startswith(PROGRAMS):
    variables["PYTHONPATH"] = os.pathsep.join([ROOT, TESTS])
  if isolated:
    variables.pop("PYTHONPATH", None)
    variables["TF_CPP_MIN_LOG_LEVEL"] = "2"
  for name, value in (env or {}).items():
    if value is None:
      variables.pop(name, None)
    else:
      variables[name] = str(value)
  command = [python or sys.executable, *command, *args]
  if not wait:
    return subprocess.Popen(command, cwd=cwd, env=variables, stdout=stdout, stderr=stderr,
                            text=True)
  return subprocess.run(command, cwd=cwd, env=variables, stdout=stdout, stderr=stderr,
                        text=True, timeout=timeout)


def printed_json(result):
  """The JSON of the last line a finished run printed; the test fails with the end of its
  stderr if the run failed."""
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


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


# One script's command lines run one after another in one Python process, each through the
# script's own entry point (cli.run(main), absl's app.run: flags parsed anew from their
# defaults), with its exit code and its output on file descriptors 1 and 2 captured as a
# process of its own would have them. TensorFlow is imported once, not once per command line.
# The driver, PROGRAMS + "script_cases.py", reads a command line (JSON) per line of stdin and
# answers each on stdout with a line _DONE + the JSON of [exit code, stdout file, stderr file].
_DONE = "script-case-done "


class ScriptSession:
  """One process that runs command lines of `script` (of this checkout) as run_script would,
  one at a time, when called: session(*args) -> subprocess.CompletedProcess, with the exit
  code and output of that command line alone (tests/programs/script_cases.py). Between calls
  the test reads and changes files as between processes; TensorFlow is imported once. A call
  whose process ended or hung fails; the next call starts a new process. A context manager.
  Tests call it through run_script(script, *args, shared=...)."""

  def __init__(self, script, timeout=600):
    self.script, self.timeout = script, timeout
    self.process = None
    self._start()  # importing while the caller prepares its first command line

  def _start(self):
    import queue
    import tempfile
    self.folder = tempfile.mkdtemp(prefix="script_session_")
    self.log = open(os.path.join(self.folder, "driver.log"), "w")
    self.process = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, PROGRAMS, "script_cases.py"), ROOT, self.script,
         self.folder, _DONE], cwd=ROOT,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
    self.answers = queue.Queue()
    threading.Thread(target=self._read, args=(self.process, self.answers), daemon=True).start()

  @staticmethod
  def _read(process, answers):
    for line in process.stdout:
      if line.startswith(_DONE):
        answers.put(json.loads(line[len(_DONE):]))
    answers.put(None)  # the driver ended

  def __call__(self, *args):
    import queue
    args = [str(a) for a in args]
    if self.process is None:
      self._start()
    try:
      self.process.stdin.write(json.dumps(args) + "\n")
      self.process.stdin.flush()
      answer = self.answers.get(timeout=self.timeout)
    except (BrokenPipeError, queue.Empty):
      answer = None
    if answer is None:
      with open(self.log.name, encoding="utf-8", errors="replace") as log:
        tail = log.read()[-3000:]
      self.close()
      raise AssertionError("%s %s: the driver process ended or hung:\n%s" % (
          self.script, " ".join(args), tail))
    code, stdout, stderr = answer
    with open(stdout, encoding="utf-8", errors="replace") as out, open(
        stderr, encoding="utf-8", errors="replace") as err:
      return subprocess.CompletedProcess([self.script, *args], code, out.read(), err.read())

  def close(self):
    import shutil
    if self.process is None:
      return
    try:
      self.process.stdin.close()  # the driver ends after its last command line
      self.process.wait(timeout=60)
    except (BrokenPipeError, subprocess.TimeoutExpired):
      self.process.kill()
      self.process.wait()
    self.process = None
    self.log.close()
    shutil.rmtree(self.folder, ignore_errors=True)

  def __enter__(self):
    return self

  def __exit__(self, *unused):
    self.close()
