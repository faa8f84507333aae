"""Smoke test of benchmarks/: each benchmark that needs no peer's Python and no real model runs
once at the tiny checkpoint's shape with few iterations, and its result records (--json_out)
are checked: the benchmark's name and rows, finite figures (positive for times and rates), and
the checks the benchmark itself makes. Timings are never asserted.

The benchmarks run in two subprocesses side by side, each paying TensorFlow's start-up once:
tests/programs/benchmark_plan.py imports each benchmark module of its plan, parses its flags and
calls its main, then drops its flags before the next one. The peers' rows (Hugging Face
transformers, ONNX Runtime) need a Python with torch, transformers, onnxruntime, onnx and
onnxscript, which CI has not: set BERT_TF_PEER_PYTHON to one to run them too.

Not run here: benchmarks/pretraining_data_beam.py, which starts create_pretraining_data.py and
the Beam pipeline as separate processes (a TensorFlow start-up each); the check it makes, the
Beam records equal to the single-file runs', is tests/test_pretraining_data_beam.py's. Nor
benchmarks/beam_inference.py, which starts predict_beam.py with 1 and 2 worker processes: its
checks (the answers and bytes of both equal) are tests/test_beam_inference.py's.
"""

import json
import math
import os

import pytest

from helpers import PROGRAMS, ROOT, TINY, VOCAB_UNCASED, run_script

PEER_PYTHON = os.environ.get("BERT_TF_PEER_PYTHON")
NO_PEER = "no peer Python: set BERT_TF_PEER_PYTHON to one with torch, transformers, " \
          "onnxruntime, onnx and onnxscript to time the peers' rows"
# Figures in these units are times, rates or ratios of them: measured, so above 0.
POSITIVE_UNITS = {"s", "ms", "s/batch", "s/step", "ms/pass", "ms/call", "GFLOP/s", "x",
                  "sequences/s", "pairs/s", "records/s", "sentences/s", "MB"}

pytestmark = pytest.mark.slow


def _reuters(path, rows):
  """A Reuters ModApte-shaped TSV (`grain corn text`)."""
  lines = ["grain\tcorn\ttext"] + ["%d\t0\t%s" % (label, text) for label, text in rows]
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


def _classifier_checkpoint(folder):
  """The tiny encoder with a 2-label classifier head, as a run_classifier --output_dir holds."""
  import numpy as np

  from bert_tf import checkpoints
  _, variables = checkpoints.read_variables(TINY.ckpt)
  variables = {n: v for n, v in variables.items() if n.startswith("bert/")}
  rng = np.random.default_rng(0)
  variables["output_weights"] = rng.normal(0, 0.5, (2, 32)).astype(np.float32)
  variables["output_bias"] = np.zeros(2, np.float32)
  return checkpoints.save_checkpoint(folder / "model.ckpt-1", extra=variables)


