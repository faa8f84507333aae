"""run_classifier's --long_document on Reuters topics: truncate against windows, by training
rule, on the settings of docs/runners.md ("Documents longer than --max_seq_length"), and long
requests to a windows export.

    python -m benchmarks.long_documents --reuters_train=reuters21578_modapte_train.tsv \\
        --reuters_test=reuters21578_modapte_test.tsv --model_dir=/path/to/all-MiniLM-L6-v2 \\
        --output_dir=/tmp/long_documents [--settings=grain,grain_balanced,corn,multi] \\
        [--rules=truncate,first,document,window] [--max_seq_length=64] [--seed=N] [--reuse]

Every run is a `run_classifier.py --train_file=... --eval_file=... --predict_file=...` on JSONL
files written from the ModApte TSVs (the topic's name or `other`, `--labels=other,<topic>` so
that `any` pooling reads "other" as the no; multi-label: the list of topics present). Settings:
  grain           the natural training set (1,554 articles, 103 grain), 4 epochs of 32;
  grain_balanced  every grain article of the training set and as many others drawn with the
                  seed (206), 1 epoch of 16;
  corn            the natural training set (45 corn), 4 epochs of 32;
  multi           one multi-label model of grain and corn, 4 epochs of 32.
Rules: `truncate` (the original), `first`, `document` and `window` (`--long_document=windows
--window_training=...`, the default pooling unless --pooling). Every rule of a setting makes
the same number of passes over the documents (epochs), so `window` takes more steps. Scored on
the 604 test articles: accuracy and the topic's F1 from predictions.jsonl at the run's
threshold. Then --poolings re-predict each windows model pooled otherwise (rows "..., pooled P"),
and the first setting's `document` model is exported and timed on --request_words long
requests, each answer checked against the runner's. --reuse reads complete runs again.
"""

import json
import os
import random
import subprocess
import sys

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import flags
import numpy as np

from benchmarks import common, reuters, timing
from bert_tf.utils import cli

FLAGS = flags.FLAGS
# setting -> (topics, balanced, epochs, batch)
SETTINGS = {"grain": (("grain",), False, 4.0, 32), "grain_balanced": (("grain",), True, 1.0, 16),
            "corn": (("corn",), False, 4.0, 32), "multi": (reuters.TOPICS, False, 4.0, 32)}
RULES = ("truncate", "first", "document", "window")
reuters.define_data_flags()
flags.DEFINE_string("model_dir", None, "The model to fine-tune: a Google release or an HF BERT "
                    "folder (vocab.txt and bert_config.json or config.json).")
flags.DEFINE_string("output_dir", None, "Where the data, the runs and the export go.")
flags.DEFINE_list("settings", list(SETTINGS), "Of %s." % ", ".join(SETTINGS))
flags.DEFINE_list("rules", list(RULES), "Of %s." % ", ".join(RULES))
flags.DEFINE_integer("max_seq_length", 64, "Pieces per window (and per truncated article).")
flags.DEFINE_float("learning_rate", 5e-5, "Learning rate of every run.")
flags.DEFINE_string("pooling", None, "--window_pooling of the windows runs (default: "
                    "run_classifier's).")
flags.DEFINE_list("poolings", [], "Also re-predict each windows model with these poolings.")
flags.DEFINE_integer("seed", None, "--shuffle_seed of every run (default: run_classifier's); "
                     "also draws grain_balanced's others (default 0).")
flags.DEFINE_list("request_words", ["500", "2000", "5000"], "Words per timed request (none: "
                  "no export).")
flags.DEFINE_integer("repeats", 3, "Timed calls per request (the median is reported).")
flags.DEFINE_bool("reuse", False, "Read runs already complete in --output_dir.")


