"""One short request's weight matmuls alone, in each TensorFlow kernel setting and in ONNX Runtime.

    python -m benchmarks.matmul_chain [--ort_python=/path/to/python] [--rows=12]
        [--threads=default,1:1] [--settings=onednn,frozen,constants,eigen,xla,xla_xnnpack]

An encoder's request of a dozen tokens is mostly its weight matmuls of a dozen rows (MiniLM-L6:
36 of them over 42 MB of float32 weights), and those rows are too few for a matmul kernel's
usual blocking: what decides the time is how fast a kernel streams the weights. This times that
chain alone (per layer four hidden x hidden projections and the FFN's two matmuls, each with
its bias, distinct weights; benchmarks/sides/matmul_chain.py), each setting in a fresh process
because the settings are environment variables read once: oneDNN (`TF_ENABLE_ONEDNN_OPTS=1`),
oneDNN with frozen weights (`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1`), the weights as graph
constants, Eigen (`TF_ENABLE_ONEDNN_OPTS=0`), XLA (`jit_compile=True`) and XLA with XNNPACK
dots (`XLA_FLAGS=--xla_cpu_experimental_xnn_fusion_type=dot`); with --ort_python, ONNX
Runtime's CPU provider on the same chain. Per row: the p50 of --calls calls, the weights'
bytes over it (what a kernel that reads each weight once a call would need from memory), and
ONNX Runtime's p50 over the row's (above 1: TensorFlow faster). Each row's first output row is
compared with the first setting's (the same chain, so only float32 rounding apart: checked
within 1e-4 of its largest value). Prints figures only (common.Results).
"""

import os
import sys

from absl import app, flags

from benchmarks import common

FLAGS = flags.FLAGS
flags.DEFINE_integer("rows", 12, "Rows of each matmul (the request's tokens).")
flags.DEFINE_integer("layers", 6, "Layers of the chain (MiniLM-L6: 6).")
flags.DEFINE_integer("hidden", 384, "Hidden size (MiniLM-L6: 384).")
flags.DEFINE_integer("intermediate", 1536, "FFN size (MiniLM-L6: 1536).")
flags.DEFINE_integer("calls", 400, "Timed calls per setting, after 20 untimed.")
flags.DEFINE_list("threads", ["default"], "Thread pools to time each setting with: 'default' "
                  "(TensorFlow's, and ONNX Runtime with one intra-op thread per CPU) or "
                  "INTER:INTRA, e.g. 1:1 (ONNX Runtime: INTRA intra-op threads).")
flags.DEFINE_string("ort_python", None, "A Python with onnxruntime and onnx: adds ONNX "
                    "Runtime's rows and the ratio column.")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too

ONEDNN = {"TF_ENABLE_ONEDNN_OPTS": "1"}
# name -> (row label, environment, arguments of the side)
SETTINGS = {
    "onednn": ("oneDNN", ONEDNN, {}),
    "frozen": ("oneDNN, frozen weights", dict(ONEDNN, TF_ONEDNN_ASSUME_FROZEN_WEIGHTS="1"), {}),
    "constants": ("oneDNN, weights as graph constants", ONEDNN, {"constants": True}),
    "eigen": ("Eigen (oneDNN off)", {"TF_ENABLE_ONEDNN_OPTS": "0"}, {}),
    "xla": ("XLA", ONEDNN, {"jit_compile": True}),
    "xla_xnnpack": ("XLA, XNNPACK dots",
                    dict(ONEDNN, XLA_FLAGS="--xla_cpu_experimental_xnn_fusion_type=dot"),
                    {"jit_compile": True}),
}
flags.DEFINE_list("settings", list(SETTINGS), "TensorFlow settings to time, of: %s."
                  % ", ".join(SETTINGS))


def thread_pools(value):
  """(inter, intra) of a --threads entry; (0, 0) keeps the defaults."""
  if value == "default":
    return 0, 0
  try:
    inter, intra = (int(n) for n in value.split(":"))
  except ValueError:
    raise app.UsageError("--threads entry %r: 'default' or INTER:INTRA, e.g. 1:1." % value)
  if inter < 1 or intra < 1:
    raise app.UsageError("--threads entry %r: both pools need at least one thread." % value)
  return inter, intra


def main(_):
  unknown = [s for s in FLAGS.settings if s not in SETTINGS]
  if unknown:
    raise app.UsageError("--settings: unknown %s (known: %s)." % (", ".join(unknown),
                                                                 ", ".join(SETTINGS)))
  pools = [(value, thread_pools(value)) for value in FLAGS.threads]
  shape = {"rows": FLAGS.rows, "layers": FLAGS.layers, "hidden": FLAGS.hidden,
           "intermediate": FLAGS.intermediate, "calls": FLAGS.calls}
  weight_bytes = 4 * FLAGS.layers * (4 * FLAGS.hidden ** 2 + 2 * FLAGS.hidden * FLAGS.intermediate
                                     + 4 * FLAGS.hidden + FLAGS.intermediate)
  results = common.Results("matmul_chain", dict(shape, weights_mb=round(weight_bytes / 1e6, 1)))
  ort = {}
  if FLAGS.ort_python:
    for value, (_, intra) in pools:
      ort[value] = common.run_side(FLAGS.ort_python, "matmul_chain", "ort", dict(
          shape, threads=intra or os.cpu_count()), failure="ONNX Runtime's chain failed")
    results.note("ONNX Runtime: " + next(iter(ort.values()))["version"])
  reference, tensorflow = None, None

  def add(label, value, got, ratio):
    nonlocal reference
    reference = got["row"] if reference is None else reference
    scale = max(max(abs(v) for v in reference), 1e-30)
    difference = max(abs(a - b) for a, b in zip(got["row"], reference)) / scale
    figures = {"p50": (got["p50_ms"], "ms"),
               "weights read": (weight_bytes / got["p50_ms"] / 1e6, "GB/s"),
               "output diff": (difference, "")}
    if ratio is not None:
      figures["x ORT"] = (ratio, "x")
    results.add(label, figures, {"threads": value}, {"same output": difference <= 1e-4})

  for name in FLAGS.settings:
    label, env, arguments = SETTINGS[name]
    for value, (inter, intra) in pools:
      try:
        side = dict(shape, constants=False, jit_compile=False, inter=inter, intra=intra)
        side.update(arguments)
        got = common.run_side(sys.executable, "matmul_chain", "tensorflow", side,
                              failure="%s failed" % label, env=env)
      except SystemExit as failed:  # e.g. an XLA flag this TensorFlow does not know
        results.note("%s, threads %s: not timed (%s)" % (label, value,
                                                         str(failed).splitlines()[0]))
        continue
      add(label, value, got, ort[value]["p50_ms"] / got["p50_ms"] if value in ort else None)
      tensorflow = got["version"]
  for value, got in ort.items():
    add("ONNX Runtime", value, got, 1.0)
  if reference is not None:
    results.note("TensorFlow: " + tensorflow)
  results.note("x ORT: ONNX Runtime's p50 over the row's, same threads entry (above 1: faster)")
  results.report()


if __name__ == "__main__":
  app.run(main)