def _plan(tmp):
  """[(name, benchmark module, flags)]: every benchmark this test runs, with its tiny inputs."""
  from test_text_embedder import write_st_folder
  model_dir = write_st_folder(tmp / "minilm_like")  # also an HF BERT folder (hf_parity)
  with open(os.path.join(ROOT, "data", "pretraining_corpus.txt"), encoding="utf-8") as f:
    corpus = f.read().split("\n\n")
  (tmp / "corpus.txt").write_text("\n\n".join(corpus[:12]) + "\n", encoding="utf-8")
  texts = [(i % 2, "grain prices rose %d percent as wheat exports grew" % i
            if i % 2 else "the company reported higher profits in quarter %d" % i)
           for i in range(12)]
  peer = ["--hf_python=" + PEER_PYTHON, "--ort_python=" + PEER_PYTHON] if PEER_PYTHON else []
  hf_peer = peer[:1]
  tiny = ["--bert_config_file=" + TINY.config]
  return [
      ("encoder_throughput", "encoder_throughput", tiny + peer + [
          "--batch_size=2", "--seq_length=16", "--iterations=1", "--matmul_size=64",
          "--precisions=float32,int8"]),
      ("op_profile", "op_profile", tiny + [
          "--batch_size=2", "--seq_length=16", "--iterations=1", "--top=3",
          "--precisions=float32"]),
      ("pretraining_step", "pretraining_step", tiny + [
          "--batch_size=2", "--seq_length=16", "--max_predictions_per_seq=2",
          "--iterations=1", "--matmul_size=64", "--nojit_compile"]),  # XLA compiles for long
      ("finetuning_step", "finetuning_step", tiny + hf_peer + [
          "--vocab_file=" + VOCAB_UNCASED, "--batch_size=2", "--max_seq_length=16",
          "--steps=1"]),
      ("first_step", "first_step", tiny + hf_peer + [
          "--vocab_file=" + VOCAB_UNCASED, "--batch_size=2", "--max_seq_length=16",
          "--runs=1", "--train_steps=3,1000000", "--later_steps=1"]),
      ("hf_parity", "hf_parity", hf_peer + [
          "--hf_model_dir=" + model_dir, "--batch_size=2", "--max_seq_length=16"]),
      ("pretraining_data", "pretraining_data", [
          "--input_file=%s" % (tmp / "corpus.txt"), "--vocab_file=" + VOCAB_UNCASED,
          "--dupe_factor=1", "--max_seq_length=32", "--max_predictions_per_seq=4"]),
      ("precision_accuracy prepare", "precision_accuracy", [
          "--prepare_dir=%s" % (tmp / "reuters"),
          "--reuters_train=" + _reuters(tmp / "train.tsv", texts[:4]),
          "--reuters_test=" + _reuters(tmp / "test.tsv", texts)]),
      ("precision_accuracy", "precision_accuracy", [
          "--checkpoint=" + _classifier_checkpoint(tmp), "--bert_config_file=" + TINY.config,
          "--vocab_file=" + VOCAB_UNCASED, "--test_file=%s" % (tmp / "reuters" / "dev.tsv"),
          "--precisions=float32,int8", "--max_seq_length=16", "--batch_size=4"]),
      ("serving_latency", "serving_latency", tiny + peer + [
          "--vocab_file=" + VOCAB_UNCASED, "--max_seq_length=32", "--requests=4",
          "--batches=1", "--precisions=float32", "--nolitert", "--serving_one_thread"]),
      ("serving_profile", "serving_profile", tiny + [
          "--vocab_file=" + VOCAB_UNCASED, "--max_seq_length=32", "--requests=3",
          "--rounds=1"]),
      ("matmul_chain", "matmul_chain", peer[1:] + [
          "--rows=2", "--layers=1", "--hidden=16", "--intermediate=32", "--calls=3",
          "--settings=onednn,xla_xnnpack"]),
      ("text_embedder", "text_embedder", [
          "--model_dir=" + model_dir, "--requests=3", "--batches=1"]),
  ]


# The benchmarks whose sides start fresh TensorFlow processes, run beside the others: two
# subprocesses of about equal CPU time keep both cores busy.
SECOND_PROCESS = ("serving_latency", "serving_profile", "hf_parity", "pretraining_data",
                  "precision_accuracy prepare", "precision_accuracy", "matmul_chain",
                  "first_step")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """{plan name: its records, or the error that stopped it}, from two subprocesses."""
  tmp = tmp_path_factory.mktemp("benchmarks")
  plans = ([], [])
  for name, module, argv in _plan(tmp):
    out = tmp / (name.replace(" ", "_") + ".jsonl")
    plans[name in SECOND_PROCESS].append({
        "name": name, "module": "benchmarks." + module, "argv": argv + ["--json_out=%s" % out],
        "out": str(out), "error": str(out) + ".error"})
  processes = []
  for index, plan in enumerate(plans):
    plan_file = tmp / ("plan-%d.json" % index)
    plan_file.write_text(json.dumps(plan))
    processes.append(run_script(PROGRAMS + "benchmark_plan.py", plan_file,
                                env={"TF_CPP_MIN_LOG_LEVEL": "2"}, wait=False))
  for process in processes:
    _, stderr = process.communicate(timeout=1200)
    assert process.returncode == 0, stderr[-3000:]
    print("\n".join(line for line in stderr.splitlines() if "CPU of the run" in line))
  outcomes = {}
  for entry in plans[0] + plans[1]:
    if os.path.exists(entry["error"]):
      with open(entry["error"], encoding="utf-8") as f:
        outcomes[entry["name"]] = f.read()
    else:
      with open(entry["out"], encoding="utf-8") as f:
        outcomes[entry["name"]] = [json.loads(line) for line in f]
  return outcomes