def write_data(folder, train, test):
  """Each setting's {train,test}.jsonl under folder/<setting>; returns {setting: gold test
  labels {topic: [bool]}}."""
  rng = random.Random(FLAGS.seed or 0)
  positives = [row for row in train if row[1]["grain"]]
  others = [row for row in train if not row[1]["grain"]]
  balanced = positives + rng.sample(others, len(positives))
  rng.shuffle(balanced)
  gold = {}
  for setting in FLAGS.settings:
    topics, is_balanced, _, _ = SETTINGS[setting]
    os.makedirs(os.path.join(folder, setting), exist_ok=True)
    for split, rows in (("train", balanced if is_balanced else train), ("test", test)):
      if len(topics) > 1:
        lines = [{"text": text, "labels": [t for t in topics if marks[t]]} for text, marks in rows]
      else:
        lines = [{"text": text, "label": topics[0] if marks[topics[0]] else "other"}
                 for text, marks in rows]
      reuters.write_jsonl(os.path.join(folder, setting, split + ".jsonl"), lines)
    gold[setting] = {t: [marks[t] for _, marks in test] for t in topics}
  return gold


def run_classifier(args, log):
  """Runs run_classifier.py with its log in `log`; stops the benchmark on a failure."""
  with open(log, "w", encoding="utf-8") as f:
    f.write(" ".join(args) + "\n")
    f.flush()
    command = [sys.executable, os.path.join(common.ROOT, "run_classifier.py")] + args
    if subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, cwd=common.ROOT).returncode:
      sys.exit("run_classifier failed: see %s" % log)


def predicted(path, topics):
  """{topic: [predicted bool]} from a predictions.jsonl."""
  with open(path, encoding="utf-8") as f:
    rows = [json.loads(line) for line in f if line.strip()]
  if len(topics) > 1:
    return {t: [t in row["labels"] for row in rows] for t in topics}
  return {topics[0]: [row["label"] == topics[0] for row in rows]}


def windows_count(log):
  """The log's account of the training windows (glue/windows.describe), if any."""
  with open(log, encoding="utf-8", errors="replace") as f:
    for line in f:
      if "training set:" in line:
        return line.split("training set:", 1)[1].strip()
  return None


def main(_):
  cli.require_flags(FLAGS, "reuters_train", "reuters_test", "model_dir", "output_dir")
  for name, values, known in (("settings", FLAGS.settings, SETTINGS),
                              ("rules", FLAGS.rules, RULES)):
    unknown = [v for v in values if v not in known]
    if unknown:
      sys.exit("--%s: unknown %s; use some of %s." % (name, ", ".join(unknown), ", ".join(known)))
  model = FLAGS.model_dir
  config = next((os.path.join(model, n) for n in ("bert_config.json", "config.json")
                 if os.path.exists(os.path.join(model, n))), None)
  if config is None:
    sys.exit("--model_dir=%s has no bert_config.json or config.json." % model)
  gold = write_data(os.path.join(FLAGS.output_dir, "data"),
                    reuters.read_reuters(FLAGS.reuters_train),
                    reuters.read_reuters(FLAGS.reuters_test))
  report = common.Results("long_documents", {
      "max_seq_length": FLAGS.max_seq_length, "lr": FLAGS.learning_rate, "seed": FLAGS.seed,
      "model": os.path.basename(os.path.normpath(model))})
  common_args = ["--vocab_file=%s/vocab.txt" % model, "--bert_config_file=" + config,
                 "--init_checkpoint=" + model, "--do_lower_case=true",
                 "--max_seq_length=%d" % FLAGS.max_seq_length, "--eval_batch_size=64",
                 "--predict_batch_size=64", "--learning_rate=%r" % FLAGS.learning_rate]
  if FLAGS.seed is not None:
    common_args.append("--shuffle_seed=%d" % FLAGS.seed)
  exported = None
  for setting in FLAGS.settings:
    topics, _, epochs, batch = SETTINGS[setting]
    data = os.path.join(FLAGS.output_dir, "data", setting)
    files = ["--train_file=%s/train.jsonl" % data, "--predict_file=%s/test.jsonl" % data]
    if len(topics) > 1:
      files.append("--label_column=labels")
    else:
      files.append("--labels=other," + topics[0])
    for rule in FLAGS.rules:
      out = os.path.join(FLAGS.output_dir, "%s_%s" % (setting, rule))
      windows = [] if rule == "truncate" else ["--long_document=windows",
                                               "--window_training=" + rule]
      if windows and FLAGS.pooling:
        windows.append("--window_pooling=" + FLAGS.pooling)
      args = common_args + files + windows + ["--output_dir=" + out]
      log = out + ".log"
      if not (FLAGS.reuse and os.path.exists(os.path.join(out, "predictions.jsonl"))):
        run_classifier(args + ["--do_train", "--do_predict", "--train_batch_size=%d" % batch,
                               "--num_train_epochs=%r" % epochs], log)
      add_row(report, "%s %s" % (setting, rule),
              predicted(os.path.join(out, "predictions.jsonl"), topics), gold[setting],
              reuters.training_seconds(log), {"epochs": epochs, "batch": batch,
                                      "windows": windows_count(log)})
      for pooling in FLAGS.poolings if windows else ():
        again = out + "_" + pooling
        run_classifier(args + ["--do_predict", "--window_pooling=" + pooling,
                               "--output_dir=" + out], again + ".log")
        os.replace(os.path.join(out, "predictions.jsonl"), again + ".jsonl")
        add_row(report, "%s %s, pooled %s" % (setting, rule, pooling),
                predicted(again + ".jsonl", topics), gold[setting], None, {})
      if rule == "document" and exported is None:
        exported = (out, args)
  if exported and FLAGS.request_words:
    time_requests(report, *exported)
  report.report()


