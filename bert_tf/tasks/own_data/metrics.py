"""The eval_results.txt metrics of each problem type, from all of a run's predictions (numpy).

A label with no gold rows and no predicted rows has precision, recall and F1 0 (scikit-learn's
`zero_division=0`). Single-label macro-F1 averages over the labels that occur in the gold labels
or the predictions (scikit-learn's default); multi-label macro-F1 over every label.
"""

import numpy as np

from bert_tf.tasks.glue.postprocess import glue_metrics


def _prf(tp, fp, fn):
  """(precision, recall, F1) of the counts, 0 where a ratio has nothing to divide by."""
  precision = tp / (tp + fp) if tp + fp else 0.0
  recall = tp / (tp + fn) if tp + fn else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return precision, recall, f1


def _per_label(result, label, tp, fp, fn):
  precision, recall, f1 = _prf(float(tp), float(fp), float(fn))
  result.update({"eval_precision_%s" % label: precision, "eval_recall_%s" % label: recall,
                 "eval_f1_%s" % label: f1})
  return f1


def single_label_metrics(predicted, gold, labels):
  """Accuracy, macro-F1 and per-label P/R/F1 of predicted vs gold label ids (gold -1: a label
  not among `labels`, always wrong)."""
  predicted, gold = np.asarray(predicted), np.asarray(gold)
  result = {"eval_accuracy": float(np.mean(predicted == gold)) if len(gold) else 0.0}
  f1s = []
  for index, label in enumerate(labels):
    tp = np.sum((predicted == index) & (gold == index))
    fp = np.sum((predicted == index) & (gold != index))
    fn = np.sum((predicted != index) & (gold == index))
    f1 = _per_label(result, label, tp, fp, fn)
    if np.any(gold == index) or np.any(predicted == index):
      f1s.append(f1)
  result["eval_macro_f1"] = float(np.mean(f1s)) if f1s else 0.0
  return result


def multi_label_metrics(probabilities, gold, labels, threshold, missed=None):
  """Micro- and macro-F1, per-label P/R/F1 and exact match of the labels whose probability
  is over `threshold` vs the gold [rows, labels] 0/1 matrix. `missed`: per row, how many of its
  gold labels are not among `labels` (the model cannot predict them): each is a false negative
  of the micro-F1, and such a row is never an exact match."""
  predicted = np.asarray(probabilities) > threshold
  gold = np.asarray(gold) > 0.5
  missed = np.zeros(len(gold), np.int64) if missed is None else np.asarray(missed, np.int64)
  exact = np.all(predicted == gold, axis=-1) & (missed == 0)
  result = {"eval_exact_match": float(np.mean(exact)) if len(gold) else 0.0}
  tp = np.sum(predicted & gold, axis=0)
  fp = np.sum(predicted & ~gold, axis=0)
  fn = np.sum(~predicted & gold, axis=0)
  f1s = [_per_label(result, label, tp[i], fp[i], fn[i]) for i, label in enumerate(labels)]
  result["eval_macro_f1"] = float(np.mean(f1s)) if f1s else 0.0
  result["eval_micro_f1"] = _prf(float(tp.sum()), float(fp.sum()),
                                 float(fn.sum() + missed.sum()))[2]
  return result


def regression_metrics(predictions, gold):
  """Pearson and Spearman correlations (as GLUE's STS-B) and the mean squared error."""
  predictions, gold = np.asarray(predictions, np.float64), np.asarray(gold, np.float64)
  result = glue_metrics("sts-b", predictions, gold)
  result["eval_mse"] = float(np.mean((predictions - gold) ** 2)) if len(gold) else 0.0
  return result
