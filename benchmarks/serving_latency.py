"""Serving latency of a classifier SavedModel against its peers, at each inference precision.

    python -m benchmarks.serving_latency [--bert_config_file=... --init_checkpoint=...]
        [--hf_python=/path/to/venv/bin/python --hf_model_dir=DIR]
        [--ort_python=/path/to/venv/bin/python] [--precisions=float32,int8]
        [--mediapipe_python=/path/to/mediapipe-venv/bin/python]

Exports one single-sentence classifier padded to max_seq_length (float32, as the original)
and cut to each request's length at each of --precisions (bert_tf.utils.precision.for_inference),
loads each in a fresh process that imports only tensorflow and tensorflow_text
(TF_ENABLE_ONEDNN_OPTS=1, as the README recommends for serving), and measures: one short
request (p50/p99), one long request (p50/p99) and the throughput of batches of 32 real
sentences from data/pretraining_corpus.txt (in a batch, each export's encoder computes only
the real tokens, the padded one's included: bert_tf.layers.pack_tokens). The peers answer the
same texts (tokenization, model and softmax, padding each batch to its longest as
transformers does), each precision in a fresh process too (benchmarks/peers.py says what
their precisions are):
  * --hf_python: Hugging Face transformers on PyTorch;
  * --ort_python: the same transformers model exported with torch.onnx, run by ONNX Runtime
    (float32 and dynamic int8).
The float32 export is also converted to LiteRT (bert_tf.export.litert, float32 and int8:
dynamic-range, int8 weights) and timed with ai_edge_litert from raw text (bert_tf's Python
FullTokenizer in the timed call; one request per call, so 32 sentences are 32 calls), with
LiteRT's default single thread and with the peers' threads. With --mediapipe_python the same
export also gets MediaPipe's metadata (export_litert.py --mediapipe_python: length fixed to
max_seq_length) and MediaPipe Tasks' TextClassifier answers the raw texts. Their probabilities
are checked against the float32 SavedModel's on the timed texts.
--hf_model_dir gives the peers the weights bert_tf reads through --init_checkpoint (the same
HF folder). Without a checkpoint the model is MiniLM-L6-shaped (6 layers, hidden 384) with
random weights. Prints figures only, with bert_tf's speed over each peer's (common.Results).
"""

import json
import os
import subprocess
import sys
import tempfile

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import app, flags

from benchmarks import common, peers

REPO = common.ROOT
FLAGS = flags.FLAGS
common.define_hf_comparison_flags(peers=True)
common.define_precisions_flag()
flags.DEFINE_string("vocab_file", os.path.join(REPO, "data", "vocab.txt"), "Vocabulary.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the text.")
flags.DEFINE_integer("max_seq_length", 128, "Packed length of the padded export.")
flags.DEFINE_integer("requests", 200, "Timed single requests per workload.")
flags.DEFINE_integer("batches", 20, "Timed batches of 32 sentences.")
flags.DEFINE_string("serving_tf_xla_flags", None, "If set, also time each cut bert_tf export in "
                    "a serving process with this TF_XLA_FLAGS (e.g. '--tf_xla_auto_jit=2 "
                    "--tf_xla_cpu_global_jit': the loader compiles the model's ops with XLA; "
                    "each workload's warm-up call pays the compilation), as rows 'bert_tf P "
                    "xla-loader'.")
flags.DEFINE_bool("serving_one_thread", False, "Also time each cut bert_tf export in a serving "
                  "process with one inter-op and one intra-op thread (TF_NUM_INTEROP_THREADS=1 "
                  "TF_NUM_INTRAOP_THREADS=1, docs/serving.md's setting for one request at a "
                  "time), as rows 'bert_tf P 1-thread' (and, with --serving_frozen_weights, "
                  "'bert_tf P frozen-weights 1-thread').")
flags.DEFINE_bool("serving_frozen_weights", False, "Also time each cut bert_tf export in a "
                  "serving process with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 (oneDNN keeps the "
                  "weights it reorders for its kernels from one call to the next instead of "
                  "reordering them at every call; only for processes that never change their "
                  "weights), as rows 'bert_tf P frozen-weights'.")
flags.DEFINE_string("mediapipe_python", None, "A Python with mediapipe==0.10.21 (a virtualenv "
                    "of its own, as export_litert.py's): also writes MediaPipe's metadata into "
                    "the LiteRT float32 and int8 files (length fixed to max_seq_length) and times "
                    "MediaPipe Tasks' TextClassifier from raw text there, as rows 'mediapipe P'.")
flags.DEFINE_bool("litert", True, "Convert the float32 export to LiteRT float32 and int8 and "
                  "time them from raw text, as rows 'litert P' (--nolitert: no LiteRT and no "
                  "MediaPipe rows, and no conversions, which take minutes).")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too


