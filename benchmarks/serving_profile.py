"""Where the time of one short classifier request goes: tokenizer, model, the signature call.

    python benchmarks/serving_profile.py [--init_checkpoint=HF_FOLDER --bert_config_file=...]
        [--export_dir=EXISTING_EXPORT] [--threads=default,1:1] [--rounds=3]

Exports a single-sentence classifier (dynamic length, as run_classifier exports it;
MiniLM-L6-shaped with random weights unless --init_checkpoint, whose timing is the same),
and beside it a SavedModel holding only the same in-graph tokenizer (a `tokenize`
signature) and an `identity` signature that returns its string input (the floor of any
signature call). Each is timed in fresh processes that import only tensorflow and
tensorflow_text (TF_ENABLE_ONEDNN_OPTS=1, as benchmarks/serving_latency.py), one short
sentence per call:

  request        serving_default via `.signatures[...]` (what serving_latency.py times)
  request (fn)   the same through the restored tf.function attribute
  tokenizer      the text path up to the packed ids (same tokenizer graph)
  model          serve_ids with those ids (the encoder, the head and the id checks)
  empty call     the identity signature: Python's structured call and the runtime's floor
  tf.constant    the Python-side conversion of the request's string

--threads runs every figure under several TensorFlow thread settings
("inter:intra", 0 = TensorFlow's default; set with tf.config.threading in the serving
process, never by the SavedModel). Rounds interleave the settings; the table gives the
median over rounds of each round's p50 (and the spread of those p50s), and the median
process CPU time per call, which another job sharing the CPU inflates less than wall time.
The graph size of each signature (nodes, called functions included) is printed too.
"""

import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bert_tf  # noqa: E402,F401
from absl import app, flags, logging  # noqa: E402

from benchmarks import common  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = flags.FLAGS
common.define_hf_comparison_flags()
flags.DEFINE_string("vocab_file", os.path.join(REPO, "data", "vocab.txt"),
                    "Vocabulary (an HF --init_checkpoint folder's own vocab.txt wins).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the text.")
flags.DEFINE_integer("max_seq_length", 128, "Packed length of the export.")
flags.DEFINE_string("export_dir", None, "Time this existing classifier export instead of "
                    "exporting one (its tokenizer must be --vocab_file/--do_lower_case's).")
flags.DEFINE_string("text", "The quick brown fox jumps over the lazy dog.", "The request.")
flags.DEFINE_list("threads", ["default"], "TensorFlow thread settings to compare: 'default' "
                  "or inter:intra (0 keeps TensorFlow's default for that pool).")
flags.DEFINE_integer("requests", 300, "Timed calls per figure and round.")
flags.DEFINE_integer("rounds", 3, "Fresh processes per thread setting, interleaved.")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too

SERVING_SIDE = r'''
import json, statistics, sys, time
args = json.loads(sys.argv[1])
import tensorflow as tf, tensorflow_text  # noqa: F401  (nothing else: a plain serving process)
if args["inter"]:
  tf.config.threading.set_inter_op_parallelism_threads(args["inter"])
if args["intra"]:
  tf.config.threading.set_intra_op_parallelism_threads(args["intra"])
from tensorflow.core.protobuf import saved_model_pb2

def graph_nodes(folder, signature):
  """Nodes of a signature's function and every function it calls."""
  saved = saved_model_pb2.SavedModel()
  with open(folder + "/saved_model.pb", "rb") as f:
    saved.ParseFromString(f.read())
  graph = saved.meta_graphs[0].graph_def
  library = {fn.signature.name: fn for fn in graph.library.function}
  outputs = {t.name.split(":")[0] for t in saved.meta_graphs[0].signature_def[signature]
             .outputs.values()}
  pending = [a.func.name for n in graph.node if n.name in outputs for a in n.attr.values()
             if a.func.name]
  seen, total = set(), 0
  while pending:
    name = pending.pop()
    if name in seen or name not in library:
      continue
    seen.add(name)
    total += len(library[name].node_def)
    for node in library[name].node_def:
      for attr in node.attr.values():
        pending += [attr.func.name] if attr.func.name else []
        pending += [f.name for f in attr.list.func]
  return total

def timed(call):
  call(); call()  # warm-up (and the runtime's function instantiation)
  wall, cpu = [], []
  for _ in range(args["requests"]):
    start, start_cpu = time.perf_counter(), time.process_time()
    call()
    cpu.append(time.process_time() - start_cpu)
    wall.append(time.perf_counter() - start)
  return {"p50_ms": 1000 * statistics.median(wall), "cpu_ms": 1000 * statistics.median(cpu)}

text = args["text"]
model = tf.saved_model.load(args["export"])
parts = tf.saved_model.load(args["parts"])
request, ids_call = model.signatures["serving_default"], model.signatures["serve_ids"]
tokenize, identity = parts.signatures["tokenize"], parts.signatures["identity"]
ids = tokenize(text_a=tf.constant([text]))
first = sorted(request.structured_outputs)[0]
results = {
    "request": timed(lambda: request(text_a=tf.constant([text]))[first].numpy()),
    "request (fn)": timed(lambda: model.serving_default(tf.constant([text]))[first].numpy()),
    "tokenizer": timed(lambda: tokenize(text_a=tf.constant([text]))["input_word_ids"].numpy()),
    "model": timed(lambda: ids_call(**ids)["logits"].numpy()),
    "empty call": timed(lambda: identity(text_a=tf.constant([text]))["text_a"].numpy()),
    "tf.constant": timed(lambda: tf.constant([text])),
}
nodes = {"request": graph_nodes(args["export"], "serving_default"),
         "model": graph_nodes(args["export"], "serve_ids"),
         "tokenizer": graph_nodes(args["parts"], "tokenize"),
         "empty call": graph_nodes(args["parts"], "identity")}
print(json.dumps({"times": results, "nodes": nodes,
                  "real_length": int(tf.reduce_sum(ids["input_mask"]))}))
'''


