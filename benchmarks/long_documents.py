"""run_classifier's --long_document: truncate against windows on a Reuters topic, and long
requests to the windows export (the table and figures of docs/runners.md, "Documents longer
than --max_seq_length").

    python -m benchmarks.precision_accuracy --prepare_dir=DATA --label_column=grain \\
        --reuters_train=reuters21578_modapte_train.tsv --reuters_test=reuters21578_modapte_test.tsv
    python -m benchmarks.long_documents --data_dir=DATA --model_dir=/path/to/all-MiniLM-L6-v2 \\
        --output_dir=/tmp/long_documents [--max_seq_lengths=64,128] [--train_steps=200]

For each length, run_classifier fine-tunes the model (`sst-2`: the topic against the rest) with
`truncate` and with `windows` for the same number of steps of --train_batch_size sequences; the
windows model then predicts DATA/dev.tsv pooled each way of --poolings. Accuracy and F1 of label
1 come from test_results.tsv. Then the first length's windows model is exported with
--request_pooling and one request of each of --request_words words (the test documents end to
end) is timed through `serving_default`; each answer is checked against run_classifier
--do_predict's for the same text.
"""

import os
import shutil
import subprocess
import sys
import time

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import flags
import numpy as np

from benchmarks import common, timing
from benchmarks.precision_accuracy import scores
from bert_tf import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "train.tsv and dev.tsv in the SST-2 layout "
                    "(benchmarks.precision_accuracy --prepare_dir).")
flags.DEFINE_string("model_dir", None, "The model to fine-tune: a Google release or an HF BERT "
                    "folder (vocab.txt and bert_config.json or config.json).")
flags.DEFINE_string("output_dir", None, "Where the runs, data and export go.")
flags.DEFINE_list("max_seq_lengths", ["64", "128"], "The lengths to compare.")
flags.DEFINE_integer("train_steps", 200, "Training steps of every run.")
flags.DEFINE_integer("train_batch_size", 32, "Sequences per step (examples or windows).")
flags.DEFINE_float("learning_rate", 5e-5, "Learning rate of every run.")
flags.DEFINE_list("poolings", ["mean", "max", "any"], "The windows model's poolings to score.")
flags.DEFINE_string("request_pooling", "any", "The pooling of the timed export.")
flags.DEFINE_list("request_words", ["500", "1000", "2000", "5000"], "Words per timed request.")
flags.DEFINE_integer("repeats", 3, "Timed calls per request (the median is reported).")


def run_classifier(args):
  """Runs run_classifier.py; returns its wall seconds (stops the benchmark on a failure)."""
  start = time.perf_counter()
  result = subprocess.run([sys.executable, os.path.join(common.ROOT, "run_classifier.py")] + args,
                          capture_output=True, text=True)
  if result.returncode:
    sys.exit("run_classifier %s failed:\n%s" % (" ".join(args), result.stderr[-3000:]))
  return time.perf_counter() - start


def read_rows(path):
  """(texts, labels) of an SST-2 layout file with a label column."""
  with open(path, encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f.readlines()[1:]]
  return [row[0] for row in rows], np.array([int(row[1]) for row in rows])


def write_data(folder, texts, source_dir=None):
  """A data dir whose test.tsv holds `texts` (and source_dir's train.tsv and dev.tsv)."""
  os.makedirs(folder, exist_ok=True)
  for name in ("train.tsv", "dev.tsv") if source_dir else ():
    shutil.copy(os.path.join(source_dir, name), os.path.join(folder, name))
  with open(os.path.join(folder, "test.tsv"), "w", encoding="utf-8") as f:
    f.write("index\tsentence\n")
    f.writelines("%d\t%s\n" % (i, text) for i, text in enumerate(texts))
  return folder


def sequences(mode, seq, examples, tokenizer):
  """What a step's batch counts with `mode`: examples, or their windows."""
  from bert_tf.tasks.glue import windows
  if mode == "truncate":
    return len(examples)
  return sum(windows.count_windows(e, seq, tokenizer, windows.DEFAULT_DOC_STRIDE)
             for e in examples)