def workload():
  """A short sentence, a text past max_seq_length, and batches of real sentences."""
  with open(os.path.join(REPO, "data", "pretraining_corpus.txt"), encoding="utf-8") as f:
    lines = [l.strip() for l in f if len(l.split()) >= 5]
  short = min(lines[:200], key=len)
  return {"short": short, "long": " ".join(lines[:12]), "batch": lines[100:132],
          "requests": FLAGS.requests, "batches": FLAGS.batches}


def make_exports(folder, precisions):
  """The same classifier exported padded (float32) and cut to length at each precision;
  returns ({row name: path}, config)."""
  from bert_tf import checkpoints
  from bert_tf.tasks import glue
  from bert_tf.tasks.glue.export import export_classifier
  from bert_tf.utils import precision
  config = common.comparison_config()
  common.check_hf_model_shape(config)
  model = glue.ClassifierModel(config, num_labels=2, dynamic_length=False)
  if FLAGS.init_checkpoint:
    checkpoints.load_checkpoint(FLAGS.init_checkpoint, model.encoder, strict=False)

  def export(name, exported):
    return export_classifier(os.path.join(folder, name.replace(" ", "_")), exported,
                             FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length,
                             ["0", "1"], False)

  paths = {"bert_tf float32 padded": export("padded", model)}
  model.dynamic_length = True  # for_inference's copies take it from the model's config
  for p in precisions:
    paths["bert_tf " + p] = export(p, precision.for_inference(model, p))
  return paths, config


def check_tf_xla_flags(value):
  """Exits in one line, before any export or timing, if TensorFlow refuses
  --serving_tf_xla_flags (it aborts at the first function call, naming the flag)."""
  result = subprocess.run(
      [sys.executable, "-c", "import tensorflow as tf; tf.function(lambda: tf.constant(1))()"],
      capture_output=True, text=True, env=dict(os.environ, TF_XLA_FLAGS=value))
  if result.returncode:
    reason = [l for l in result.stderr.splitlines() if "TF_XLA_FLAGS" in l] or ["see its log"]
    sys.exit("--serving_tf_xla_flags=%r: TensorFlow refused it (%s)."
             % (value, reason[-1].split("] ")[-1]))


