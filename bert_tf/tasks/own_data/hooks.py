"""run_classifier's hooks for your own labeled files (--train_file, --eval_file,
--predict_file): single-label, multi-label or regression, label names kept with the run, long
texts as windows (glue/window_hooks.py)."""

import dataclasses

from absl import logging
import numpy as np

from bert_tf import runner
from bert_tf.errors import UserInputError
from bert_tf.tasks import own_data
from bert_tf.tasks.glue import windows as glue_windows
from bert_tf.tasks.glue.window_hooks import WindowHooks
from bert_tf.tasks.own_data import data as own_data_files
from bert_tf.tasks.own_data import features as own_features
from bert_tf.tasks.own_data import labels as own_labels


class OwnDataHooks(WindowHooks):
  """Your own labeled files: single-label, multi-label or regression, label names kept with
  the run (bert_tf/tasks/own_data), long texts as windows with --long_document=windows (a
  multi-label run pools each label's logit).

  The schema (problem type, labels, class weights, presence label) is decided when the hooks
  are built, from the training file or the trained model, as every later hook reads it."""

  eval_with_predictions = True  # the metrics need each row's prediction
  trained_by = "problem_type"
  FILES = {"train": "train_file", "eval": "eval_file", "predict": "predict_file"}

  def __init__(self, task_flags, options):
    f = task_flags
    columns = own_data.Columns(f.text_column, f.text_b_column, f.label_column, f.id_column,
                               f.label_delimiter)
    super().__init__(task_flags, options, columns.text_b is not None)
    self.columns = columns
    own_data_files.check_distinct_columns(columns)
    self.given = own_data_files.from_flag(f.labels)
    self.check_files(options)
    # The training file is read once: its rows decide the schema and are the examples.
    self._training_rows = self.read_rows("train") if options.do_train else None
    self._schema = self.read_schema()

  def check_files(self, options):
    """The files each action needs are given, in a format read from their extension, and the
    file flags are in range (before the schema is read from them)."""
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

  def check(self, options):
    problem = self.window_problem()
    glue_windows.check_flags(self.flags, options, "this run", self.columns.text_b is not None,
                             problem == "regression", problem == "multi_label")
    if problem == "single_label" and self.windows.pooling == "any" and (
        self.presence() is None and not self.given):
      labels = self.schema().labels
      logging.warning("--window_pooling=any reads the first label, %r, as the 'no': a row is "
                      "another label when any window says so. Labels are sorted unless "
                      "--labels orders them; for a topic, pass --labels=<the no label>,... "
                      "(labels now: %s).", labels[0], ",".join(labels))
    if not options.do_train:
      self.warn_if_trained_otherwise(options)

  def window_problem(self):
    """The problem type where the windows depend on it (None elsewhere): the default pooling
    (any for multi_label and a presence label), and whether `any` can pool (not a
    regression)."""
    if self.flags.long_document == "windows" and self.flags.window_pooling in (None, "any"):
      return self.schema().problem_type
    return None

  def presence(self):
    """The index of the run's presence label (own_data.labels.presence_label), which `any`
    reads as the "no"; None without one."""
    if self.window_problem() != "single_label" or self.schema().no_label is None:
      return None
    return self.schema().labels.index(self.schema().no_label)

  @property
  def windows(self):
    """WindowOptions with --long_document=windows (None: truncate)."""
    return glue_windows.window_options(self.flags, self.multi_label, self.presence())

  @property
  def multi_label(self):
    return self.window_problem() == "multi_label"

  @property
  def regression(self):
    return self.schema().problem_type == "regression"

  def path(self, split):
    return getattr(self.flags, self.FILES[split])

  def rows(self, split):
    """The rows of the split's file, labels as the file holds them (the training file's as
    read when the hooks were built)."""
    if split == "train" and self._training_rows is not None:
      return self._training_rows
    return self.read_rows(split)

  def read_rows(self, split):
    return own_data_files.read_rows(self.path(split), self.columns, "--" + self.FILES[split],
                                    split != "predict")

  def read_schema(self):
    """Problem type, labels and class weights: the training file's, or the trained model's
    (a run that does not train fails here when there are no labels to predict with)."""
    f, o, pair = self.flags, self.options, self.columns.text_b is not None
    if o.do_train:
      schema = own_labels.from_training(self.path("train"), self.rows("train"), f.problem_type,
                                        self.given, f.label_delimiter, f.class_weights, pair)
    else:
      schema = own_labels.from_trained(o.output_dir, o.init_checkpoint, f.problem_type,
                                       self.given, pair)
    if not schema.class_weights:
      if f.correct_class_weights is not None:
        logging.warning("--correct_class_weights does nothing here: %s.",
                        "this run trains without --class_weights" if o.do_train
                        else "the model was trained without class weights")
      return schema
    # --correct_class_weights, else the trained model's (a run that does not train), else on.
    correct = f.correct_class_weights
    if correct is None:
      correct = True if o.do_train else schema.correct_weights
    logging.info("Class weights %s at evaluation, prediction and export (%s).",
                 "taken back off the logits" if correct else "kept in the probabilities",
                 "--correct_class_weights" if f.correct_class_weights is not None
                 else "the default" if o.do_train else "as the model was trained")
    return dataclasses.replace(schema, correct_weights=bool(correct))

  def schema(self):
    """The run's schema, decided when the hooks were built."""
    return self._schema

  def read_examples(self, run, split):
    rows, schema = self.rows(split), self.schema()
    if split == "predict":
      return [dataclasses.replace(row, label=None) for row in rows]
    rows = own_data_files.with_labels(self.path(split), rows, schema.problem_type,
                                      self.flags.label_delimiter)
    if split == "eval":
      own_labels.check_known(self.path(split), rows, schema, self.given)
    return rows

  def encode_examples(self, run, split, examples):
    schema = self.schema()
    for row in examples:
      yield own_data.encode_row(row, run.options.max_seq_length, run.tokenizer,
                                schema.problem_type, schema.labels, split != "predict")

  def window_records(self, run, split, example):
    schema = self.schema()
    return own_features.encode_windows(example, run.options.max_seq_length, run.tokenizer,
                                       schema.problem_type, schema.labels, split != "predict",
                                       self.windows.doc_stride)

  def document_record(self, run, example):
    schema, windows = self.schema(), self.windows
    record, _ = own_features.encode_document(
        example, run.options.max_seq_length, run.tokenizer, schema.problem_type, schema.labels,
        windows.doc_stride, windows.max_train_windows)
    return record

  def feature_spec(self, run, split):
    schema = self.schema()
    return own_data.feature_spec(self.record_length(run, split), schema.problem_type,
                                 schema.num_labels)

  def make_task(self, run):
    schema = self.schema()
    return own_data.OwnDataTask(run.config, schema.num_labels, schema.problem_type,
                                schema.class_weights, bool(schema.correct_weights),
                                windows=self.windows,
                                max_seq_length=run.options.max_seq_length,
                                **run.options.task_options())

  def settings(self, run):
    """The problem type, labels and class weights shape the head and its loss; how a
    training run cuts and pools its windows, its data."""
    return dict(self.schema().record(), **self.window_settings(run))

  def head_labels(self, run):
    labels = self.schema().labels
    return None if labels is None else ("classifier", labels, "--labels")

  def best_metric(self, run):
    """Single-label accuracy (what GLUE reports, defined on any eval file), multi-label
    micro-F1, regression Pearson (STS-B's)."""
    return {"single_label": "eval_accuracy", "multi_label": "eval_micro_f1",
            "regression": "eval_pearson"}[self.schema().problem_type]

  def threshold(self):
    """--threshold, else the one the model was trained with (a run that does not train), else
    the default: predictions.jsonl and the export name the same labels as at training."""
    if self.flags.threshold is not None:
      return self.flags.threshold
    schema = self.schema()
    if not self.options.do_train and schema.threshold is not None:
      return schema.threshold
    return own_labels.DEFAULT_THRESHOLD

  def on_start(self, run):
    if run.options.do_train and run.trainer.chief:
      own_labels.write(run.options.output_dir, self.schema(), self.threshold())

  def row_logits(self, run, examples, outputs):
    """With windows, each row's windows' logits (a regression's outputs) pooled, each label's
    on its own for multi_label."""
    problem_type = self.schema().problem_type
    if problem_type == "regression":
      return self.pooled_values(run, examples, outputs["predictions"])
    return self.pooled_values(run, examples, outputs["logits"], problem_type == "multi_label")

  def row_values(self, run, examples, outputs):
    """Each row's probabilities (a regression's predictions): its record's, or with windows
    from its windows' pooled logits (softmax, or a sigmoid per label for multi_label)."""
    problem_type = self.schema().problem_type
    if not self.windows:
      key = "predictions" if problem_type == "regression" else "probabilities"
      return outputs[key][:len(examples)]
    pooled = self.row_logits(run, examples, outputs)
    if problem_type == "single_label":
      return glue_windows.softmax(pooled)
    return pooled if problem_type == "regression" else 1 / (1 + np.exp(-pooled))

  def pooled_loss(self, run, examples, outputs):
    """eval_loss per row, as without windows: the model's eval loss (its class weights
    unless it corrects them) on each row's pooled logits, averaged over the rows."""
    schema = self.schema()
    pooled = self.row_logits(run, examples, outputs).astype(np.float32)
    label_ids = np.array([own_features.label_ids(row.label, schema.problem_type, schema.labels)
                          for row in examples])
    losses = run.trainer.model.eval_losses(pooled.reshape(len(examples), -1),
                                           {"label_ids": label_ids})["classification"]
    return float(np.mean(np.asarray(losses, np.float64)))

  def postprocess_eval(self, run, examples, result, outputs, records=None):
    schema = self.schema()
    gold = [row.label for row in examples]
    values = self.row_values(run, examples, outputs)
    if self.windows:  # the loss per row, as the metrics below
      result["eval_loss"] = self.pooled_loss(run, examples, outputs)
    if schema.problem_type == "regression":
      result.update(own_data.regression_metrics(values, gold))
    elif schema.problem_type == "multi_label":
      result.update(own_data.multi_label_metrics(
          values, [[name in g for name in schema.labels] for g in gold],
          schema.labels, self.threshold(),
          missed=[len(set(g) - set(schema.labels)) for g in gold]))
    else:
      ids = [schema.labels.index(g) if g in schema.labels else -1 for g in gold]
      result.update(own_data.single_label_metrics(np.argmax(values, axis=-1), ids,
                                                  schema.labels))
    return result

  def postprocess_predict(self, run, examples, outputs, records=None):
    schema = self.schema()
    values = self.row_values(run, examples, outputs)
    path = run.output_path("predictions.jsonl")
    own_data.write_predictions(path, examples, schema.problem_type, schema.labels, values,
                               self.threshold(), self.columns.id is not None)
    logging.info("Wrote %d predictions to %s", len(examples), path)

  def export_settings(self, run):
    """The schema, the columns it reads and the threshold the multi-label export applies."""
    return dict(self.schema().record(), pair=self.columns.text_b is not None,
                threshold=self.threshold(), **self.export_window_settings())

  def export(self, run):
    from bert_tf.tasks.own_data.export import export_own_data
    o = run.options
    export_own_data(o.export_dir, run.serving_model(), o.vocab_file, o.do_lower_case,
                    o.max_seq_length, self.schema(), self.columns.text_b is not None,
                    self.threshold(), strip_accents=o.strip_accents, windows=self.windows)