def records_of(runs, name, benchmark, rows):
  """The records of plan entry `name`, checked: all of `benchmark`, each row of `rows` there,
  figures finite with a unit each (positive where they time or rate), every check held."""
  records = runs[name]
  assert isinstance(records, list), "%s failed:\n%s" % (name, records)
  assert {r["benchmark"] for r in records} == {benchmark}
  assert set(rows) <= {r["row"] for r in records}, [r["row"] for r in records]
  for record in records:
    assert record["cpu"] and "logical CPUs" in record["cpu"]
    assert set(record["figures"]) == set(record["units"]) and record["figures"], record
    measured = {k: v for k, v in record["figures"].items() if v is not None}
    assert measured, record
    for figure, value in measured.items():
      assert math.isfinite(value), (record["row"], figure, value)
      if record["units"][figure] in POSITIVE_UNITS:
        assert value > 0, (record["row"], figure, value)
    assert all(record["checks"].values()), (record["row"], record["checks"])
  return {r["row"]: r for r in records}


def test_encoder_throughput(runs):
  rows = records_of(runs, "encoder_throughput", "encoder_throughput",
                    ["matmul peak float32", "bert_tf float32", "bert_tf int8"])
  assert rows["bert_tf int8"]["settings"]["mode"] == "XLA"
  assert rows["bert_tf float32"]["settings"]["hidden"] == 32
  if PEER_PYTHON:
    assert {"HF float32", "HF int8", "ORT float32", "ORT int8"} <= set(rows)


def test_op_profile(runs):
  rows = records_of(runs, "op_profile", "op_profile", ["float32"])
  summary = rows["float32"]["figures"]
  assert summary["matmuls"] + summary["other ops"] == pytest.approx(summary["kernels"])
  assert len([r for r in rows if r.startswith("float32 ")]) == 3


def test_pretraining_step(runs):
  records_of(runs, "pretraining_step", "pretraining_step",
             ["matmul peak float32", "jit_compile=False"])


def test_finetuning_step(runs):
  rows = records_of(runs, "finetuning_step", "finetuning_step", ["padded", "cut"])
  assert rows["cut"]["figures"]["cut speed-up"] is None
  assert ("HF transformers" in rows) == bool(PEER_PYTHON)


def test_first_step(runs):
  rows = records_of(runs, "first_step", "first_step",
                    ["bert_tf, 3-step run", "bert_tf, 1000000-step run"]
                    + ["HF transformers"] * bool(PEER_PYTHON))
  # The run's length picks the update: the tiny model's short run the kernels, a long one
  # compiled by XLA per weight shape.
  assert rows["bert_tf, 3-step run"]["settings"]["update"] == "TensorFlow's Adam kernels"
  assert (rows["bert_tf, 1000000-step run"]["settings"]["update"]
          == "compiled by XLA once per weight shape")
  for row in rows.values():  # one run each: its first step is its tracing and first call
    if "tracing" in row["figures"]:
      assert row["figures"]["first step"] == pytest.approx(
          row["figures"]["tracing"] + row["figures"]["first call"])


def test_hf_parity(runs):
  rows = records_of(runs, "hf_parity", "hf_parity",
                    ["numpy float64 reference", "hf -> google -> hf"])
  assert rows["hf -> google -> hf"]["checks"] == {"bit-identical": True}
  for name, row in rows.items():
    if name != "hf -> google -> hf":  # float32 against float64 and against torch
      assert max(row["figures"].values()) < 1e-4, row
  if PEER_PYTHON:
    assert rows["transformers, bert_tf's written folder"]["checks"]["no missing keys"]


def test_pretraining_data(runs):
  # The speed-up row needs the original google-research/bert code (--original_dir), which this
  # project does not ship: only bert_tf's side runs here.
  rows = records_of(runs, "pretraining_data", "pretraining_data",
                    ["bert_tf", "bert_tf read + tokenize", "bert_tf encode + write"])
  assert rows["bert_tf"]["figures"]["records"] > 0


