"""run_classifier's hooks for a GLUE / XNLI task (--task_name): the original's processors,
features and metrics, TPU padding to whole batches, the GLUE submission file, and long texts
as windows (window_hooks.py)."""

import numpy as np

from bert_tf import runner
from bert_tf.errors import UserInputError
from bert_tf.tasks import glue
from bert_tf.tasks.glue import postprocess
from bert_tf.tasks.glue import windows as glue_windows
from bert_tf.tasks.glue.window_hooks import WindowHooks

_BEST_METRICS = {"f1": "eval_f1", "matthews_corrcoef": "eval_mcc",
                 "pearson_spearman": "eval_pearson"}


class ClassifierHooks(WindowHooks):
  """A GLUE / XNLI task: the original's processors, features and metrics."""

  eval_with_predictions = True  # the GLUE metrics need each example's prediction
  trained_by = "task_name"

  def __init__(self, task_flags, options):
    processor = glue.get_processor(task_flags.task_name)
    if isinstance(processor, glue.XnliProcessor):
      processor = glue.XnliProcessor(task_flags.xnli_language)
    super().__init__(task_flags, options, processor.is_pair)
    self.task_name = task_flags.task_name.lower()
    self.processor = processor
    self.label_list = processor.get_labels()
    self.regression = self.label_list is None
    self.windows = glue_windows.window_options(task_flags)

  def check(self, options):
    if self.flags.long_document == "windows" and self.processor.question_first:
      raise UserInputError("--long_document=windows cuts text_a into windows, but %s's text_a "
                           "is a question and its long text is text_b (SQuAD-style); use "
                           "--long_document=truncate, or run_squad.py for long passages."
                           % self.task_name.upper())
    glue_windows.check_flags(self.flags, options, self.task_name.upper(), self.processor.is_pair,
                             self.regression)
    if not options.do_train:
      self.warn_if_trained_otherwise(options)

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

  def window_records(self, run, split, example):
    return [glue.encode_features(f) for f in glue_windows.example_windows(
        example, self.label_list, run.options.max_seq_length, run.tokenizer,
        self.windows.doc_stride)]

  def document_record(self, run, example):
    features, _ = glue_windows.document_features(
        example, self.label_list, run.options.max_seq_length, run.tokenizer,
        self.windows.doc_stride, self.windows.max_train_windows)
    return glue.encode_features(features)

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
    return _BEST_METRICS.get(glue.GLUE_METRICS.get(self.task_name), "eval_accuracy")

  def pooled(self, run, examples, outputs):
    """Per example, its windows' logits (regression: outputs) pooled."""
    return self.pooled_values(run, examples,
                              outputs["predictions" if self.regression else "logits"])

  def postprocess_eval(self, run, examples, result, outputs, records=None):
    if self.windows:
      labels = np.array([glue.label_id_of(e, self.label_list) for e in examples])
      pooled = self.pooled(run, examples, outputs)
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
      pooled = self.pooled(run, examples, outputs)
      values = pooled[:, None] if self.regression else glue_windows.softmax(pooled)
    else:
      values = outputs["predictions"][:, None] if self.regression else outputs["probabilities"]
      values = values[:len(examples)]
    runner.write_test_results(run.output_path("test_results.tsv"), values)
    if self.flags.write_glue_submission:
      postprocess.write_submission(run.output_path(postprocess.submission_name(self.task_name)),
                                   values, self.label_list)

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
