"""A run's problem type, label order and class weights: from the training file (and the flags)
when it trains, else as recorded by the run that trained the model, so evaluating, predicting,
resuming or exporting reads the model's output rows in the order it was trained with.

The training run records them in its settings (training_state/settings.json, compared on
resume) and in LABELS_FILE beside its checkpoints.
"""

import collections
import dataclasses
import json
import os
import re
from typing import Optional

from absl import logging
import tensorflow as tf

from bert_tf.checkpoints import hf_files, run_folder
from bert_tf.errors import UserInputError
from bert_tf.tasks.glue import data as glue_data

# From the modules, not the package: the package's __init__ imports this module.
from bert_tf.tasks.own_data.data import (
  PROBLEM_TYPES,
  check_name_clashes,
  infer_problem_type,
  label_order,
  names_in,
  unknown_labels,
  with_labels,
)
from bert_tf.tasks.own_data.weights import class_weights as weights_of

LABELS_FILE = "classifier_labels.json"
DEFAULT_THRESHOLD = 0.5


@dataclasses.dataclass(frozen=True)
class Schema:
  """What a model trained on the user's file predicts: the problem type, the label names in the
  order of its output rows (None for regression), the class weights of its loss and whether it
  reads text pairs (--text_b_column; None: not recorded). `threshold`: the multi-label
  --threshold it was trained with, and `no_label`: its presence label (`presence_label`; None
  without one), LABELS_FILE only: neither is a setting of the weights. `correct_weights`:
  with class weights, whether inference takes them back off the logits (weights.logit_shift;
  recorded with the weights, False for runs recorded before it existed)."""
  problem_type: str
  labels: Optional[list]
  class_weights: Optional[list] = None
  text_pair: Optional[bool] = None
  threshold: Optional[float] = None
  no_label: Optional[str] = None
  correct_weights: Optional[bool] = None

  def record(self):
    record = {"problem_type": self.problem_type, "labels": self.labels,
              "class_weights": self.class_weights, "text_pair": self.text_pair}
    if self.class_weights:
      record["correct_class_weights"] = bool(self.correct_weights)
    return record

  @property
  def num_labels(self):
    return len(self.labels) if self.labels else 1


def from_training(path, rows, problem_type, given, delimiter, weights_spec, text_pair=None):
  """The schema of a run training on `rows` of `path`: the type (--problem_type, else read from
  the labels), --labels (`given`) or the names sorted, and the weights; the log says each."""
  if problem_type:
    why = "--problem_type=%s" % problem_type
  else:
    problem_type, why = infer_problem_type(path, rows, delimiter)
  logging.info("Problem type: %s (%s).", problem_type, why)
  if problem_type == "regression" and given:
    raise UserInputError("--labels=%s names the labels of a classifier, and %s trains a "
                         "regression (%s): drop --labels, or pass --problem_type=single_label." %
                         (",".join(given), path, why))
  rows = with_labels(path, rows, problem_type, delimiter)
  labels = None
  if problem_type != "regression":
    if given:
      unknown_labels(path, rows, problem_type, given, given=True)
    variants = check_name_clashes(path, rows, problem_type)
    if variants:
      logging.warning("%s has labels that differ only in case or spaces: %s; they are separate "
                      "labels. If they are one, write them alike.", path, variants)
    labels = label_order(names_in(rows, problem_type), given)
    if len(labels) < (1 if problem_type == "multi_label" else 2):
      raise UserInputError("%s has the labels %s: a %s run needs at least %s; add rows of "
                           "other labels, or pass --labels." % (
                               path, ",".join(labels) or "(none)", problem_type,
                               "one" if problem_type == "multi_label" else "two"))
    logging.info("Labels (%d, in output order): %s", len(labels), ",".join(labels))
  class_weights = weights_of(weights_spec, problem_type, labels, rows)
  if class_weights:
    logging.info("Class weights (--class_weights=%s): %s", weights_spec, ", ".join(
        "%s=%.4g" % (name, w) for name, w in zip(labels, class_weights)))
  no_label = presence_label(rows, problem_type, labels)
  if no_label is not None:
    logging.info("Presence label: %r holds most training rows (at least %d%%): with "
                 "--long_document=windows, a row is the other label when any window says "
                 "so.", no_label, 100 * PRESENCE_SHARE)
  return Schema(problem_type, labels, class_weights, text_pair, no_label=no_label)


