"""bert_tf's SavedModels served as a deployment serves them: in a fresh process that imports
tensorflow and tensorflow_text and nothing of bert_tf (each command checks that).
"""

import json
import sys

from benchmarks import sides, timing


def _tensorflow():
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (registers the text ops of the exports)
  if any(name.split(".")[0] == "bert_tf" for name in sys.modules):
    raise RuntimeError("bert_tf was imported in the serving process")
  return tf


def _workload(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def classifier(workload_file, export):
  """timing.serving_workloads of a classifier export's serving_default from raw text, and its
  probabilities of the timed texts (to check that a loader's settings move no number)."""
  tf = _tensorflow()
  workload = _workload(workload_file)
  serve = tf.saved_model.load(export).signatures["serving_default"]
  call = lambda texts: serve(text_a=tf.constant(texts))["probabilities"].numpy()
  return dict(timing.serving_workloads(call, workload), probabilities=timing.answers(
      call, workload), version="tensorflow " + tf.__version__)


def embedder(workload_file, export):
  """latency_stats of a text-embedder export called as `model(tf.constant(texts))`: single
  sentences, then batches of 32."""
  tf = _tensorflow()
  workload = _workload(workload_file)
  model = tf.saved_model.load(export)
  call = lambda texts: model(tf.constant(texts)).numpy()
  batches = workload["batches"]
  return {"single": timing.latency_stats(
              timing.call_seconds(call, [[t] for t in workload["single"]]), 1),
          "batch32": timing.latency_stats(timing.call_seconds(call, batches), len(batches[0])),
          "version": "tensorflow " + tf.__version__}


def graph_nodes(folder, signature):
  """Nodes of a signature's function and of every function it calls, in a SavedModel."""
  from tensorflow.core.protobuf import saved_model_pb2
  saved = saved_model_pb2.SavedModel()
  with open(folder + "/saved_model.pb", "rb") as f:
    saved.ParseFromString(f.read())
  graph = saved.meta_graphs[0].graph_def
  library = {fn.signature.name: fn for fn in graph.library.function}
  outputs = {t.name.split(":")[0]
             for t in saved.meta_graphs[0].signature_def[signature].outputs.values()}
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


def profile(export, parts, text, inter, intra, requests):
  """Median wall and process CPU milliseconds of one short request, through each part of the
  serving path (serving_profile.py's rows), under the given thread pools (0: TensorFlow's)."""
  tf = _tensorflow()
  if inter:
    tf.config.threading.set_inter_op_parallelism_threads(inter)
  if intra:
    tf.config.threading.set_intra_op_parallelism_threads(intra)
  timed = lambda call: timing.wall_and_cpu_ms(call, requests)

  model, helpers = tf.saved_model.load(export), tf.saved_model.load(parts)
  request, ids_call = model.signatures["serving_default"], model.signatures["serve_ids"]
  tokenize, identity = helpers.signatures["tokenize"], helpers.signatures["identity"]
  ids = tokenize(text_a=tf.constant([text]))
  first = sorted(request.structured_outputs)[0]
  times = {
      "request": timed(lambda: request(text_a=tf.constant([text]))[first].numpy()),
      "request (fn)": timed(lambda: model.serving_default(tf.constant([text]))[first].numpy()),
      "tokenizer": timed(lambda: tokenize(text_a=tf.constant([text]))["input_word_ids"].numpy()),
      "model": timed(lambda: ids_call(**ids)["logits"].numpy()),
      "empty call": timed(lambda: identity(text_a=tf.constant([text]))["text_a"].numpy()),
      "tf.constant": timed(lambda: tf.constant([text])),
  }
  nodes = {"request": graph_nodes(export, "serving_default"),
           "model": graph_nodes(export, "serve_ids"),
           "tokenizer": graph_nodes(parts, "tokenize"),
           "empty call": graph_nodes(parts, "identity")}
  return {"times": times, "nodes": nodes, "real_length": int(tf.reduce_sum(ids["input_mask"]))}


if __name__ == "__main__":
  sides.main({"classifier": classifier, "embedder": embedder, "profile": profile})
