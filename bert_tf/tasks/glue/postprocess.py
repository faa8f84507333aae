"""GLUE dev-set metrics from all of a run's predictions: F1, Matthews correlation, Pearson and
Spearman, computed as GLUE reports them for each task; and the GLUE submission file."""

from absl import logging
import numpy as np
import tensorflow as tf

# The dev-set metric GLUE reports for each task (besides accuracy).
GLUE_METRICS = {"cola": "matthews_corrcoef", "mrpc": "f1", "qqp": "f1", "sts-b": "pearson_spearman"}


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


# The file name of each task's predictions in a GLUE submission (<name>.tsv).
SUBMISSION_NAMES = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC", "sts-b": "STS-B",
                    "qqp": "QQP", "mnli": "MNLI-m", "mnli-mm": "MNLI-mm", "qnli": "QNLI",
                    "rte": "RTE", "wnli": "WNLI", "xnli": "XNLI"}


def submission_name(task_name):
  """<TASK>.tsv, the name GLUE's submission expects for the task's predictions."""
  return SUBMISSION_NAMES.get(task_name, task_name.upper()) + ".tsv"


def write_submission(path, values, label_list):
  """GLUE's submission format: `index<TAB>prediction` per example, the label of the highest
  probability of each row of `values` (regression, `label_list` None: its score, 3 places)."""
  with tf.io.gfile.GFile(path, "w") as writer:
    writer.write("index\tprediction\n")
    for index, row in enumerate(values):
      prediction = ("%.3f" % row[0] if label_list is None
                    else label_list[int(np.argmax(row))])
      writer.write("%d\t%s\n" % (index, prediction))
  logging.info("Wrote the GLUE submission file %s", path)


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
