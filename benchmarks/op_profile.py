"""Where an encoder forward pass spends its time, by TensorFlow op type: matmuls against the rest.

    python -m benchmarks.op_profile [--precisions=float32,bfloat16] [--batch_size=8]
        [--seq_length=128] [--bert_config_file=bert_config.json | --num_layers=6] [--top=12]

Builds the encoder (MiniLM-L6's shape unless --bert_config_file, random weights) as
bert_tf.utils.precision builds it for each of --precisions (float32, bfloat16; not int8, whose
weights Keras quantizes eagerly), runs the forward pass in graph mode (as the exports run)
through a TF1 session with full tracing, and prints per op type the summed kernel time
per pass (median of --iterations traced passes, after a warm-up), then the split into
matmul kernels (MatMul, BatchMatMul and their oneDNN forms) and all other ops. The other
ops (casts, LayerNorm's reductions, softmax, transposes, elementwise work not fused into a
matmul) are memory-bound passes: where a CPU's matmuls are fast (bfloat16 on AMX), they
decide the speed, so this is the table to read on such a machine.
Summed kernel times exceed the wall time when ops run in parallel. Prints figures only
(common.Results).
"""

import collections
import os

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import app, flags
import numpy as np
import tensorflow as tf

from benchmarks import common, timing
from bert_tf.config import BertConfig
from bert_tf.modeling import BertModel
from bert_tf.utils import precision

FLAGS = flags.FLAGS
common.define_workload_flags(8, "Sequences per forward pass.", 3, "Traced forward passes.",
                             dtype_flag=False)
common.define_precisions_flag()
flags.DEFINE_string("bert_config_file", None, "The encoder's shape (e.g. BERT-Base's "
                    "bert_config.json). Default: MiniLM-L6's with --num_layers layers.")
flags.DEFINE_integer("top", 12, "Op types listed per precision.")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too
FLAGS.set_default("num_layers", 6)


def is_matmul(op_type):
  return "MatMul" in op_type


def op_times(config, name):
  """{op type: median summed microseconds per pass}, and the median wall ms of a pass."""
  graph = tf.Graph()
  with graph.as_default():
    names = ("input_word_ids", "input_mask", "input_type_ids")
    feeds = {n: tf.compat.v1.placeholder(tf.int32, [None, None], name=n) for n in names}
    # Built as extract_features builds it (random weights: the time does not depend on them).
    encoder = BertModel(config, dtype=precision.keras_policy(name))
    encoder(feeds, training=False)
    precision.finish(encoder, name)
    output = encoder(feeds, training=False)["sequence_output"]
    session = tf.compat.v1.Session(graph=graph)
    session.run(tf.compat.v1.global_variables_initializer())
  rng = np.random.default_rng(0)
  shape = (FLAGS.batch_size, FLAGS.seq_length)
  feed = {feeds["input_word_ids"]: rng.integers(1000, 20000, shape),
          feeds["input_mask"]: np.ones(shape), feeds["input_type_ids"]: np.zeros(shape)}
  for _ in range(2):
    session.run(output, feed)
  walls, passes = [], []
  options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
  for _ in range(FLAGS.iterations):
    walls.append(timing.timed(lambda: session.run(output, feed))[1])
    metadata = tf.compat.v1.RunMetadata()
    session.run(output, feed, options=options, run_metadata=metadata)
    totals = collections.Counter()
    for device in metadata.step_stats.dev_stats:
      for node in device.node_stats:
        if " = " in node.timeline_label:  # "name = OpType(inputs)"
          totals[node.timeline_label.split(" = ")[1].split("(")[0]] += node.all_end_rel_micros
    passes.append(totals)
  kinds = set().union(*passes)
  return ({k: float(np.median([p[k] for p in passes])) for k in kinds},
          1000 * float(np.median(walls)))


def main(_):
  precisions, skipped = common.selected_precisions()
  if FLAGS.bert_config_file:
    config = BertConfig.from_json_file(FLAGS.bert_config_file)
  else:
    config = BertConfig(**dict(common.MINILM_L6, num_hidden_layers=FLAGS.num_layers))
  results = common.Results("op_profile", {
      "layers": config.num_hidden_layers, "hidden": config.hidden_size,
      "heads": config.num_attention_heads, "intermediate": config.intermediate_size,
      "batch_size": FLAGS.batch_size, "seq_length": FLAGS.seq_length, "mode": "graph",
      "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset"),
      "iterations": FLAGS.iterations})
  if skipped:
    results.note(skipped)
  if "int8" in precisions:  # Keras quantizes the weights with numpy, which a TF1 graph lacks
    results.note("int8: skipped: its weights are quantized eagerly, this profile traces a TF1 "
                 "graph")
    precisions = [p for p in precisions if p != "int8"]
  results.note("kernel times summed per pass over a pass's ops (median of the traced passes); "
               "matmuls: MatMul, BatchMatMul and their oneDNN forms; then the --top=%d op "
               "types of each precision" % FLAGS.top)
  op_rows = []
  for name in precisions:
    times, wall = op_times(config, name)
    total = sum(times.values())
    matmul = sum(t for k, t in times.items() if is_matmul(k))
    results.add(name, {"wall": (wall, "ms/pass"), "kernels": (total / 1000, "ms/pass"),
                       "matmuls": (matmul / 1000, "ms/pass"),
                       "matmul share": (100 * matmul / total, "%"),
                       "other ops": ((total - matmul) / 1000, "ms/pass")})
    for kind, t in sorted(times.items(), key=lambda kv: -kv[1])[:FLAGS.top]:
      op_rows.append(("%s %s" % (name, kind), t, total))
  for row, t, total in op_rows:
    results.add(row, {"kernel time": (t / 1000, "ms/pass"), "share": (100 * t / total, "%")})
  results.report()


if __name__ == "__main__":
  app.run(main)