def _hf_vocab():
  """An HF --init_checkpoint folder's own vocab.txt, if it has one."""
  folder = FLAGS.init_checkpoint
  if folder and os.path.isfile(os.path.join(folder, "vocab.txt")):
    return os.path.join(folder, "vocab.txt")
  return FLAGS.vocab_file


def export_classifier(folder, vocab_file):
  """The single-sentence classifier, cut to each request's length, as run_classifier exports."""
  from bert_tf import checkpoints
  from bert_tf.tasks import glue
  from bert_tf.tasks.glue.export import export_classifier as export
  model = glue.ClassifierModel(common.comparison_config(), num_labels=2, dynamic_length=True)
  if FLAGS.init_checkpoint:
    checkpoints.load_checkpoint(FLAGS.init_checkpoint, model.encoder, strict=False)
  return export(os.path.join(folder, "classifier"), model, vocab_file, FLAGS.do_lower_case,
                FLAGS.max_seq_length, ["0", "1"], False)


def export_parts(folder, vocab_file):
  """The export's tokenizer alone (`tokenize`) and an `identity` signature."""
  import tensorflow as tf
  from bert_tf import export
  tokenizer = export.make_tokenizer(vocab_file, FLAGS.do_lower_case)
  module = export.ServingModule(tokenizer, [])
  signatures = {
      "tokenize": export.serving_function(
          lambda text_a: tokenizer.encode(text_a, seq_length=FLAGS.max_seq_length),
          [export.text_spec("text_a")]),
      "identity": export.serving_function(lambda text_a: {"text_a": tf.identity(text_a)},
                                          [export.text_spec("text_a")]),
  }
  return export.save_serving_module(os.path.join(folder, "parts"), module, signatures, {})


def parse_threads(setting):
  if setting == "default":
    return 0, 0
  inter, _, intra = setting.partition(":")
  return int(inter), int(intra or 0)


def main(_):
  logging.set_verbosity(logging.WARNING)  # not TensorFlow's notes on saving
  vocab_file = _hf_vocab()
  rows = ("request", "request (fn)", "tokenizer", "model", "empty call", "tf.constant")
  with tempfile.TemporaryDirectory() as folder:
    export_dir = FLAGS.export_dir or export_classifier(folder, vocab_file)
    parts = export_parts(folder, vocab_file)
    runs = {setting: [] for setting in FLAGS.threads}
    for _ in range(FLAGS.rounds):
      for setting in FLAGS.threads:
        inter, intra = parse_threads(setting)
        args = {"export": export_dir, "parts": parts, "text": FLAGS.text, "inter": inter,
                "intra": intra, "requests": FLAGS.requests}
        runs[setting].append(common.run_json_script(
            sys.executable, SERVING_SIDE, json.dumps(args),
            env={"TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}))
  first = runs[FLAGS.threads[0]][0]
  print(common.cpu_info())
  print("one request of %d tokens (%r), %d calls x %d fresh processes per setting; graph nodes "
        "include called functions" % (first["real_length"], FLAGS.text, FLAGS.requests,
                                      FLAGS.rounds))
  for setting, results in runs.items():
    print("\nthreads %s (inter:intra)" % setting)
    print("%-14s %10s %17s %10s %8s" % ("", "p50 ms", "p50 spread ms", "cpu ms", "nodes"))
    for row in rows:
      p50s = [r["times"][row]["p50_ms"] for r in results]
      cpus = [r["times"][row]["cpu_ms"] for r in results]
      print("%-14s %10.2f %8.2f - %-6.2f %10.2f %8s" % (
          row, statistics.median(p50s), min(p50s), max(p50s), statistics.median(cpus),
          first["nodes"].get(row, "")))


if __name__ == "__main__":
  app.run(main)
