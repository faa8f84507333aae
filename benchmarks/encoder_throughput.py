"""Encoder forward throughput at each inference precision, against the matmul peak and the peers.

    python -m benchmarks.encoder_throughput [--precisions=float32,int8 --batch_size 32 ...]
        [--init_checkpoint=HF_FOLDER --hf_model_dir=HF_FOLDER]
        [--hf_python=/path/to/venv/bin/python] [--ort_python=/path/to/venv/bin/python]

Builds the encoder (BERT-Base with random weights by default, or the shape and weights of
--bert_config_file / --init_checkpoint), makes it compute in each of --precisions with
bert_tf.utils.precision.for_inference and times the inference forward pass on a fixed batch of
--batch_size x --seq_length tokens (all real). It measures the matmul peak of float32 (and
of bfloat16 when timed) with large square matmuls in the same process, and prints sequences/s,
achieved GFLOP/s and the ratio to the peak of the row's type (int8 rows: to float32's).
The peers run the same fixed-shape forward in their own interpreters (benchmarks/peers.py):
Hugging Face transformers' BertModel on PyTorch (--hf_python) and its torch.onnx export in
ONNX Runtime (--ort_python), each precision in a fresh process, with bert_tf's speed over
theirs. bert_tf runs each precision as its inference paths do (XLA or the graph executor, as
bert_tf.utils.precision.prefers_xla says; --jit_compile / --nojit_compile force one), and each row
says which. All are best-of-N timings after a warm-up (the peak itself varies between runs on a
shared machine, hence its measurement in the same run). Prints figures only (common.Results).
"""

import os
import tempfile

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import app, flags
import tensorflow as tf

from benchmarks import common, peers, timing
from bert_tf.config import BertConfig

FLAGS = flags.FLAGS
common.define_workload_flags(32, "Sequences per forward pass.", 5, "Timed forward passes.",
                             dtype_flag=False)
common.define_hf_comparison_flags(peers=True, default_shape="BERT-Base shape of the flags below")
common.define_precisions_flag()
flags.DEFINE_integer("hidden_size", 768, "Hidden size (BERT-Base: 768).")
flags.DEFINE_integer("num_heads", 12, "Attention heads (BERT-Base: 12).")
flags.DEFINE_integer("intermediate_size", 3072, "Feed-forward size (BERT-Base: 3072).")
common.define_jit_compile_flag(
    "forward pass", "per precision, what bert_tf's inference paths run it in "
    "(bert_tf.utils.precision.prefers_xla: XLA for int8, the graph executor's oneDNN kernels for "
    "float32 and bfloat16)")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too


def bert_tf_seconds(config, precisions):
  """{precision: (best seconds of bert_tf's forward pass on the fixed batch, whether XLA)}."""
  from bert_tf import checkpoints
  from bert_tf.modeling import BertModel
  from bert_tf.utils import precision
  ids, mask, types = timing.fixed_inputs(FLAGS.batch_size, FLAGS.seq_length, config.vocab_size)
  inputs = {"input_word_ids": tf.constant(ids, tf.int32), "input_mask": tf.constant(mask, tf.int32),
            "input_type_ids": tf.constant(types, tf.int32)}
  model = BertModel(config)
  model(inputs, training=False)
  if FLAGS.init_checkpoint:
    checkpoints.load_checkpoint(FLAGS.init_checkpoint, model, strict=False)
  seconds = {}
  for p in precisions:
    encoder = precision.for_inference(model, p)
    jit = common.jit_compile(precision.prefers_xla(p))
    forward = tf.function(lambda x, m=encoder: m(x, training=False)["sequence_output"],
                          jit_compile=jit)
    seconds[p] = timing.best_seconds(lambda f=forward: f(inputs).numpy(), FLAGS.iterations), jit
  return seconds


