"""Encoder forward throughput at each inference precision, against the matmul peak and the peers.

    python benchmarks/encoder_throughput.py [--precisions=float32,int8 --batch_size 32 ...]
        [--init_checkpoint=HF_FOLDER --hf_model_dir=HF_FOLDER]
        [--hf_python=/path/to/venv/bin/python] [--ort_python=/path/to/venv/bin/python]

Builds the encoder (BERT-Base with random weights by default, or the shape and weights of
--bert_config_file / --init_checkpoint), makes it compute in each of --precisions with
bert_tf.precision.for_inference and times the inference forward pass on a fixed batch of
--batch_size x --seq_length tokens (all real). It measures the matmul peak of float32 (and
of bfloat16 when timed) with large square matmuls in the same process, and prints sequences/s,
achieved GFLOP/s and the ratio to the peak of the row's type (int8 rows: to float32's).
The peers run the same fixed-shape forward in their own interpreters (benchmarks/peers.py):
Hugging Face transformers' BertModel on PyTorch (--hf_python) and its torch.onnx export in
ONNX Runtime (--ort_python), each precision in a fresh process, with bert_tf's speed over
theirs. bert_tf runs each precision as its inference paths do (XLA or the graph executor, as
bert_tf.precision.prefers_xla says; --jit_compile / --nojit_compile force one), and each row
says which. All are best-of-N timings after a warm-up (the peak itself varies by about 10%
between runs on a shared 2-core machine). Prints figures only.
"""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # noqa: E402

import bert_tf  # noqa: E402,F401  (TensorFlow environment defaults)
from absl import app, flags  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import common, peers  # noqa: E402
from benchmarks.common import best_seconds, forward_flops, matmul_peak_gflops  # noqa: E402
from bert_tf.config import BertConfig  # noqa: E402

FLAGS = flags.FLAGS
common.define_workload_flags(32, "Sequences per forward pass.", 5, "Timed forward passes.",
                             dtype_flag=False)
common.define_hf_comparison_flags(peers=True, default_shape="BERT-Base shape of the flags below")
common.define_precisions_flag()
flags.DEFINE_integer("hidden_size", 768, "Hidden size (BERT-Base: 768).")
flags.DEFINE_integer("num_heads", 12, "Attention heads (BERT-Base: 12).")
flags.DEFINE_integer("intermediate_size", 3072, "Feed-forward size (BERT-Base: 3072).")
flags.DEFINE_integer("matmul_size", 4096, "Side of the square matrices used to measure the peak.")
common.define_jit_compile_flag(
    "forward pass", "per precision, what bert_tf's inference paths run it in "
    "(bert_tf.precision.prefers_xla: XLA for int8, the graph executor's oneDNN kernels for "
    "float32 and bfloat16)")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too

# The fixed batch of every side: ids drawn with numpy's default_rng(0), all positions real.
INPUTS_SOURCE = r'''
import numpy as np

def fixed_inputs(batch, seq, vocab_size):
  ids = np.random.default_rng(0).integers(1000, min(30000, vocab_size), (batch, seq))
  return ids, np.ones((batch, seq), ids.dtype), np.zeros((batch, seq), ids.dtype)
'''
_namespace = {}
exec(INPUTS_SOURCE, _namespace)  # pylint: disable=exec-used  (the text above, run here)
fixed_inputs = _namespace["fixed_inputs"]

# Peer argv after the script: model (HF folder or "-" / ONNX file), batch, seq, vocab size,
# iterations, threads (and for HF: config JSON, precision).
HF_SIDE = common.BEST_SECONDS_SOURCE + INPUTS_SOURCE + peers.MODEL_SOURCE + r'''
import sys
folder, batch, seq, vocab, iterations, threads, config_json, precision = sys.argv[1:9]
torch.set_num_threads(int(threads))
model, context = hf_precision(load_model(folder, config_json, "encoder"), precision)
ids, mask, types = (torch.tensor(a) for a in fixed_inputs(int(batch), int(seq), int(vocab)))

def forward():
  with torch.inference_mode(), context():
    return model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

print(json.dumps({"seconds": best_seconds(forward, int(iterations)), "version": versions()}))
'''

ORT_SIDE = common.BEST_SECONDS_SOURCE + INPUTS_SOURCE + peers.ORT_SESSION_SOURCE + r'''
import json, sys
path, batch, seq, vocab, iterations, threads = sys.argv[1:7]
session = ort_session(path, int(threads))
feed = dict(zip(("input_ids", "attention_mask", "token_type_ids"),
                (a.astype(np.int64) for a in fixed_inputs(int(batch), int(seq), int(vocab)))))
print(json.dumps({"seconds": best_seconds(lambda: session.run(None, feed), int(iterations))}))
'''


