"""GLUE / XNLI sentence(-pair) classification data: the processors that read the task files.

The original's four processors keep their exact quirks (they decide which rows
become examples): MRPC reads columns 3/4 and skips the header; CoLA train/dev have
no header (row 0 is data) while its test file has one; test labels are fixed
("0" for MRPC/CoLA, "contradiction" for MNLI); XNLI reads `multinli/multinli.train.<lang>.tsv`
for training and keeps only its language from `xnli.dev.tsv`, mapping "contradictory"
to "contradiction". TSVs are read with `quotechar=None`, so quotes stay literal.
The other GLUE tasks (SST-2, QQP, QNLI, RTE, WNLI, STS-B, MNLI mismatched) read
the GLUE file layouts the same way; STS-B is a regression task.
"""

import csv
import dataclasses
import os

from bert_tf.checkpoints import head_labels
from bert_tf.errors import UserInputError
from bert_tf.utils import user_files


@dataclasses.dataclass
class InputExample:
  guid: str
  text_a: str
  text_b: str = None
  label: object = None


class PaddingInputExample:
  """A fake example that pads eval/predict sets to whole batches (TPU); is_real_example=0."""


def read_tsv(input_file):
  """Rows of a tab-separated file, quotes kept literal (csv with quotechar=None)."""
  text = user_files.read_text(input_file, "Data file", "(check --data_dir and --task_name)")
  lines = text.split("\n")
  lines = [l + "\n" for l in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
  return list(csv.reader(lines, delimiter="\t", quotechar=None))


class DataProcessor:
  """Reads one task's train/dev/test files into InputExamples."""

  labels = None  # list of label strings; None for regression
  train_file, dev_file, test_file = "train.tsv", "dev.tsv", "test.tsv"
  is_pair = True
  # text_a is a question and text_b the passage asked about (SQuAD-style), so windows over
  # text_a (--long_document=windows) would cut the short side.
  question_first = False

  def get_train_examples(self, data_dir):
    return self._examples(data_dir, self.train_file, "train")

  def get_dev_examples(self, data_dir):
    return self._examples(data_dir, self.dev_file, "dev")

  def get_test_examples(self, data_dir):
    return self._examples(data_dir, self.test_file, "test")

  def get_labels(self):
    return list(self.labels)

  def _examples(self, data_dir, file_name, set_type):
    path = os.path.join(data_dir, file_name)
    examples = []
    for i, line in enumerate(read_tsv(path)):
      try:
        example = self._create_example(i, line, set_type)
      except IndexError:
        raise UserInputError("%s row %d has %d column(s), fewer than this task's layout "
                             "needs." % (path, i + 1, len(line))) from None
      except ValueError as e:  # STS-B's score column
        raise UserInputError("%s row %d: %s." % (path, i + 1, e)) from None
      if example is not None:
        self._check_label(example.label, path, i + 1)
        examples.append(example)
    return examples

  def _check_label(self, label, path, row):
    """A label outside the task's list stops here, naming the row (the original crashed later
    with a KeyError while writing features). Labels are compared as written, like the original."""
    if self.labels is None or label in self.labels:
      return
    hint = (" (it has surrounding whitespace; remove it)" if label.strip() in self.labels
            else "")
    raise UserInputError("%s row %d has label %r, which is not one of the task's labels %s%s."
                         % (path, row, label, self.labels, hint))

  def _create_example(self, i, line, set_type):
    raise NotImplementedError


class MrpcProcessor(DataProcessor):
  labels = ["0", "1"]

  def _create_example(self, i, line, set_type):
    if i == 0:
      return None
    label = "0" if set_type == "test" else line[0]
    return InputExample("%s-%s" % (set_type, i), line[3], line[4], label)


class ColaProcessor(DataProcessor):
  labels = ["0", "1"]
  is_pair = False

  def _create_example(self, i, line, set_type):
    if set_type == "test":
      if i == 0:
        return None
      return InputExample("%s-%s" % (set_type, i), line[1], None, "0")
    return InputExample("%s-%s" % (set_type, i), line[3], None, line[1])


class MnliProcessor(DataProcessor):
  labels = ["contradiction", "entailment", "neutral"]
  dev_file, test_file = "dev_matched.tsv", "test_matched.tsv"
  dev_set_name = "dev_matched"

  def get_dev_examples(self, data_dir):
    return self._examples(data_dir, self.dev_file, self.dev_set_name)

  def _create_example(self, i, line, set_type):
    if i == 0:
      return None
    label = "contradiction" if set_type == "test" else line[-1]
    return InputExample("%s-%s" % (set_type, line[0]), line[8], line[9], label)


class MnliMismatchedProcessor(MnliProcessor):
  dev_file, test_file = "dev_mismatched.tsv", "test_mismatched.tsv"
  dev_set_name = "dev_mismatched"


class XnliProcessor(DataProcessor):
  labels = ["contradiction", "entailment", "neutral"]

  def __init__(self, language="zh"):
    self.language = language

  def get_train_examples(self, data_dir):
    return self._examples(data_dir, os.path.join(
        "multinli", "multinli.train.%s.tsv" % self.language), "train")

  def get_dev_examples(self, data_dir):
    return self._examples(data_dir, "xnli.dev.tsv", "dev")

  def get_test_examples(self, data_dir):
    raise UserInputError("The xnli task has no test set in the original (use --do_eval).")

  def _create_example(self, i, line, set_type):
    if i == 0:
      return None
    if set_type == "train":
      label = "contradiction" if line[2] == "contradictory" else line[2]
      return InputExample("train-%d" % i, line[0], line[1], label)
    if line[0] != self.language:
      return None
    return InputExample("dev-%d" % i, line[6], line[7], line[1])


class Sst2Processor(DataProcessor):
  labels = ["0", "1"]
  is_pair = False

  def _create_example(self, i, line, set_type):
    if i == 0:
      return None
    if set_type == "test":
      return InputExample("test-%s" % line[0], line[1], None, "0")
    return InputExample("%s-%d" % (set_type, i), line[0], None, line[1])


class QqpProcessor(DataProcessor):
  labels = ["0", "1"]

  def _create_example(self, i, line, set_type):
    if i == 0:
      return None
    if set_type == "test":
      return InputExample("test-%s" % line[0], line[1], line[2], "0")
    return InputExample("%s-%s" % (set_type, line[0]), line[3], line[4], line[5])


class _IndexedPairProcessor(DataProcessor):
  """index, text_a, text_b, label (QNLI, RTE, WNLI); test files have no label column."""

  def _create_example(self, i, line, set_type):
    if i == 0:
      return None
    label = self.labels[0] if set_type == "test" else line[3]
    return InputExample("%s-%s" % (set_type, line[0]), line[1], line[2], label)


class QnliProcessor(_IndexedPairProcessor):
  labels = ["entailment", "not_entailment"]
  question_first = True


class RteProcessor(_IndexedPairProcessor):
  labels = ["entailment", "not_entailment"]


class WnliProcessor(_IndexedPairProcessor):
  labels = ["0", "1"]


class StsbProcessor(DataProcessor):
  labels = None  # regression: the label is the similarity score

  def get_labels(self):
    return None

  def _create_example(self, i, line, set_type):
    if i == 0:
      return None
    score = 0.0 if set_type == "test" else float(line[-1])
    return InputExample("%s-%s" % (set_type, line[0]), line[7], line[8], score)


PROCESSORS = {
    "cola": ColaProcessor, "mnli": MnliProcessor, "mnli-mm": MnliMismatchedProcessor,
    "mrpc": MrpcProcessor, "xnli": XnliProcessor, "sst-2": Sst2Processor, "qqp": QqpProcessor,
    "qnli": QnliProcessor, "rte": RteProcessor, "wnli": WnliProcessor, "sts-b": StsbProcessor,
}


# Tasks whose labels mean what another's do: MNLI's mismatched dev set and XNLI (MNLI's
# labels, in 15 languages), so a head fine-tuned on one of them reads the others.
_SAME_LABELS = (frozenset({"mnli", "mnli-mm", "xnli"}),)


def task_labels(task_name, labels):
  """`labels` (None: regression) as a head_labels.TaskLabels of `task_name`: a head loaded
  from a checkpoint is read by its label names only when it was fine-tuned for this task."""
  name = task_name.lower()
  same = next((group for group in _SAME_LABELS if name in group), ())
  return head_labels.TaskLabels(labels, name, same, known=PROCESSORS)


def get_processor(task_name):
  name = task_name.lower()
  if name not in PROCESSORS:
    raise UserInputError("Task not found: %s. Known tasks: %s." %
                         (task_name, ", ".join(sorted(PROCESSORS))))
  return PROCESSORS[name]()