def main(_):
  cli.require_flags(FLAGS, "data_dir", "model_dir", "output_dir")
  from bert_tf import tokenization
  from bert_tf.tasks import glue
  model = FLAGS.model_dir
  config = next(os.path.join(model, name) for name in ("bert_config.json", "config.json")
                if os.path.exists(os.path.join(model, name)))
  vocab = os.path.join(model, "vocab.txt")
  tokenizer = tokenization.FullTokenizer(vocab, True)
  examples = glue.Sst2Processor().get_train_examples(FLAGS.data_dir)
  texts, labels = read_rows(os.path.join(FLAGS.data_dir, "dev.tsv"))
  data = write_data(os.path.join(FLAGS.output_dir, "data"), texts, FLAGS.data_dir)
  report = common.Results("long_documents", {
      "steps": FLAGS.train_steps, "batch": FLAGS.train_batch_size, "lr": FLAGS.learning_rate,
      "documents": len(examples), "test_documents": len(labels),
      "test_positives": int(labels.sum())})
  common_args = ["--task_name=sst-2", "--vocab_file=" + vocab, "--bert_config_file=" + config,
                 "--init_checkpoint=" + model, "--do_lower_case=true", "--eval_batch_size=64",
                 "--predict_batch_size=64", "--save_checkpoints_steps=100000"]
  windows_runs = []
  for seq in map(int, FLAGS.max_seq_lengths):
    for mode in ("truncate", "windows"):
      out = os.path.join(FLAGS.output_dir, "%s_%d" % (mode, seq))
      records = sequences(mode, seq, examples, tokenizer)
      epochs = (FLAGS.train_steps + 0.5) * FLAGS.train_batch_size / records
      args = common_args + ["--data_dir=" + data, "--max_seq_length=%d" % seq,
                            "--output_dir=" + out, "--long_document=" + mode, "--do_predict"]
      training = ["--do_train", "--train_batch_size=%d" % FLAGS.train_batch_size,
                  "--learning_rate=%r" % FLAGS.learning_rate, "--num_train_epochs=%r" % epochs]
      poolings = FLAGS.poolings if mode == "windows" else [None]
      for index, pooling in enumerate(poolings):
        pooled = ["--window_pooling=" + pooling] if pooling else []
        if index == 0:
          seconds = run_classifier(args + training + pooled)
        else:  # the trained model, predicting again
          run_classifier(args + pooled)
        accuracy, f1 = scores(np.loadtxt(os.path.join(out, "test_results.tsv")), labels)
        report.add("%d %s" % (seq, mode + (", " + pooling if pooling else "")),
                   {"accuracy": (accuracy, ""), "F1": (f1, ""),
                    "train + predict": (seconds if index == 0 else None, "s")},
                   {"sequences": records})
      if mode == "windows":
        windows_runs.append((out, args))
  time_requests(report, texts, *windows_runs[0])
  report.report()


def time_requests(report, texts, out, args):
  """The export of a windows run: one request of each length timed, its answer against the
  runner's prediction for the same text."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (the export's tokenizer ops)
  words = " ".join(texts).split()
  requests = [" ".join(words[:int(n)]) for n in FLAGS.request_words]
  export_dir = os.path.join(FLAGS.output_dir, "export")
  data = write_data(os.path.join(FLAGS.output_dir, "requests"), requests)
  run_classifier([a for a in args if not a.startswith("--data_dir")] + [
      "--data_dir=" + data, "--window_pooling=" + FLAGS.request_pooling,
      "--export_dir=" + export_dir, "--overwrite_export"])
  runner = np.loadtxt(os.path.join(out, "test_results.tsv"), ndmin=2)
  serve = tf.saved_model.load(export_dir).signatures["serving_default"]
  serve(text_a=tf.constant(requests[:1]))  # traced once
  for request, expected in zip(requests, runner):
    answers, seconds = [], []
    for _ in range(FLAGS.repeats):
      answer, elapsed = timing.timed(lambda: serve(text_a=tf.constant([request])))
      answers.append(answer["probabilities"].numpy()[0])
      seconds.append(elapsed)
    difference = float(np.abs(answers[0] - expected).max())
    count = len(request.split())
    report.add("request %d words" % count,
               {"median": (float(np.median(seconds)), "s"),
                "per word": (1000 * float(np.median(seconds)) / count, "ms"),
                "max |served - runner|": (difference, "")},
               {"pooling": FLAGS.request_pooling}, {"equals the runner": difference <= 1e-5})


if __name__ == "__main__":
  cli.run(main)
