"""Fine-tune BERT on GLUE / XNLI sentence(-pair) classification (paper section 4.1).

Same flags as Google's run_classifier.py, plus distribution, precision, XLA,
gradient accumulation, --export_dir (a SavedModel that takes raw text) and GLUE
submission files:

  python run_classifier.py --task_name=MRPC --do_train=true --do_eval=true \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
    --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/mrpc_output/

Tasks: cola, mnli, mnli-mm, mrpc, xnli, sst-2, qqp, qnli, rte, wnli, sts-b.
Re-running the same command resumes training from --output_dir. --long_document=windows reads
texts longer than --max_seq_length whole, as windows (docs/runners.md).
Your own .csv/.tsv/.jsonl files instead of a GLUE task: --train_file, --eval_file,
--predict_file (single-label, multi-label or regression, long texts as windows too;
docs/runners.md, "Your own data").
"""

import dataclasses
import random
import sys

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags, logging
import numpy as np
import tensorflow as tf

from bert_tf import cli, run_folder, runner, runner_flags
from bert_tf.errors import UserInputError
from bert_tf.tasks import glue, own_data
from bert_tf.tasks.glue import windows as glue_windows
from bert_tf.tasks.own_data import data as own_data_files
from bert_tf.tasks.own_data import features as own_features
from bert_tf.tasks.own_data import labels as own_labels

FLAGS = flags.FLAGS

flags.DEFINE_string("data_dir", None,
                    "The input data dir. Should contain the .tsv files (or other data files) for "
                    "the task.")
flags.DEFINE_string("task_name", None, "The name of the task to train.")
flags.DEFINE_bool("write_glue_submission", False,
                  "With --do_predict, also write <TASK>.tsv in the GLUE submission format.")
flags.DEFINE_string("xnli_language", "zh", "Language of the xnli task (the original used zh).")
flags.DEFINE_enum("long_document", "truncate", list(glue_windows.MODES),
                  "truncate: cut every example to --max_seq_length (the original). windows: cut "
                  "text_a into windows of what fits, --doc_stride apart (text_b whole in each); "
                  "train on every window and pool an example's windows into one prediction "
                  "(GLUE tasks and your own files alike).")
flags.DEFINE_integer("doc_stride", None,
                     "With --long_document=windows: when splitting up a long document into "
                     "windows, how much stride to take between windows (default %d)."
                     % glue_windows.DEFAULT_DOC_STRIDE)
flags.DEFINE_enum("window_training", None, list(glue_windows.TRAINING_RULES),
                  "With --long_document=windows, how training reads a document: first: its first "
                  "window only (truncate's records; evaluation, prediction and the export read "
                  "every window); document: its windows in one step, the loss on their pooled "
                  "logits (--window_pooling), a batch of documents; window: every window a "
                  "training example with its document's label, a batch of windows (default %s; "
                  "docs/runners.md compares them)."
                  % glue_windows.DEFAULT_TRAINING)
flags.DEFINE_integer("max_train_windows", None,
                     "With --window_training=document: a training document's first windows "
                     "that it trains on (evaluation and prediction read them all) (default %d)."
                     % glue_windows.DEFAULT_MAX_TRAIN_WINDOWS)
flags.DEFINE_enum("window_pooling", None, list(glue_windows.POOLINGS),
                  "With --long_document=windows: how an example's prediction combines its "
                  "windows' logits: their mean, their max per label, or any: the window least "
                  "likely to be the first label decides (a yes/no task with no first, such as a "
                  "topic: yes when any window says yes; multi_label: a label is predicted when "
                  "any window predicts it, the max of each label's logit) (default %s; "
                  "multi_label: any)." % glue_windows.DEFAULT_POOLING)
# Your own files (no --task_name): bert_tf/tasks/own_data, docs/runners.md "Your own data".
flags.DEFINE_string("train_file", None,
                    "Your own labeled training file, .csv, .tsv or .jsonl (the format from the "
                    "extension), instead of --task_name and --data_dir.")
