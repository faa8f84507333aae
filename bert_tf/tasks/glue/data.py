"""GLUE / XNLI sentence(-pair) classification: processors, features and the task.

The original's four processors keep their exact quirks (they decide which rows
become examples): MRPC reads columns 3/4 and skips the header; CoLA train/dev have
no header (row 0 is data) while its test file has one; test labels are fixed
("0" for MRPC/CoLA, "contradiction" for MNLI); XNLI reads `multinli/multinli.train.<lang>.tsv`
for training and keeps only its language from `xnli.dev.tsv`, mapping "contradictory"
to "contradiction". TSVs are read with `quotechar=None`, so quotes stay literal.
The other GLUE tasks (SST-2, QQP, QNLI, RTE, WNLI, STS-B, MNLI mismatched) read
the GLUE file layouts the same way; STS-B is a regression task.

Features are the original `convert_single_example` (via bert_tf.packing), cached
as TFRecords with `input_ids`, `input_mask`, `segment_ids`, `label_ids`,
`is_real_example` like `file_based_convert_examples_to_features`.
"""

import csv
import dataclasses
import os

import numpy as np
from keras import ops

from bert_tf import example_codec, heads, packing, user_files
from bert_tf.errors import UserInputError
from bert_tf.tasks import base


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

# The dev-set metric GLUE reports for each task (besides accuracy).
GLUE_METRICS = {"cola": "matthews_corrcoef", "mrpc": "f1", "qqp": "f1", "sts-b": "pearson_spearman"}


def get_processor(task_name):
  name = task_name.lower()
  if name not in PROCESSORS:
    raise UserInputError("Task not found: %s. Known tasks: %s." %
                         (task_name, ", ".join(sorted(PROCESSORS))))
  return PROCESSORS[name]()


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer):
  """The original's features: (input_ids, input_mask, segment_ids, label_id, is_real)."""
  del ex_index  # the original used it only to log the first examples
  if isinstance(example, PaddingInputExample):
    zeros = [0] * max_seq_length
    return zeros, zeros, zeros, 0, 0
  if label_list is None:
    label_id = float(example.label)
  else:
    try:
      label_id = label_list.index(example.label)
    except ValueError:
      raise UserInputError("Example %s has label %r, which is not one of the task's labels %s." %
                           (example.guid, example.label, label_list)) from None
  tokens_a = tokenizer.tokenize(example.text_a)
  tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
  packed = packing.pack_tokens(tokens_a, tokens_b, max_seq_length, tokenizer)
  return packed.input_ids, packed.input_mask, packed.segment_ids, label_id, 1


def encode_features(features):
  """Serialized tf.train.Example of one feature tuple, in the original's layout."""
  input_ids, input_mask, segment_ids, label_id, is_real = features
  label = (example_codec.float_feature([label_id]) if isinstance(label_id, float)
           else example_codec.int64_feature([label_id]))
  return example_codec.encode_example([
      ("input_ids", example_codec.int64_feature(input_ids)),
      ("input_mask", example_codec.int64_feature(input_mask)),
      ("segment_ids", example_codec.int64_feature(segment_ids)),
      ("label_ids", label),
      ("is_real_example", example_codec.int64_feature([is_real])),
  ])


def feature_spec(max_seq_length, regression=False):
  """name -> (length, dtype) of the cached features, for bert_tf.input_pipeline."""
  import tensorflow as tf
  return {
      "input_ids": (max_seq_length, tf.int64),
      "input_mask": (max_seq_length, tf.int64),
      "segment_ids": (max_seq_length, tf.int64),
      "label_ids": (1, tf.float32 if regression else tf.int64),
      "is_real_example": (1, tf.int64),
  }


class ClassifierModel(base.TaskModel):
  """BertModel plus run_classifier's head (logits from the pooled output)."""

  def __init__(self, config, use_one_hot_embeddings=False, dtype=None, num_labels=2, **kwargs):
    self._num_labels = num_labels
    super().__init__(config, use_one_hot_embeddings, dtype=dtype, **kwargs)

  def create_heads(self):
    self.classifier = heads.ClassificationHead(self.config, self._num_labels, name="classifier",
                                               dtype=self.dtype_policy)
    return [self.classifier]

  def call(self, features, training=False):
    pooled = self.encode(features, training)["pooled_output"]
    return self.classifier(pooled, training=training)


class ClassificationTask(base.Task):
  """Cross-entropy (or squared error for regression), averaged over real examples."""

  model_class = ClassifierModel
  loss_epsilons = {"classification": 0.0}

  def __init__(self, config, num_labels, regression=False, **options):
    super().__init__(config, **options)
    self.num_labels = 1 if regression else num_labels
    self.regression = regression

  def model_args(self):
    return {"num_labels": self.num_labels}

  def loss_weights(self, features):
    return {"classification": base.real_example_weights(features)}

  def per_example_losses(self, logits, features):
    if self.regression:
      labels = ops.reshape(ops.cast(features["label_ids"], "float32"), (-1,))
      loss = ops.square(ops.reshape(logits, (-1,)) - labels)
    else:
      _, loss = heads.mean_cross_entropy(ops.log_softmax(logits, axis=-1), features["label_ids"])
    return {"classification": loss}

  def metrics(self, logits, features, losses, weights):
    """eval_loss and eval_accuracy, weighted by is_real_example as the original metric_fn."""
    weights = weights["classification"]
    sums = {"eval_loss": (ops.sum(weights * losses["classification"]), ops.sum(weights))}
    if not self.regression:
      sums["eval_accuracy"] = base.accuracy_sum(logits, features["label_ids"], weights)
    return sums

  def predictions(self, logits, features):
    """Per-example outputs for test_results.tsv and the GLUE metrics."""
    if self.regression:
      return {"predictions": ops.reshape(logits, (-1,))}
    return {"probabilities": ops.softmax(logits, axis=-1)}


def glue_metrics(task_name, predictions, labels):
  """The GLUE dev metric of the task from all predictions (numpy)."""
  metric = GLUE_METRICS.get(task_name.lower())
  if metric == "f1":
    tp = float(np.sum((predictions == 1) & (labels == 1)))
    fp = float(np.sum((predictions == 1) & (labels != 1)))
    fn = float(np.sum((predictions != 1) & (labels == 1)))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"eval_f1": f1, "eval_precision": precision, "eval_recall": recall}
  if metric == "matthews_corrcoef":
    tp = float(np.sum((predictions == 1) & (labels == 1)))
    tn = float(np.sum((predictions == 0) & (labels == 0)))
    fp = float(np.sum((predictions == 1) & (labels == 0)))
    fn = float(np.sum((predictions == 0) & (labels == 1)))
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return {"eval_mcc": (tp * tn - fp * fn) / denominator if denominator else 0.0}
  if metric == "pearson_spearman":
    return {"eval_pearson": _pearson(predictions, labels),
            "eval_spearman": _pearson(_ranks(predictions), _ranks(labels))}
  return {}


def _pearson(x, y):
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  x, y = x - x.mean(), y - y.mean()
  denominator = np.sqrt((x * x).sum() * (y * y).sum())
  return float((x * y).sum() / denominator) if denominator else 0.0


def _ranks(values):
  """Average ranks (ties share the mean rank), as Spearman's rho uses."""
  values = np.asarray(values, np.float64)
  order = np.argsort(values, kind="mergesort")
  ranks = np.empty(len(values))
  sorted_values = values[order]
  start = 0
  while start < len(values):
    end = start
    while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
      end += 1
    ranks[order[start:end + 1]] = (start + end) / 2.0 + 1
    start = end + 1
  return ranks