# A two-label file whose majority label holds at least this share of the training rows reads
# as presence: the other label is a topic a document has or not (Reuters grain 93%, corn 97%
# "other"), and --long_document=windows pools by `any` with the majority label as the "no". On
# a balanced file (50%) `any` lost to mean; shares between were not measured
# (docs/runners.md).
PRESENCE_SHARE = 0.8


def presence_label(rows, problem_type, labels):
  """The majority label of a single-label run with two labels when it holds at least
  PRESENCE_SHARE of the rows, else None: where it is, windows' `any` reads it as the "no",
  whatever the label order."""
  if problem_type != "single_label" or len(labels) != 2:
    return None
  counts = collections.Counter(row.label for row in rows)
  label, count = max(((name, counts[name]) for name in labels), key=lambda item: item[1])
  return label if count >= PRESENCE_SHARE * len(rows) else None


def recorded(output_dir, init_checkpoint):
  """(Schema, where) of the model trained in `output_dir` (its LABELS_FILE, else its training
  state's settings), else of the run that wrote `init_checkpoint`; (None, None) when neither
  records one."""
  path = os.path.join(output_dir, LABELS_FILE)
  if tf.io.gfile.exists(path):
    try:
      with tf.io.gfile.GFile(path, "r") as f:
        record = json.loads(f.read())
      return _schema(record), path
    except (ValueError, TypeError, KeyError, tf.errors.OpError) as e:
      raise UserInputError("Labels file %s is damaged (%s): train again, or delete it and "
                           "pass --init_checkpoint of the trained model." % (path, e)) from None
  if run_folder.has_training_state(output_dir):  # the weights this run reads
    record = run_folder.recorded_settings(output_dir)
    where = run_folder.settings_path(output_dir)
    if record.get("problem_type") in PROBLEM_TYPES:
      return _schema(record), where
    if record.get("task_name"):
      raise UserInputError(
          "--output_dir=%s holds the training state of a --task_name=%s run (%s), not of one on "
          "your own file: predict from it into another --output_dir, with --init_checkpoint="
          "<its model.ckpt-N>." % (output_dir, record["task_name"], where))
  if init_checkpoint and hf_files.is_hf_folder(init_checkpoint):
    return _hf_schema(init_checkpoint)
  if init_checkpoint:
    record = run_folder.recorded_settings(init_checkpoint)
    folder = run_folder.checkpoint_folder(init_checkpoint)
    where = run_folder.settings_path(folder)
    if record.get("problem_type") in PROBLEM_TYPES:  # and its --threshold, when recorded
      beside, _ = recorded(folder, None) if tf.io.gfile.exists(
          os.path.join(folder, LABELS_FILE)) else (None, None)
      threshold = beside.threshold if beside and beside.labels == record.get("labels") else None
      return dataclasses.replace(_schema(record), threshold=threshold), where
    if record.get("task_name"):  # a GLUE run's: STS-B is a regression, the others name labels
      pair = _glue_pair(record["task_name"])
      if record.get("labels") is None:
        return Schema("regression", None, text_pair=pair), where
      if isinstance(record["labels"], list):
        return Schema("single_label", [str(x) for x in record["labels"]],
                      text_pair=pair), where
  return None, None


_HF_PROBLEM_TYPES = {hf_files.REGRESSION: "regression",
                     hf_files.SINGLE_LABEL: "single_label",
                     hf_files.MULTI_LABEL: "multi_label"}


def _hf_schema(folder):
  """(Schema, where) of a Hugging Face classifier folder whose config.json states its
  problem_type and (unless a regression) names its labels in id2label; else (None, None)."""
  path = os.path.join(folder, hf_files.CONFIG_NAME)
  try:
    with open(path, encoding="utf-8") as f:
      config = json.load(f)
    problem_type = _HF_PROBLEM_TYPES.get(config.get("problem_type"))
    id2label = config.get("id2label") or {}
    labels = [str(id2label[str(i)]) for i in range(len(id2label))]
  except (OSError, ValueError, KeyError, AttributeError, TypeError):
    return None, None
  if problem_type == "regression":
    return Schema("regression", None), path
  if problem_type is None or not labels or all(re.match(r"LABEL_\d+$", n) for n in labels):
    return None, None  # transformers' placeholder names say nothing of the labels
  return Schema(problem_type, labels), path


def _glue_pair(task_name):
  """Whether the GLUE task `task_name` reads pairs (None: not a task known here)."""
  processor = glue_data.PROCESSORS.get(str(task_name).lower())
  return None if processor is None else bool(processor.is_pair)