flags.DEFINE_string("eval_file", None, "Your own labeled file to evaluate on (as --train_file).")
flags.DEFINE_string("predict_file", None,
                    "Your own file to predict (as --train_file; the label column may be absent).")
flags.DEFINE_string("text_column", "text", "With --train_file...: the column of the text.")
flags.DEFINE_string("text_b_column", None,
                    "With --train_file...: the column of a pair's second text.")
flags.DEFINE_string("label_column", "label", "With --train_file...: the column of the label.")
flags.DEFINE_string("id_column", None,
                    "With --train_file...: a column copied to each line of predictions.jsonl.")
flags.DEFINE_list("labels", None,
                  "With --train_file...: the label names in output order (default: the "
                  "training file's, sorted).")
flags.DEFINE_enum("problem_type", None, list(own_data.PROBLEM_TYPES),
                  "With --train_file...: the problem type (default: read from the label "
                  "column; the log says which and why).")
flags.DEFINE_string("label_delimiter", "|",
                    "With --train_file...: what separates a multi-label CSV/TSV field's names.")
flags.DEFINE_float("threshold", None,
                   "With --train_file... and multi_label: a label is predicted when its "
                   "probability is over this (default: a run that does not train uses the "
                   "training run's, else %s)." % own_labels.DEFAULT_THRESHOLD)
flags.DEFINE_string("class_weights", "none",
                    "With --train_file...: none, balanced (from the training label counts) or "
                    "one weight per label, comma-separated, in label order.")
runner_flags.define_finetuning_flags(
    export_help="If set, write a SavedModel here: `serving_default` takes raw text, "
                "`serve_ids` takes word ids.")
runner_flags.define_eval_flags()
runner_flags.define_best_checkpoint_flags()

_SUBMISSION_NAMES = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC", "sts-b": "STS-B",
                     "qqp": "QQP", "mnli": "MNLI-m", "mnli-mm": "MNLI-mm", "qnli": "QNLI",
                     "rte": "RTE", "wnli": "WNLI", "xnli": "XNLI"}