def bert_tf_seconds(config, precisions):
  """{precision: (best seconds of bert_tf's forward pass on the fixed batch, under XLA)}."""
  from bert_tf import checkpoints, precision
  from bert_tf.modeling import BertModel
  ids, mask, types = fixed_inputs(FLAGS.batch_size, FLAGS.seq_length, config.vocab_size)
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
    seconds[p] = best_seconds(lambda f=forward: f(inputs).numpy(), FLAGS.iterations), jit
  return seconds


def peer_seconds(config, precisions):
  """{row name: best seconds} of the peers the flags name, and lines saying what they ran."""
  results, notes = {}, []
  shape = [str(n) for n in (FLAGS.batch_size, FLAGS.seq_length, config.vocab_size,
                            FLAGS.iterations, os.cpu_count())]
  if FLAGS.hf_python:
    for p in precisions:
      out = common.run_json_script(FLAGS.hf_python, HF_SIDE, FLAGS.hf_model_dir or "-", *shape,
                                   json.dumps(common.hf_config(config)), p,
                                   failure="HF transformers %s (--hf_python) failed" % p,
                                   env=peers.hf_env())
      results["HF " + p] = out["seconds"]
    notes.append("HF: %s, BertModel, %d threads, %s; bfloat16 = torch.autocast(cpu, bfloat16) over "
                 "float32 weights, int8 = torch.ao quantize_dynamic(nn.Linear, qint8)" %
                 (out["version"], os.cpu_count(), peers.hf_note()))
  if FLAGS.ort_python:
    with tempfile.TemporaryDirectory() as folder:
      onnx = peers.export_onnx(FLAGS.ort_python, FLAGS.hf_model_dir, config, "encoder", folder)
      for p in [p for p in precisions if p in onnx]:
        out = common.run_json_script(FLAGS.ort_python, ORT_SIDE, onnx[p], *shape,
                                     failure="ONNX Runtime %s (--ort_python) failed" % p)
        results["ORT " + p] = out["seconds"]
    notes.append(peers.ort_note(onnx, "", os.cpu_count(), precisions))
  return results, notes


def main(_):
  print("CPU: %s" % common.cpu_info())
  precisions, skipped = common.selected_precisions()
  peers.check_flags(FLAGS)
  default = BertConfig(vocab_size=30522, hidden_size=FLAGS.hidden_size,
                       num_hidden_layers=FLAGS.num_layers, num_attention_heads=FLAGS.num_heads,
                       intermediate_size=FLAGS.intermediate_size)
  config = common.comparison_config(default)
  common.check_hf_model_shape(config)
  peaks = {d: matmul_peak_gflops(FLAGS.matmul_size, dtype=d)
           for d in ("float32", "bfloat16") if d == "float32" or d in precisions}
  for dtype, peak in peaks.items():
    print("matmul peak (%dx%d %s): %.1f GFLOP/s" % (FLAGS.matmul_size, FLAGS.matmul_size,
                                                    dtype, peak))
  timed = bert_tf_seconds(config, precisions)
  seconds = {"bert_tf " + p: s for p, (s, _) in timed.items()}
  modes = {"bert_tf " + p: common.mode_name(jit) for p, (_, jit) in timed.items()}
  others, notes = peer_seconds(config, precisions)
  seconds.update(others)
  flops = forward_flops(config, FLAGS.batch_size, FLAGS.seq_length)
  print("encoder: L=%d H=%d A=%d I=%d, batch %d x seq %d (all real tokens), weights %s, "
        "%.1f GFLOP per sequence" %
        (config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
         config.intermediate_size, FLAGS.batch_size, FLAGS.seq_length,
         FLAGS.init_checkpoint or "random", flops / FLAGS.batch_size / 1e9))
  print("bert_tf: tensorflow %s, TF_ENABLE_ONEDNN_OPTS=%s, %d threads; mode: %s" %
        (tf.__version__, os.environ.get("TF_ENABLE_ONEDNN_OPTS"), os.cpu_count(),
         "each precision's product path (bert_tf.precision.prefers_xla)"
         if FLAGS.jit_compile is None else "forced by --%sjit_compile"
         % ("" if FLAGS.jit_compile else "no")))
  for line in notes + ([skipped] if skipped else []):
    print(line)
  print("best of %d forward passes; %% of peak: of the row type's matmul peak (int8: of "
        "float32's); x: bert_tf's speed over the row's at the same precision" % FLAGS.iterations)
  print("%-18s %6s %12s %12s %10s %10s %8s" % ("", "mode", "s / batch", "sequences/s",
                                                "GFLOP/s", "% of peak", "x"))
  for name, s in seconds.items():
    precision = name.split()[-1]
    ours = seconds["bert_tf " + precision]
    achieved = flops / s / 1e9
    peak = peaks.get(precision, peaks["float32"])
    print("%-18s %6s %12.3f %12.2f %10.1f %9.1f%% %8s" % (
        name, modes.get(name, ""), s, FLAGS.batch_size / s, achieved, 100 * achieved / peak,
        "" if name.startswith("bert_tf") else peers.speedup(s, ours)))


if __name__ == "__main__":
  app.run(main)
