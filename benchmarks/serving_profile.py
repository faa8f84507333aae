"""Where the time of one short classifier request goes: tokenizer, model, the signature call.

    python -m benchmarks.serving_profile [--init_checkpoint=HF_FOLDER --bert_config_file=...]
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
The graph size of each signature (nodes, called functions included) is printed too. The
serving processes run benchmarks/sides/savedmodel.py. Prints figures only (common.Results).
"""

import os
import statistics
import sys
import tempfile

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import app, flags, logging

from benchmarks import common

REPO = common.ROOT
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
  """(inter, intra) threads of a --threads setting; 0 keeps TensorFlow's default."""
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
        runs[setting].append(common.run_side(
            sys.executable, "savedmodel", "profile",
            {"export": export_dir, "parts": parts, "text": FLAGS.text, "inter": inter,
             "intra": intra, "requests": FLAGS.requests},
            env={"TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}))
  first = runs[FLAGS.threads[0]][0]
  report = common.Results("serving_profile", {
      "export": FLAGS.export_dir or "new", "text": FLAGS.text,
      "real_length": first["real_length"], "requests": FLAGS.requests,
      "rounds": FLAGS.rounds})
  report.note("one request a call, in fresh processes (TF_ENABLE_ONEDNN_OPTS=1); p50: median "
              "over rounds of each round's p50, spread: their lowest and highest; cpu: median "
              "process CPU time a call; nodes: of the signature's graph, called functions "
              "included")
  for setting, results in runs.items():
    for row in rows:
      p50s = [r["times"][row]["p50_ms"] for r in results]
      report.add(row, {"p50": (statistics.median(p50s), "ms"), "p50 low": (min(p50s), "ms"),
                       "p50 high": (max(p50s), "ms"),
                       "cpu": (statistics.median(r["times"][row]["cpu_ms"] for r in results),
                               "ms/call"),
                       "nodes": (first["nodes"].get(row), "")},
                 {"threads (inter:intra)": setting})
  report.report()


if __name__ == "__main__":
  app.run(main)