class WindowHooks(runner.TaskHooks):
  """--long_document=windows, as the GLUE tasks and your own files share it
  (bert_tf/tasks/glue/windows.py): the flags' checks, the records of each example's windows
  (or, training by document, of its first windows), the steps, the log, the stored settings
  and the pooling. A subclass encodes an example's windows (`window_records`,
  `document_record`) and its truncated record (`encode_examples`)."""

  windows = None  # WindowOptions with --long_document=windows
  trained_by = None  # the setting naming the data of a training run of these hooks
  # Writable after construction until bert_tf/tasks/glue/hooks.py and own_data/hooks.py
  # replace these hooks (issue 41).
  __setattr__ = object.__setattr__

  def set_windows(self, options, what, text_pair, regression=False, multi_label=False):
    """The windows flags checked (`what` names the data in an error) into self.windows."""
    self.window_counts = {}  # split -> windows per example, as encode wrote them
    self.windows_regression = regression
    self.windows = glue_windows.options_from_flags(self.flags, options, what, text_pair,
                                                   regression, multi_label)
    if self.windows:
      self.min_seq_length = glue_windows.min_seq_length(text_pair)
      self.one_record_per_example = False  # a long example gives several windows

  def warn_if_trained_otherwise(self, options):
    """Evaluating or predicting with other windows than the weights were trained on is
    allowed (windows on a model trained on truncated texts, or to compare), but weights
    trained on windows are easily read otherwise by forgetting a flag: the log warns."""
    source = (options.output_dir if run_folder.has_training_state(options.output_dir)
              else options.init_checkpoint)
    recorded = run_folder.recorded_settings(source) if source else {}
    if self.trained_by not in recorded or "train_data" not in recorded:
      return  # not the record of such a classifier's training
    trained_on = recorded.get("long_document", "truncate")
    trained = _windows_flags(trained_on, recorded.get("doc_stride"))
    now = _windows_flags(self.flags.long_document,
                         self.windows.doc_stride if self.windows else None)
    if now != trained:
      log = logging.warning if trained_on == "windows" else logging.info
      log("The weights in %s were trained with %s; this run reads its texts with %s (allowed; "
          "pass %s to read them as training did).", source, trained, now, trained)

  def encode(self, run, split, examples):
    """encode_examples' records (with windows: every window of every example, their counts
    kept for pooling; training by document, a record per document)."""
    if self.windows and split == "train" and self.windows.by_document:
      yield from self.encode_documents(run, examples)
    elif self.windows and not (split == "train" and self.windows.trains_truncated):
      yield from self.encode_windows(run, split, examples)
    else:
      yield from self.encode_examples(run, split, examples)

  def encode_examples(self, run, split, examples):
    raise NotImplementedError

  def window_records(self, run, split, example):
    """The serialized records of each window of `example`, in order."""
    raise NotImplementedError

  def document_record(self, run, example):
    """(serialized record of a training document, windows `example` has)."""
    raise NotImplementedError

  def padding_record(self, run):
    """A record that is no example, to pad eval windows to whole TPU batches (None: none)."""
    return None

  def encode_documents(self, run, examples):
    """A record per training document: its first max_train_windows windows (the input's
    shuffle mixes documents as it mixes truncated examples)."""
    counts = self.window_counts["train"] = []
    for example in examples:
      record, count = self.document_record(run, example)
      counts.append(count)
      yield record

  def encode_windows(self, run, split, examples):
    """Training windows are written example by example in a seeded random order: the input's
    100-record shuffle buffer (the original's) cannot mix a file whose neighbours are windows of
    one document, and a run shorter than an epoch would see only the file's first documents."""
    counts = self.window_counts[split] = []
    if split == "train":
      examples = list(examples)
      random.Random(run.options.shuffle_seed).shuffle(examples)
    for example in examples:
      records = self.window_records(run, split, example)
      counts.append(len(records))
      yield from records
    padding = self.padding_record(run) if split != "train" and (
        run.options.strategy == "tpu") else None
    if padding is not None:  # whole batches of windows
      yield from [padding] * (-sum(counts) % run.options.batch_size(split))

  def train_steps(self, run, examples):
    """Steps over documents, or with --window_training=window over windows (a batch is
    windows, not examples)."""
    if not (self.windows and examples):
      return super().train_steps(run, examples)
    counts = [glue_windows.count_windows(example, run.options.max_seq_length, run.tokenizer,
                                         self.windows.doc_stride) for example in examples]
    cap = self.windows.max_train_windows if self.windows.by_document else None
    logging.info("--long_document=windows, training set: %s", glue_windows.describe(counts, cap))
    if self.windows.trains_truncated:
      logging.info("--window_training=first: training reads each document's first window (the "
                   "records of truncate); evaluation, prediction and the export pool all of its "
                   "windows by %s.", self.windows.pooling)
      steps = super().train_steps(run, examples)
    elif self.windows.by_document:
      logging.info("--window_training=document: a batch is %d documents, each with its windows "
                   "(at most %d); the loss is on their logits pooled by %s.",
                   run.options.train_batch_size, cap, self.windows.pooling)
      steps = super().train_steps(run, examples)
    else:
      logging.info("--window_training=window: a batch is %d windows, each with its document's "
                   "label.", run.options.train_batch_size)
      steps = run.options.train_steps(sum(counts))
    for risk in glue_windows.risks(self.windows, steps[0], self.windows_regression):
      logging.warning("--long_document=windows may lose to truncate here: %s See "
                      "docs/runners.md.", risk)
    return steps

  def describe(self, run, split, examples, records=None):
    if not self.windows or (split == "train" and self.windows.trains_truncated):
      return super().describe(run, split, examples, records)
    by_document = split == "train" and self.windows.by_document
    return glue_windows.describe(self.window_counts[split],
                                 self.windows.max_train_windows if by_document else None)

  def record_length(self, run, split):
    """The inputs' length in `split`'s records: a training document's windows end to end."""
    if self.windows and split == "train" and self.windows.by_document:
      return run.options.max_seq_length * self.windows.max_train_windows
    return run.options.max_seq_length

  def window_settings(self, run):
    """When training on windows, how its data was cut (a resume that trains otherwise stops,
    either way: truncate is not recorded, and an absent long_document is truncate,
    checkpoint_keeper.UNRECORDED_DEFAULTS) and their pooling (applied at evaluation and
    prediction only: it may change on resume, and the log says so). A run that only
    evaluates or predicts states neither: it may read its texts otherwise."""
    if not (self.windows and run.options.do_train):
      return {}
    settings = {"long_document": "windows", "doc_stride": self.windows.doc_stride,
                "window_pooling": self.windows.pooling,
                "window_training": self.windows.training}
    if self.windows.by_document:
      settings["max_train_windows"] = self.windows.max_train_windows
    return settings

  def export_window_settings(self):
    """How serving_default cuts and pools a long text."""
    if not self.windows:
      return {}
    return {"doc_stride": self.windows.doc_stride, "window_pooling": self.windows.pooling}

  def pooled_values(self, split, values, multi_label=False):
    """Per example, its windows' rows of `values` (logits; a regression's outputs) pooled
    (`multi_label`: each label's on its own)."""
    counts = self.window_counts[split]
    return glue_windows.pool(values[:sum(counts)], counts, self.windows.pooling, multi_label)


