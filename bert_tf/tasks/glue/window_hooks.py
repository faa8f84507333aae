"""run_classifier's --long_document=windows as runner hooks, shared by the GLUE tasks
(glue/hooks.py) and your own files (own_data/hooks.py): the records of each example's windows
(or, training by document, of its first windows), the steps, the log, the stored settings and
the pooling (the windows themselves: glue/windows.py)."""

import random

from absl import logging

from bert_tf import runner
from bert_tf.checkpoints import run_folder
from bert_tf.tasks.glue import windows as glue_windows

# How a split's records hold an example (WindowHooks.layout).
TRUNCATED = "truncated"  # one record, cut to --max_seq_length (the original's)
WINDOWS = "windows"  # a record per window
DOCUMENT = "document"  # one record holding its first max_train_windows windows end to end


class WindowHooks(runner.TaskHooks):
  """The hooks of a classifier whose examples may be read as windows. A subclass gives
  `windows` (WindowOptions, None with truncate) and `regression`, and encodes an example's
  windows (`window_records`, `document_record`) and its truncated record (`encode_examples`).
  Everything here is computed from the flags, the options and the examples: nothing is kept
  between hooks."""

  trained_by = None  # the setting naming the data of a training run of these hooks
  multi_label = False  # each label's logit pools on its own (own data's multi-label runs)

  def __init__(self, task_flags, options, text_pair):
    self.flags = task_flags
    self.options = options
    if task_flags.long_document == "windows":
      self.min_seq_length = glue_windows.min_seq_length(text_pair)
      self.one_record_per_example = False  # a long example gives several windows

  def presence(self):
    """The index of the label `any` reads as the "no" because it holds most training rows
    (None: no such label; windows.UNKNOWN: not worked out, as for the GLUE tasks)."""
    return glue_windows.UNKNOWN

  def layout(self, split):
    """How `split`'s records hold an example: TRUNCATED, WINDOWS or DOCUMENT (what `encode`
    writes, `describe` counts and `record_length` measures)."""
    if not self.windows:
      return TRUNCATED
    if split == "train" and self.windows.by_document:
      return DOCUMENT
    if split == "train" and self.windows.trains_truncated:
      return TRUNCATED
    return WINDOWS

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
    trained = windows_flags(trained_on, recorded.get("doc_stride"))
    now = windows_flags(self.flags.long_document,
                        self.windows.doc_stride if self.windows else None)
    if now != trained:
      log = logging.warning if trained_on == "windows" else logging.info
      log("The weights in %s were trained with %s; this run reads its texts with %s (allowed; "
          "pass %s to read them as training did).", source, trained, now, trained)

  def encode(self, run, split, examples):
    """The records of the split's layout: encode_examples' (truncated), every window of every
    example, or a record per training document."""
    layout = self.layout(split)
    if layout == DOCUMENT:
      return (self.document_record(run, example) for example in examples)
    if layout == WINDOWS:
      return self.encode_windows(run, split, examples)
    return self.encode_examples(run, split, examples)

  def encode_examples(self, run, split, examples):
    raise NotImplementedError

  def window_records(self, run, split, example):
    """The serialized records of each window of `example`, in order."""
    raise NotImplementedError

  def document_record(self, run, example):
    """The serialized record of a training document: its first max_train_windows windows (the
    input's shuffle mixes documents as it mixes truncated examples)."""
    raise NotImplementedError

  def padding_record(self, run):
    """A record that is no example, to pad eval windows to whole TPU batches (None: none)."""
    return None

  def window_counts(self, run, examples):
    """The windows of each example, as encode_windows writes them (all of a training
    document's, however many it trains on)."""
    return [glue_windows.count_windows(example, run.options.max_seq_length, run.tokenizer,
                                       self.windows.doc_stride) for example in examples]

  def encode_windows(self, run, split, examples):
    """Training windows are written example by example in a seeded random order: the input's
    100-record shuffle buffer (the original's) cannot mix a file whose neighbours are windows of
    one document, and a run shorter than an epoch would see only the file's first documents."""
    if split == "train":
      examples = list(examples)
      random.Random(run.options.shuffle_seed).shuffle(examples)
    written = 0
    for example in examples:
      records = self.window_records(run, split, example)
      written += len(records)
      yield from records
    padding = self.padding_record(run) if split != "train" and (
        run.options.strategy == "tpu") else None
    if padding is not None:  # whole batches of windows
      yield from [padding] * (-written % run.options.batch_size(split))

  def train_steps(self, run, examples):
    """Steps over documents, or with --window_training=window over windows (a batch is
    windows, not examples)."""
    if not (self.windows and examples):
      return super().train_steps(run, examples)
    counts = self.window_counts(run, examples)
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
    for risk in glue_windows.risks(self.windows, steps[0], self.regression, self.multi_label,
                                   self.presence()):
      logging.warning("--long_document=windows may lose to truncate here: %s See "
                      "docs/runners.md.", risk)
    return steps

  def describe(self, run, split, examples, records=None):
    """The examples, and with windows the windows they gave (counted from the examples:
    `records`, what record_files wrote, is not needed)."""
    layout = self.layout(split)
    if layout == TRUNCATED:
      return "%d examples" % len(examples)
    return glue_windows.describe(self.window_counts(run, examples),
                                 self.windows.max_train_windows if layout == DOCUMENT else None)

  def record_length(self, run, split):
    """The inputs' length in `split`'s records: a training document's windows end to end."""
    if self.layout(split) == DOCUMENT:
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
    if self.windows.no_label:
      settings["window_no_label"] = self.windows.no_label
    if self.windows.by_document:
      settings["max_train_windows"] = self.windows.max_train_windows
    return settings

  def export_window_settings(self):
    """How serving_default cuts and pools a long text."""
    if not self.windows:
      return {}
    settings = {"doc_stride": self.windows.doc_stride, "window_pooling": self.windows.pooling}
    if self.windows.no_label:
      settings["window_no_label"] = self.windows.no_label
    return settings

  def pooled_values(self, run, examples, values, multi_label=False):
    """Per example, its windows' rows of `values` (logits; a regression's outputs) pooled
    (`multi_label`: each label's on its own); rows past the examples' windows (TPU padding,
    batch padding) are dropped."""
    counts = self.window_counts(run, examples)
    return glue_windows.pool(values[:sum(counts)], counts, self.windows.pooling, multi_label,
                             self.windows.no_label)


def windows_flags(long_document, doc_stride):
  """The flags that read texts as a run did, for the log."""
  return "--long_document=%s%s" % (long_document, " --doc_stride=%s" % doc_stride
                                   if long_document == "windows" else "")