def loader_variants():
  """[(row suffix, environment)]: the serving processes the flags add for each cut export,
  beside the plain one."""
  variants = []
  if FLAGS.serving_tf_xla_flags:
    variants.append(("xla-loader", {"TF_XLA_FLAGS": FLAGS.serving_tf_xla_flags}))
  frozen = {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1"}
  if FLAGS.serving_frozen_weights:
    variants.append(("frozen-weights", frozen))
  if FLAGS.serving_one_thread:
    one = {"TF_NUM_INTEROP_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1"}
    variants.append(("1-thread", one))
    if FLAGS.serving_frozen_weights:
      variants.append(("frozen-weights 1-thread", dict(frozen, **one)))
  return variants


def max_difference(a, b):
  """Largest |difference| between two loaders' probabilities of the same texts."""
  return max(abs(x - y) for row_a, row_b in zip(a, b) for x, y in zip(row_a, row_b))


def answer_checks(results, report):
  """Rows of the LiteRT and MediaPipe rows' probabilities against the float32 SavedModel's, on
  the timed texts (ASCII only: MediaPipe's tokenizer differs from BERT's beyond ASCII)."""
  reference = results.get("bert_tf float32") or results["bert_tf float32 padded"]
  timed = workload()
  texts = [timed["short"], timed["long"]] + timed["batch"]
  ascii_rows = [i for i, t in enumerate(texts) if t.isascii()]
  pick = lambda rows: [rows[i] for i in ascii_rows]
  new = [n for n in results if n.split()[0] in ("litert", "mediapipe")]
  if new:
    report.note("answers of litert / mediapipe rows: their probabilities of the %d timed texts "
                "(%d ASCII, checked) against the float32 SavedModel's" %
                (len(texts), len(ascii_rows)))
  for name in new:
    report.add("%s vs SavedModel float32" % name, {"max |dp|": (max_difference(
        pick(results[name]["probabilities"]), pick(reference["probabilities"])), "")})


def ort_ratios(results, report):
  """Rows of the LiteRT and MediaPipe rows' speed over ONNX Runtime's at the same precision."""
  for name, r in results.items():
    if name.split()[0] not in ("litert", "mediapipe"):
      continue
    for ort_name in [n for n in results if n.split()[:2] == ["ORT", name.split()[1]]]:
      ort = results[ort_name]
      report.add("%s / %s" % (name, ort_name), {
          "short speed-up": (peers.speedup(ort["short"]["p50_ms"], r["short"]["p50_ms"]), "x"),
          "long speed-up": (peers.speedup(ort["long"]["p50_ms"], r["long"]["p50_ms"]), "x"),
          "batch32 speed-up": (peers.speedup(r["batch32"]["per_second"],
                                             ort["batch32"]["per_second"]), "x")})


def measure(python, side, command, arguments, failure="measurement failed", env=None):
  """A side's timings, in a fresh process with oneDNN on (as the README recommends for
  serving) and TensorFlow's C++ logs quiet."""
  return common.run_side(python, side, command, arguments, failure=failure,
                         env=dict({"TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"},
                                  **(env or {})))


def litert_files(folder, export_dir):
  """The float32 export as LiteRT float32 and int8 files (any length, one request per call)
  and, with --mediapipe_python, with MediaPipe's metadata (length max_seq_length):
  ({row precision: path}, {row precision: path}), the second empty without the flag."""
  from bert_tf.export import litert as litert_export
  litert, mediapipe = {}, {}
  for p, quantize in (("float32", "none"), ("int8", "int8")):
    litert[p] = os.path.join(folder, "litert_%s.tflite" % p)
    litert_export.convert(export_dir, litert[p], quantize=quantize)
    if FLAGS.mediapipe_python:
      mediapipe[p] = os.path.join(folder, "mediapipe_%s.tflite" % p)
      result = subprocess.run(
          [sys.executable, os.path.join(REPO, "export_litert.py"), "--export_dir=" + export_dir,
           "--output_file=" + mediapipe[p], "--quantize=" + quantize,
           "--mediapipe_python=" + FLAGS.mediapipe_python], capture_output=True, text=True)
      if result.returncode:
        sys.exit("export_litert.py --mediapipe_python (%s) failed:\n%s" %
                 (p, result.stderr[-3000:]))
  return litert, mediapipe


def litert_results(folder, work_file, export_dir, report):
  """{row name: timings} of the LiteRT and MediaPipe rows; notes on `report` say what they
  ran."""
  litert, mediapipe = litert_files(folder, export_dir)
  results, threads = {}, os.cpu_count()
  text = {"vocab": FLAGS.vocab_file, "lower": FLAGS.do_lower_case,
          "length": FLAGS.max_seq_length}
  for p, path in litert.items():
    for n, suffix in ((threads, ""), (1, " 1-thread")):
      results["litert %s%s" % (p, suffix)] = measure(
          sys.executable, "litert", "classify",
          dict(text, workload_file=work_file, path=path, threads=n),
          failure="LiteRT %s (%d threads) failed" % (p, n))
  for p, path in mediapipe.items():
    results["mediapipe " + p] = measure(
        FLAGS.mediapipe_python, "mediapipe_tasks", "classify",
        {"workload_file": work_file, "path": path},
        failure="MediaPipe %s (--mediapipe_python) failed" % p)
  report.note("litert: %s; the float32 export converted by bert_tf.export.litert (int8: "
              "LiteRT's dynamic-range quantization), batch 1 at each request's length: a batch "
              "of 32 is 32 calls; raw text in through bert_tf's Python FullTokenizer in the "
              "timed call; %d threads, '1-thread' rows LiteRT's default" %
              (results["litert float32"]["version"], threads))
  if mediapipe:
    report.note("mediapipe: %s TextClassifier from raw text (its own BERT tokenizer), export_"
                "litert.py --mediapipe_python files (length fixed to %d), one XNNPACK thread "
                "(MediaPipe's default on desktop; its Python API sets none); a batch of 32 is "
                "32 classify calls" %
                (results["mediapipe float32"]["version"], FLAGS.max_seq_length))
  return results


def peer_results(folder, work_file, config, precisions, report):
  """{row name: timings} of the peers the flags name; notes on `report` say what they ran."""
  results = {}
  text = {"workload_file": work_file, "vocab": FLAGS.vocab_file, "lower": FLAGS.do_lower_case,
          "length": FLAGS.max_seq_length}
  if FLAGS.hf_python:
    for p in precisions:
      results["HF " + p] = measure(
          FLAGS.hf_python, "hf", "classify",
          dict(text, folder=FLAGS.hf_model_dir or "-", threads=os.cpu_count(),
               config=common.hf_config(config), precision=p),
          failure="HF transformers %s (--hf_python) failed" % p, env=peers.hf_env())
    report.note("HF: %s, %s; bfloat16 = torch.autocast(cpu, bfloat16) over float32 weights, "
                "int8 = torch.ao quantize_dynamic(nn.Linear, qint8)" %
                (results["HF " + precisions[0]]["version"], peers.hf_note()))
  if FLAGS.ort_python:
    onnx = peers.export_onnx(FLAGS.ort_python, FLAGS.hf_model_dir, config, "classifier", folder)
    for p in [p for p in precisions if p in onnx]:
      # 1-thread rows too: LiteRT's and MediaPipe's default, and no pool threads spinning.
      for n, suffix in ((os.cpu_count(), ""), (1, " 1-thread")):
        results["ORT " + p + suffix] = measure(
            FLAGS.ort_python, "ort", "classify", dict(text, path=onnx[p], threads=n),
            failure="ONNX Runtime %s (--ort_python) failed" % p)
    report.note(peers.ort_note(onnx, "logits ", os.cpu_count(), precisions) +
                "; '1-thread' rows: 1 intra-op thread")
  return results


def timing_rows(results, report):
  """A row per loader: its p50 / p99 latencies and batch throughput, and bert_tf's speed over
  it at the same precision (the padded row and loader rows: over bert_tf P cut, plain
  loader)."""
  for name, r in results.items():
    precision = name.split()[1]
    ours = results.get("bert_tf " + precision) if name != "bert_tf " + precision else None
    ratio = lambda workload, ours=ours, r=r: peers.speedup(
        r[workload]["p50_ms"], ours[workload]["p50_ms"]) if ours else None
    report.add(name, {
        "short p50": (r["short"]["p50_ms"], "ms"), "short p99": (r["short"]["p99_ms"], "ms"),
        "long p50": (r["long"]["p50_ms"], "ms"), "long p99": (r["long"]["p99_ms"], "ms"),
        "batch32": (r["batch32"]["per_second"], "sentences/s"),
        "x short": (ratio("short"), "x"), "x long": (ratio("long"), "x"),
        "x b32": (peers.speedup(ours["batch32"]["per_second"], r["batch32"]["per_second"])
                  if ours else None, "x")})


def main(_):
  load_start = os.getloadavg()
  precisions, skipped = common.selected_precisions()
  peers.check_flags(FLAGS)
  if FLAGS.mediapipe_python and not FLAGS.do_lower_case:
    sys.exit("--mediapipe_python: MediaPipe's BERT tokenizer always lower-cases; this model is "
             "cased (--nodo_lower_case).")
  if FLAGS.serving_tf_xla_flags:
    check_tf_xla_flags(FLAGS.serving_tf_xla_flags)
  report = common.Results("serving_latency", {
      "max_seq_length": FLAGS.max_seq_length, "weights": FLAGS.init_checkpoint or "random",
      "requests": FLAGS.requests, "batches": FLAGS.batches, "threads": os.cpu_count()})
  with tempfile.TemporaryDirectory() as folder:
    paths, config = make_exports(folder, precisions)
    work_file = os.path.join(folder, "workload.json")
    with open(work_file, "w", encoding="utf-8") as f:
      json.dump(workload(), f)
    results, variants = {}, loader_variants()
    for name, path in paths.items():  # each loader variant right after the plain loader: A/B
      arguments = {"workload_file": work_file, "export": path}
      results[name] = measure(sys.executable, "savedmodel", "classifier", arguments,
                              failure="bert_tf %s failed" % name)
      for suffix, env in variants if not name.endswith("padded") else ():
        results["%s %s" % (name, suffix)] = measure(
            sys.executable, "savedmodel", "classifier", arguments, env=env,
            failure="bert_tf %s %s failed" % (name, suffix))
    results.update(peer_results(folder, work_file, config, precisions, report))
    if FLAGS.litert:
      export_dir = paths.get("bert_tf float32", paths["bert_tf float32 padded"])
      results.update(litert_results(folder, work_file, export_dir, report))
  report.settings.update(layers=config.num_hidden_layers, hidden=config.hidden_size)
  report.note("classifier serving, a fresh process per row; load average %.1f %.1f %.1f at the "
              "start, %.1f %.1f %.1f at the end" % (*load_start, *os.getloadavg()))
  report.note("bert_tf: %s, TF_ENABLE_ONEDNN_OPTS=1; rows cut each request to its length, the "
              "padded row pads to max_seq_length as the original (in a batch, every export's "
              "encoder computes only the real tokens)" %
              results[next(iter(paths))]["version"])
  if skipped:
    report.note(skipped)
  report.note("x columns: bert_tf's speed over the row's at the same precision (the padded row "
              "and loader rows: bert_tf P cut, plain loader), above 1: bert_tf P faster")
  timing_rows(results, report)
  for suffix, env in loader_variants():
    report.note("%s rows: the same exports served with %s" % (
        suffix, " ".join("%s=%r" % kv for kv in env.items())))
    for p in precisions:
      report.add("bert_tf %s %s vs plain loader" % (p, suffix), {"max |dp|": (max_difference(
          results["bert_tf %s %s" % (p, suffix)]["probabilities"],
          results["bert_tf " + p]["probabilities"]), "")})
  answer_checks(results, report)
  ort_ratios(results, report)
  report.report()


if __name__ == "__main__":
  app.run(main)