class ClassifierHooks(WindowHooks):
  """A GLUE / XNLI task: the original's processors, features and metrics."""

  eval_with_predictions = True  # the GLUE metrics need each example's prediction
  trained_by = "task_name"

  def __init__(self, task_flags, options=None):
    self.flags = task_flags
    self.task_name = self.flags.task_name.lower()
    self.processor = glue.get_processor(self.flags.task_name)
    if isinstance(self.processor, glue.XnliProcessor):
      self.processor = glue.XnliProcessor(self.flags.xnli_language)
    self.label_list = self.processor.get_labels()
    self.regression = self.label_list is None
    self.window_counts = {}

  def check(self, options):
    self.check_windows(options)
    if not options.do_train:
      self.warn_if_trained_otherwise(options)

  def check_windows(self, options):
    if self.flags.long_document == "windows" and self.processor.question_first:
      raise UserInputError("--long_document=windows cuts text_a into windows, but %s's text_a "
                           "is a question and its long text is text_b (SQuAD-style); use "
                           "--long_document=truncate, or run_squad.py for long passages."
                           % self.task_name.upper())
    self.set_windows(options, self.task_name.upper(), self.processor.is_pair, self.regression)

  def read_examples(self, run, split):
    if split == "train":
      examples = self.processor.get_train_examples(self.flags.data_dir)
      if not examples:
        raise UserInputError("No training examples in %s." % self.flags.data_dir)
    elif split == "eval":
      examples = self.processor.get_dev_examples(self.flags.data_dir)
      if not examples:
        raise UserInputError("No dev examples in %s." % self.flags.data_dir)
    else:
      examples = self.processor.get_test_examples(self.flags.data_dir)
    return examples

  def record_files(self, run, split, examples):
    """On TPUs the original padded eval/predict sets to whole batches with fake examples (with
    windows, `encode` pads the windows instead)."""
    if split != "train" and run.options.strategy == "tpu" and not self.windows:
      padding = -len(examples) % run.options.batch_size(split)
      examples = examples + [glue.PaddingInputExample()] * padding
    return super().record_files(run, split, examples)

  def encode_examples(self, run, split, examples):
    """The original's file_based_convert_examples_to_features."""
    for index, example in enumerate(examples):
      yield glue.encode_features(glue.convert_single_example(
          index, example, self.label_list, run.options.max_seq_length, run.tokenizer))

  def example_windows(self, run, example):
    return glue_windows.example_windows(example, self.label_list, run.options.max_seq_length,
                                        run.tokenizer, self.windows.doc_stride)

  def window_records(self, run, split, example):
    return [glue.encode_features(f) for f in self.example_windows(run, example)]

  def document_record(self, run, example):
    features, count = glue_windows.document_features(
        example, self.label_list, run.options.max_seq_length, run.tokenizer,
        self.windows.doc_stride, self.windows.max_train_windows)
    return glue.encode_features(features), count

  def padding_record(self, run):
    return glue.encode_features(glue.convert_single_example(
        0, glue.PaddingInputExample(), self.label_list, run.options.max_seq_length, None))

  def feature_spec(self, run, split):
    return glue.feature_spec(self.record_length(run, split), self.regression)

  def make_task(self, run):
    return glue.ClassificationTask(run.config, len(self.label_list) if self.label_list else 1,
                                   self.regression, windows=self.windows,
                                   max_seq_length=run.options.max_seq_length,
                                   **run.options.task_options())

  def settings(self, run):
    """The task and labels, and how a training run cuts and pools its windows."""
    return {"task_name": self.task_name, "labels": self.label_list, **self.window_settings(run)}

  def head_labels(self, run):
    return "classifier", glue.task_labels(self.task_name, self.label_list), None

  def best_metric(self, run):
    """The task's GLUE metric (accuracy where GLUE reports only that)."""
    return _GLUE_BEST_METRICS.get(glue.GLUE_METRICS.get(self.task_name), "eval_accuracy")

  def pooled(self, split, outputs):
    """Per example, its windows' logits (regression: outputs) pooled."""
    return self.pooled_values(split, outputs["predictions" if self.regression else "logits"])

  def postprocess_eval(self, run, examples, result, outputs, records=None):
    if self.windows:
      labels = np.array([glue.label_id_of(e, self.label_list) for e in examples])
      pooled = self.pooled("eval", outputs)
      result.update(glue_windows.example_metrics(pooled, labels, self.regression))
      predictions = pooled if self.regression else np.argmax(pooled, axis=-1)
      result.update(glue.glue_metrics(self.task_name, predictions, labels))
      return result
    if self.regression:
      labels = np.array([e.label for e in examples])
      predictions = outputs["predictions"][:len(examples)]
    else:
      labels = np.array([self.label_list.index(e.label) for e in examples])
      predictions = np.argmax(outputs["probabilities"][:len(examples)], axis=-1)
    result.update(glue.glue_metrics(self.task_name, predictions, labels))
    return result

  def postprocess_predict(self, run, examples, outputs, records=None):
    if self.windows:
      pooled = self.pooled("predict", outputs)
      values = pooled[:, None] if self.regression else glue_windows.softmax(pooled)
    else:
      values = outputs["predictions"][:, None] if self.regression else outputs["probabilities"]
      values = values[:len(examples)]
    runner.write_test_results(run.output_path("test_results.tsv"), values)
    if self.flags.write_glue_submission:
      self.write_glue_submission(run, values)

  def write_glue_submission(self, run, values):
    name = _SUBMISSION_NAMES.get(self.task_name, self.task_name.upper())
    path = run.output_path(name + ".tsv")
    with tf.io.gfile.GFile(path, "w") as writer:
      writer.write("index\tprediction\n")
      for index, row in enumerate(values):
        prediction = ("%.3f" % row[0] if self.regression
                      else self.label_list[int(np.argmax(row))])
        writer.write("%d\t%s\n" % (index, prediction))
    logging.info("Wrote the GLUE submission file %s", path)

  def export_settings(self, run):
    """The labels and, with windows, how serving_default cuts and pools a long text."""
    return {"task_name": self.task_name, "labels": self.label_list,
            "long_document": self.flags.long_document, **self.export_window_settings()}

  def export(self, run):
    from bert_tf.tasks.glue.export import export_classifier
    options = run.options
    export_classifier(options.export_dir, run.serving_model(), options.vocab_file,
                      options.do_lower_case, options.max_seq_length, self.label_list,
                      self.processor.is_pair, strip_accents=options.strip_accents,
                      windows=self.windows)


