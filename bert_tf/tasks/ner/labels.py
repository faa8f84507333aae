"""run_ner's label lists: --labels checked, the label order a trained model was made with
(stored beside it), and the order a run uses when both are given.

A model's output rows follow the label order it was trained with, so a run that evaluates,
predicts or exports a trained model uses that order: --labels listing the same labels in
another order is read as that order (and said in the log); other labels are refused.
"""

import json
import os

from absl import logging
import tensorflow as tf

from bert_tf.errors import UserInputError

LABELS_FILE = "ner_labels.json"  # written by fine-tuning: its labels and tag scheme


def is_iob2_label(label):
  return label == "O" or (label[:2] in ("B-", "I-") and len(label) > 2)


def from_flag(values):
  """The labels of --labels (None when unset), or an error unless distinct IOB2 with O."""
  if values is None:
    return None
  labels = [label.strip() for label in values if label.strip()]
  bad = [label for label in labels if not is_iob2_label(label)]
  if bad or "O" not in labels or len(set(labels)) != len(labels):
    raise UserInputError("--labels must list distinct IOB2 labels including O (e.g. "
                         "O,B-PER,I-PER), got %s." % ",".join(values))
  return labels


def read_json(path, what):
  """The JSON object of a file a run wrote beside its model (None when there is none)."""
  if not tf.io.gfile.exists(path):
    return None
  try:
    with tf.io.gfile.GFile(path, "r") as f:
      data = json.loads(f.read())
    if not isinstance(data, dict) or not isinstance(data.get("labels"), list):
      raise ValueError("no list of labels")
  except (ValueError, tf.errors.OpError) as e:
    raise UserInputError("%s %s is damaged (%s): delete it and pass --labels, or train "
                         "again." % (what, path, e)) from None
  return data


def read_stored(output_dir):
  """{"labels", "tag_scheme"} of the model fine-tuned in `output_dir`, or None."""
  return read_json(os.path.join(output_dir, LABELS_FILE), "Labels file")


def write_json(path, data):
  with tf.io.gfile.GFile(path + ".tmp", "w") as f:
    f.write(json.dumps(data, indent=2) + "\n")
  tf.io.gfile.rename(path + ".tmp", path, overwrite=True)


def reconcile(given, trained, where):
  """The label order to run a model trained on `trained` (recorded in `where`) with, given
  --labels `given` (None: not given)."""
  if given is None or given == trained:
    return list(trained)
  if sorted(given) == sorted(trained):
    logging.info("--labels lists the labels of the model in %s in another order; using the "
                 "model's order %s.", where, ",".join(trained))
    return list(trained)
  raise UserInputError("--labels=%s are not the labels the model was trained on (%s, recorded "
                       "in %s): pass those, or train a model on yours." %
                       (",".join(given), ",".join(trained), where))