def test_precision_accuracy(runs):
  prepared = records_of(runs, "precision_accuracy prepare", "precision_accuracy", [])
  assert sorted(r["figures"]["documents"] for r in prepared.values()) == [4, 12]
  # --export_dir's LiteRT rows need a run_classifier export and minutes of conversion.
  rows = records_of(runs, "precision_accuracy", "precision_accuracy", ["float32", "int8"])
  reference = rows["float32"]["figures"]
  assert reference["agree"] == 100 and reference["max |dp|"] == 0
  assert rows["int8"]["settings"]["test_documents"] == 12


def test_serving_latency(runs):
  # --nolitert: LiteRT's conversions take minutes; tests/test_litert.py covers them.
  rows = records_of(runs, "serving_latency", "serving_latency",
                    ["bert_tf float32 padded", "bert_tf float32"])
  assert rows["bert_tf float32 padded"]["figures"]["x short"] > 0
  assert rows["bert_tf float32 1-thread vs plain loader"]["figures"]["max |dp|"] < 1e-6
  if PEER_PYTHON:
    assert {"HF float32", "ORT float32", "ORT float32 1-thread"} <= set(rows)


def test_serving_profile(runs):
  rows = records_of(runs, "serving_profile", "serving_profile",
                    ["request", "tokenizer", "model", "empty call", "tf.constant"])
  assert rows["request"]["figures"]["nodes"] > rows["empty call"]["figures"]["nodes"]


def test_matmul_chain(runs):
  rows = records_of(runs, "matmul_chain", "matmul_chain",
                    ["oneDNN", "XLA, XNNPACK dots"] + ["ONNX Runtime"] * bool(PEER_PYTHON))
  assert rows["oneDNN"]["figures"]["output diff"] == 0  # the reference row
  # 4 * (4 * 16 * 16 + 2 * 16 * 32 + 4 * 16 + 32) bytes of weights and biases
  assert rows["oneDNN"]["settings"]["weights_mb"] == 0.0


def test_text_embedder(runs):
  # The sentence-transformers row needs --st_python, a Python with sentence-transformers.
  rows = records_of(runs, "text_embedder", "text_embedder", ["bert_tf SavedModel"])
  assert rows["bert_tf SavedModel"]["settings"]["version"].startswith("tensorflow ")


def test_peers_are_checked_before_anything_runs():
  """A peer's Python is asked which modules it lacks, through benchmarks/sides."""
  result = run_script("benchmarks.sides.imports", "missing",
                      json.dumps({"modules": ["json", "no_such_module_here"]}),
                      env={"PYTHONPATH": ROOT}, timeout=60)
  assert result.returncode == 0, result.stderr
  assert json.loads(result.stdout.splitlines()[-1]) == ["no_such_module_here"]


@pytest.mark.skipif(not PEER_PYTHON, reason=NO_PEER)
def test_peer_python_has_the_peers():
  result = run_script("benchmarks.sides.imports", "missing",
                      json.dumps({"modules": ["torch", "transformers", "onnxruntime"]}),
                      python=PEER_PYTHON, env={"PYTHONPATH": ROOT}, timeout=120)
  assert json.loads(result.stdout.splitlines()[-1]) == []


def test_training_seconds_reads_the_runners_log_as_it_is_written(tmp_path):
  """benchmarks/reuters.training_seconds on lines in the trainer's own format (the loop's
  module was renamed once, and the benchmarks silently lost their training times): from the
  'Running training' line to the last step line, across midnight too."""
  from benchmarks import reuters
  log = tmp_path / "run.log"
  log.write_text(
      "I1127 23:59:56.000000 1 template.py:465] ***** Running training: 8 examples *****\n"
      "I1127 23:59:58.500000 1 trainer.py:360] step 1: loss 0.70, lr 1e-4\n"
      "I1128 00:00:06.250000 1 trainer.py:360] step 2: loss 0.60, lr 5e-5\n"
      "I1128 00:00:07.000000 1 trainer.py:388] Training done at step 2 (saved)\n")
  assert reuters.training_seconds(str(log)) == pytest.approx(10.25)