class OwnDataHooks(WindowHooks):
  """Your own labeled files (--train_file, --eval_file, --predict_file): single-label,
  multi-label or regression, label names kept with the run (bert_tf/tasks/own_data), long
  texts as windows with --long_document=windows (a multi-label run pools each label's logit).

  What the hooks derive from the files (the rows, the schema) is computed on first use by
  whichever hook needs it and memoized, the same whichever asks first."""

  eval_with_predictions = True  # the metrics need each row's prediction
  trained_by = "problem_type"
  FILES = {"train": "train_file", "eval": "eval_file", "predict": "predict_file"}

  def __init__(self, task_flags, options=None):
    self.flags = f = task_flags
    self.columns = own_data.Columns(f.text_column, f.text_b_column, f.label_column, f.id_column,
                                    f.label_delimiter)
    own_data_files.check_distinct_columns(self.columns)
    self.given = own_data_files.from_flag(f.labels)
    self.memo = {}
    self.window_counts = {}

  def check(self, options):
    for split, action in runner.SPLITS:
      path = getattr(self.flags, self.FILES[split])
      if getattr(options, action) and not path:
        raise UserInputError("--%s needs --%s=<your .csv, .tsv or .jsonl file>." %
                             (action, self.FILES[split]))
      if path:
        own_data_files.file_format(path, "--" + self.FILES[split])
    if self.flags.threshold is not None and not 0 < self.flags.threshold < 1:
      raise UserInputError("--threshold=%s must be between 0 and 1." % self.flags.threshold)
    if not self.flags.label_delimiter:
      raise UserInputError("--label_delimiter must not be empty; pass e.g. --label_delimiter='|'.")
    if not options.do_train:  # fails now when there are no labels to predict with
      self.schema(options)
    problem = (self.schema(options).problem_type if self.flags.long_document == "windows" and
               self.flags.window_pooling in (None, "any") else None)
    self.set_windows(options, "this run", self.columns.text_b is not None,
                     problem == "regression", problem == "multi_label")
    if problem == "single_label" and self.windows and not self.given:
      labels = self.schema(options).labels
      logging.warning("--window_pooling=any reads the first label, %r, as the 'no': a row is "
                      "another label when any window says so. Labels are sorted unless "
                      "--labels orders them; for a topic, pass --labels=<the no label>,... "
                      "(labels now: %s).", labels[0], ",".join(labels))
    if not options.do_train:
      self.warn_if_trained_otherwise(options)

  def path(self, split):
    return getattr(self.flags, self.FILES[split])

  def rows(self, split):
    """The rows of the split's file, labels as the file holds them (memoized)."""
    if split not in self.memo:
      self.memo[split] = own_data_files.read_rows(
          self.path(split), self.columns, "--" + self.FILES[split], split != "predict")
    return self.memo[split]

  def schema(self, options):
    """Problem type, labels and class weights: the training file's, or the trained model's."""
    if "schema" not in self.memo:
      f, pair = self.flags, self.columns.text_b is not None
      self.memo["schema"] = (
          own_labels.from_training(self.path("train"), self.rows("train"), f.problem_type,
                                   self.given, f.label_delimiter, f.class_weights, pair)
          if options.do_train else
          own_labels.from_trained(options.output_dir, options.init_checkpoint, f.problem_type,
                                  self.given, pair))
    return self.memo["schema"]

  def read_examples(self, run, split):
    rows, schema = self.rows(split), self.schema(run.options)
    if split == "predict":
      return [dataclasses.replace(row, label=None) for row in rows]
    rows = own_data_files.with_labels(self.path(split), rows, schema.problem_type,
                                      self.flags.label_delimiter)
    if split == "eval":
      own_labels.check_known(self.path(split), rows, schema, self.given)
    return rows

  def encode_examples(self, run, split, examples):
    schema = self.schema(run.options)
    for row in examples:
      yield own_data.encode_row(row, run.options.max_seq_length, run.tokenizer,
                                schema.problem_type, schema.labels, split != "predict")

  def window_records(self, run, split, example):
    schema = self.schema(run.options)
    return own_features.encode_windows(example, run.options.max_seq_length, run.tokenizer,
                                       schema.problem_type, schema.labels, split != "predict",
                                       self.windows.doc_stride)

  def document_record(self, run, example):
    schema = self.schema(run.options)
    return own_features.encode_document(example, run.options.max_seq_length, run.tokenizer,
                                        schema.problem_type, schema.labels,
                                        self.windows.doc_stride, self.windows.max_train_windows)

  def feature_spec(self, run, split):
    schema = self.schema(run.options)
    return own_data.feature_spec(self.record_length(run, split), schema.problem_type,
                                 schema.num_labels)

  def make_task(self, run):
    schema = self.schema(run.options)
    return own_data.OwnDataTask(run.config, schema.num_labels, schema.problem_type,
                                schema.class_weights, windows=self.windows,
                                max_seq_length=run.options.max_seq_length,
                                **run.options.task_options())

  def settings(self, run):
    """The problem type, labels and class weights shape the head and its loss; how a
    training run cuts and pools its windows, its data."""
    return dict(self.schema(run.options).record(), **self.window_settings(run))

  def head_labels(self, run):
    labels = self.schema(run.options).labels
    return None if labels is None else ("classifier", labels, "--labels")

  def best_metric(self, run):
    """Single-label accuracy (what GLUE reports, defined on any eval file), multi-label
    micro-F1, regression Pearson (STS-B's)."""
    return {"single_label": "eval_accuracy", "multi_label": "eval_micro_f1",
            "regression": "eval_pearson"}[self.schema(run.options).problem_type]

  def threshold(self, options):
    """--threshold, else the one the model was trained with (a run that does not train), else
    the default: predictions.jsonl and the export name the same labels as at training."""
    if self.flags.threshold is not None:
      return self.flags.threshold
    schema = self.schema(options)
    if not options.do_train and schema.threshold is not None:
      return schema.threshold
    return own_labels.DEFAULT_THRESHOLD

  def on_start(self, run):
    if run.options.do_train and run.trainer.chief:
      own_labels.write(run.options.output_dir, self.schema(run.options),
                       self.threshold(run.options))

  def row_logits(self, run, split, outputs):
    """With windows, each row's windows' logits (a regression's outputs) pooled, each label's
    on its own for multi_label."""
    problem_type = self.schema(run.options).problem_type
    if problem_type == "regression":
      return self.pooled_values(split, outputs["predictions"])
    return self.pooled_values(split, outputs["logits"], problem_type == "multi_label")

  def row_values(self, run, split, outputs, count):
    """Each row's probabilities (a regression's predictions): its record's, or with windows
    from its windows' pooled logits (softmax, or a sigmoid per label for multi_label)."""
    problem_type = self.schema(run.options).problem_type
    if not self.windows:
      key = "predictions" if problem_type == "regression" else "probabilities"
      return outputs[key][:count]
    pooled = self.row_logits(run, split, outputs)
    if problem_type == "single_label":
      return glue_windows.softmax(pooled)
    return pooled if problem_type == "regression" else 1 / (1 + np.exp(-pooled))

  def pooled_loss(self, run, examples, outputs):
    """eval_loss per row, as without windows: the model's loss (with its class weights) on
    each row's pooled logits, averaged over the rows."""
    schema = self.schema(run.options)
    pooled = self.row_logits(run, "eval", outputs).astype(np.float32)
    label_ids = np.array([own_features.label_ids(row.label, schema.problem_type, schema.labels)
                          for row in examples])
    losses = run.trainer.model.per_example_losses(
        pooled.reshape(len(examples), -1), {"label_ids": label_ids})["classification"]
    return float(np.mean(np.asarray(losses, np.float64)))

  def postprocess_eval(self, run, examples, result, outputs, records=None):
    schema, n = self.schema(run.options), len(examples)
    gold = [row.label for row in examples]
    values = self.row_values(run, "eval", outputs, n)
    if self.windows:  # the loss per row, as the metrics below
      result["eval_loss"] = self.pooled_loss(run, examples, outputs)
    if schema.problem_type == "regression":
      result.update(own_data.regression_metrics(values, gold))
    elif schema.problem_type == "multi_label":
      result.update(own_data.multi_label_metrics(
          values, [[name in g for name in schema.labels] for g in gold],
          schema.labels, self.threshold(run.options),
          missed=[len(set(g) - set(schema.labels)) for g in gold]))
    else:
      ids = [schema.labels.index(g) if g in schema.labels else -1 for g in gold]
      result.update(own_data.single_label_metrics(np.argmax(values, axis=-1), ids,
                                                  schema.labels))
    return result

  def postprocess_predict(self, run, examples, outputs, records=None):
    schema = self.schema(run.options)
    values = self.row_values(run, "predict", outputs, len(examples))
    path = run.output_path("predictions.jsonl")
    own_data.write_predictions(path, examples, schema.problem_type, schema.labels, values,
                               self.threshold(run.options), self.columns.id is not None)
    logging.info("Wrote %d predictions to %s", len(examples), path)

  def export_settings(self, run):
    """The schema, the columns it reads and the threshold the multi-label export applies."""
    return dict(self.schema(run.options).record(), pair=self.columns.text_b is not None,
                threshold=self.threshold(run.options), **self.export_window_settings())

  def export(self, run):
    from bert_tf.tasks.own_data.export import export_own_data
    o = run.options
    export_own_data(o.export_dir, run.serving_model(), o.vocab_file, o.do_lower_case,
                    o.max_seq_length, self.schema(o), self.columns.text_b is not None,
                    self.threshold(o), strip_accents=o.strip_accents, windows=self.windows)