def peer_seconds(config, precisions, results):
  """{row name: best seconds} of the peers the flags name; notes on `results` say what they
  ran."""
  seconds = {}
  shape = {"batch": FLAGS.batch_size, "seq": FLAGS.seq_length, "vocab": config.vocab_size,
           "iterations": FLAGS.iterations, "threads": os.cpu_count()}
  if FLAGS.hf_python:
    for p in precisions:
      out = common.run_side(FLAGS.hf_python, "hf", "encoder",
                            dict(shape, folder=FLAGS.hf_model_dir or "-",
                                 config=common.hf_config(config), precision=p),
                            failure="HF transformers %s (--hf_python) failed" % p,
                            env=peers.hf_env())
      seconds["HF " + p] = out["seconds"]
    results.note("HF: %s, BertModel, %d threads, %s; bfloat16 = torch.autocast(cpu, bfloat16) "
                 "over float32 weights, int8 = torch.ao quantize_dynamic(nn.Linear, qint8)" %
                 (out["version"], os.cpu_count(), peers.hf_note()))
  if FLAGS.ort_python:
    with tempfile.TemporaryDirectory() as folder:
      onnx = peers.export_onnx(FLAGS.ort_python, FLAGS.hf_model_dir, config, "encoder", folder)
      for p in [p for p in precisions if p in onnx]:
        seconds["ORT " + p] = common.run_side(
            FLAGS.ort_python, "ort", "encoder", dict(shape, path=onnx[p]),
            failure="ONNX Runtime %s (--ort_python) failed" % p)["seconds"]
    results.note(peers.ort_note(onnx, "", os.cpu_count(), precisions))
  return seconds


def main(_):
  precisions, skipped = common.selected_precisions()
  peers.check_flags(FLAGS)
  default = BertConfig(vocab_size=30522, hidden_size=FLAGS.hidden_size,
                       num_hidden_layers=FLAGS.num_layers, num_attention_heads=FLAGS.num_heads,
                       intermediate_size=FLAGS.intermediate_size)
  config = common.comparison_config(default)
  common.check_hf_model_shape(config)
  flops = common.forward_flops(config, FLAGS.batch_size, FLAGS.seq_length)
  results = common.Results("encoder_throughput", {
      "layers": config.num_hidden_layers, "hidden": config.hidden_size,
      "heads": config.num_attention_heads, "intermediate": config.intermediate_size,
      "batch_size": FLAGS.batch_size, "seq_length": FLAGS.seq_length,
      "weights": FLAGS.init_checkpoint or "random", "iterations": FLAGS.iterations})
  peaks = {d: common.matmul_peak_gflops(FLAGS.matmul_size, dtype=d)
           for d in ("float32", "bfloat16") if d == "float32" or d in precisions}
  for dtype, peak in peaks.items():
    results.add("matmul peak %s" % dtype, {"peak": (peak, "GFLOP/s")},
                {"matmul": "%dx%d" % (FLAGS.matmul_size, FLAGS.matmul_size)})
  timed = bert_tf_seconds(config, precisions)
  seconds = {"bert_tf " + p: s for p, (s, _) in timed.items()}
  modes = {"bert_tf " + p: common.mode_name(jit) for p, (_, jit) in timed.items()}
  results.note("bert_tf: tensorflow %s, TF_ENABLE_ONEDNN_OPTS=%s, %d threads; mode: %s" %
               (tf.__version__, os.environ.get("TF_ENABLE_ONEDNN_OPTS"), os.cpu_count(),
                "each precision's product path (bert_tf.utils.precision.prefers_xla)"
                if FLAGS.jit_compile is None else "forced by --%sjit_compile"
                % ("" if FLAGS.jit_compile else "no")))
  seconds.update(peer_seconds(config, precisions, results))
  if skipped:
    results.note(skipped)
  results.note("encoder forward pass on a fixed batch (all real tokens), %.3g GFLOP per "
               "sequence, best of %d passes; %% of peak: of the row type's matmul peak (int8: "
               "of float32's); bert_tf speed-up: bert_tf's speed over the row's at the same "
               "precision" % (flops / FLAGS.batch_size / 1e9, FLAGS.iterations))
  for name, s in seconds.items():
    precision = name.split()[-1]
    achieved = flops / s / 1e9
    peak = peaks.get(precision, peaks["float32"])
    ours = None if name.startswith("bert_tf") else seconds["bert_tf " + precision]
    results.add(name, {"time": (s, "s/batch"), "throughput": (FLAGS.batch_size / s, "sequences/s"),
                       "achieved": (achieved, "GFLOP/s"), "of peak": (100 * achieved / peak, "%"),
                       "bert_tf speed-up": (peers.speedup(s, ours), "x")},
                {"mode": modes[name]} if name in modes else None)
  results.report()


if __name__ == "__main__":
  app.run(main)