def add_row(report, row, guessed, gold, seconds, settings):
  figures = {}
  for topic, truth in gold.items():
    f1, accuracy = reuters.scores(truth, guessed[topic])
    figures["F1 " + topic] = (f1, "")
    figures["accuracy " + topic] = (accuracy, "")
  figures["training"] = (seconds, "s")
  report.add(row, figures, settings)


def time_requests(report, out, args):
  """The export of a windows run: one request of each length timed, its answer against the
  runner's prediction for the same text."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (the export's tokenizer ops)
  test = args[[a.startswith("--predict_file=") for a in args].index(True)].split("=", 1)[1]
  with open(test, encoding="utf-8") as f:
    words = " ".join(json.loads(line)["text"] for line in f if line.strip()).split()
  requests = [" ".join(words[:int(n)]) for n in FLAGS.request_words]
  folder = os.path.join(FLAGS.output_dir, "requests")
  os.makedirs(folder, exist_ok=True)
  reuters.write_jsonl(os.path.join(folder, "requests.jsonl"), [{"text": r} for r in requests])
  export_dir = os.path.join(FLAGS.output_dir, "export")
  runner_args = [a for a in args if not a.startswith(("--predict_file=", "--output_dir="))]
  run_classifier(runner_args + ["--predict_file=%s/requests.jsonl" % folder, "--output_dir=" + out,
                                "--do_predict", "--export_dir=" + export_dir,
                                "--overwrite_export"], os.path.join(folder, "export.log"))
  with open(os.path.join(out, "predictions.jsonl"), encoding="utf-8") as f:
    runner = [json.loads(line)["probabilities"] for line in f if line.strip()]
  serve = tf.saved_model.load(export_dir).signatures["serving_default"]
  serve(text_a=tf.constant(requests[:1]))  # traced once
  for request, expected in zip(requests, runner):
    answers, seconds = [], []
    for _ in range(FLAGS.repeats):
      answer, elapsed = timing.timed(lambda: serve(text_a=tf.constant([request])))
      answers.append(answer["probabilities"].numpy()[0])
      seconds.append(elapsed)
    difference = float(np.abs(answers[0] - np.array(list(expected.values()))).max())
    count = len(request.split())
    report.add("request %d words" % count,
               {"median": (float(np.median(seconds)), "s"),
                "per word": (1000 * float(np.median(seconds)) / count, "ms"),
                "max |served - runner|": (difference, "")},
               {}, {"equals the runner": difference <= 1e-5})


if __name__ == "__main__":
  cli.run(main)