_GLUE_BEST_METRICS = {"f1": "eval_f1", "matthews_corrcoef": "eval_mcc",
                      "pearson_spearman": "eval_pearson"}
_OWN_FILES = ("train_file", "eval_file", "predict_file")
_OWN_FLAGS = ("text_column", "text_b_column", "label_column", "id_column", "labels",
              "problem_type", "label_delimiter", "threshold", "class_weights")
_GLUE_FLAGS = ("data_dir", "write_glue_submission", "xnli_language")


def _windows_flags(long_document, doc_stride):
  return "--long_document=%s%s" % (long_document, " --doc_stride=%s" % doc_stride
                                   if long_document == "windows" else "")


def main(_):
  if any(FLAGS[name].value for name in _OWN_FILES):
    if FLAGS.task_name:
      raise UserInputError("--task_name=%s reads GLUE's files from --data_dir, --train_file/"
                           "--eval_file/--predict_file your own: pass one or the other."
                           % FLAGS.task_name)
    glue_only = [name for name in _GLUE_FLAGS if FLAGS[name].present]
    if glue_only:
      raise UserInputError("--%s is for --task_name runs, not your own files "
                           "(--train_file...); drop it." % glue_only[0])
    runner.main(OwnDataHooks, sys.modules[__name__], ["vocab_file", "bert_config_file",
                                                      "output_dir"])
    return
  own_only = [name for name in _OWN_FLAGS if FLAGS[name].present]
  if own_only:
    raise UserInputError("--%s is for your own files (--train_file, --eval_file, "
                         "--predict_file), not --task_name runs; drop it." % own_only[0])
  runner.main(ClassifierHooks, sys.modules[__name__],
              ["data_dir", "task_name", "vocab_file", "bert_config_file", "output_dir"])


if __name__ == "__main__":
  cli.run(main)
