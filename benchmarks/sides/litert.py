"""LiteRT (.tflite) files served from this checkout's Python, in fresh processes: from raw text
without TensorFlow (serving_latency.py), and one request at a time beside the SavedModel they
were converted from (precision_accuracy.py).
"""

import json
import sys

from benchmarks import sides, timing


def classify(workload_file, path, threads, vocab, lower, length):
  """timing.serving_workloads of a classifier .tflite from raw text, one request per call as
  the file takes: bert_tf's pure-Python FullTokenizer (the SavedModel's tokenization) in the
  timed call, the softmax in the file; and its probabilities of the timed texts."""
  import ai_edge_litert
  from ai_edge_litert.interpreter import Interpreter
  import numpy as np

  from bert_tf import tokenization  # pure Python: no TensorFlow
  with open(workload_file, encoding="utf-8") as f:
    workload = json.load(f)
  tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=lower)
  run = Interpreter(model_path=path, num_threads=threads).get_signature_runner("serve_ids")

  def one(text):
    tokens = ["[CLS]"] + tokenizer.tokenize(text)[:length - 2] + ["[SEP]"]
    ids = np.array([tokenizer.convert_tokens_to_ids(tokens)], np.int32)
    return run(input_word_ids=ids, input_mask=np.ones_like(ids),
               input_type_ids=np.zeros_like(ids))["probabilities"][0]

  call = lambda texts: [one(text) for text in texts]
  version = "ai_edge_litert %s%s" % (getattr(ai_edge_litert, "__version__", "?"),
                                     ", TensorFlow imported!" if "tensorflow" in sys.modules
                                     else "")
  return dict(timing.serving_workloads(call, workload),
              probabilities=timing.answers(call, workload), version=version)


def requests(requests_file, export_dir, files, names):
  """latency_stats of one request at a time (each test document cut to its length), one
  thread for TensorFlow and for LiteRT, the models `names` in turn on each request (load on a
  shared host falls on all of them alike): the SavedModel's serve_ids ("savedmodel float32")
  and the .tflite `files` ({row name: path})."""
  from ai_edge_litert.interpreter import Interpreter
  import numpy as np
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (nothing of bert_tf: a plain serving process)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  tf.config.threading.set_intra_op_parallelism_threads(1)
  data = np.load(requests_file)
  documents = [{name: data[name][i:i + 1, :int(data["input_mask"][i].sum())]
                for name in ("input_word_ids", "input_mask", "input_type_ids")}
               for i in range(len(data["input_mask"]))]
  serve = tf.saved_model.load(export_dir).signatures["serve_ids"]
  calls = {"savedmodel float32": lambda r: tf.nn.softmax(
      serve(**{k: tf.constant(v) for k, v in r.items()})["logits"], axis=-1).numpy()}
  for name, path in files.items():
    runner = Interpreter(model_path=path, num_threads=1).get_signature_runner("serve_ids")
    calls[name] = lambda r, runner=runner: runner(**r)["probabilities"]
  seconds = timing.interleaved_seconds({name: calls[name] for name in names}, documents)
  result = {name: timing.latency_stats(seconds[name], 1) for name in names}
  result["lengths"] = sorted(len(d["input_mask"][0]) for d in documents)
  return result


if __name__ == "__main__":
  sides.main({"classify": classify, "requests": requests})