def _schema(record):
  if record["problem_type"] not in PROBLEM_TYPES:
    raise ValueError("unknown problem_type %r" % record["problem_type"])
  labels, threshold = record.get("labels"), record.get("threshold")
  if threshold is not None and not (isinstance(threshold, (int, float)) and 0 < threshold < 1):
    raise ValueError("threshold %r is not between 0 and 1" % (threshold,))
  no_label = record.get("no_label")
  if no_label is not None and (not labels or str(no_label) not in map(str, labels)):
    raise ValueError("no_label %r is not one of the labels" % (no_label,))
  class_weights, correct = record.get("class_weights"), record.get("correct_class_weights")
  if correct is not None and not isinstance(correct, bool):
    raise ValueError("correct_class_weights %r is not true or false" % (correct,))
  return Schema(record["problem_type"], None if labels is None else [str(x) for x in labels],
                class_weights, record.get("text_pair"), threshold,
                None if no_label is None else str(no_label),
                bool(correct) if class_weights else None)


def from_trained(output_dir, init_checkpoint, problem_type, given, text_pair=None):
  """The schema of a run that does not train: the trained model's (--labels, --problem_type
  and, when recorded, whether it reads pairs (`text_pair`: --text_b_column) must agree with
  it), else --labels with --problem_type."""
  schema, where = recorded(output_dir, init_checkpoint)
  if schema is None:
    if problem_type == "regression" and given:
      raise UserInputError("--labels=%s names the labels of a classifier, and "
                           "--problem_type=regression has none: drop one of the flags." %
                           ",".join(given))
    if problem_type == "regression":
      return Schema("regression", None)
    if not (given and problem_type):
      raise UserInputError("No %s in --output_dir=%s and no labels recorded with "
                           "--init_checkpoint: train first (--do_train), or pass --labels and "
                           "--problem_type of the model." % (LABELS_FILE, output_dir))
    return Schema(problem_type, list(given))
  if problem_type and problem_type != schema.problem_type:
    raise UserInputError("--problem_type=%s, but the model was trained as %s (recorded in %s): "
                         "drop the flag." % (problem_type, schema.problem_type, where))
  if given and schema.labels is None:
    raise UserInputError("--labels=%s, but the model is a regression (recorded in %s): it has "
                         "no labels; drop the flag." % (",".join(given), where))
  if given and sorted(given) != sorted(schema.labels):
    raise UserInputError("--labels=%s are not the labels the model was trained on (%s, recorded "
                         "in %s): pass those, or train a model on yours." % (
                             ",".join(given), ",".join(schema.labels or []), where))
  if text_pair is not None and schema.text_pair is not None and text_pair != schema.text_pair:
    raise UserInputError(
        "The model was trained on %s (recorded in %s), and this run reads %s: %s." % (
            *(("text pairs", where, "one text a row") if schema.text_pair else
              ("one text a row", where, "pairs")),
            "pass --text_b_column=<the column of the second text>" if schema.text_pair else
            "drop --text_b_column"))
  logging.info("Problem type %s and labels %s of the model (recorded in %s)%s.",
               schema.problem_type, ",".join(schema.labels or []) or "(none)", where,
               "" if schema.threshold is None or schema.problem_type != "multi_label" else
               "; trained with --threshold=%s, used unless --threshold is given" %
               schema.threshold)
  return schema


def write(output_dir, schema, threshold=None):
  """Writes the schema (and the run's --threshold) beside the checkpoints in `output_dir`."""
  path = os.path.join(output_dir, LABELS_FILE)
  record = dict(schema.record(), **({} if threshold is None else {"threshold": threshold}))
  if schema.no_label is not None:
    record["no_label"] = schema.no_label
  run_folder.write_json(path, record, sort_keys=False)


def check_known(path, rows, schema, given):
  """Eval rows naming labels the model does not know: an error under --labels (`given`), else a
  warning (they count as wrong)."""
  if schema.problem_type == "regression":
    return
  listed = unknown_labels(path, rows, schema.problem_type, schema.labels, bool(given))
  if listed:
    logging.warning("%s names labels never seen in training: %s; the model cannot predict them, "
                    "so %s.", path, listed,
                    "each is a missed label (a false negative; its row is no exact match)"
                    if schema.problem_type == "multi_label" else "those rows count as wrong")
