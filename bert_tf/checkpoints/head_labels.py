"""The label each row of a checkpoint's classification head stands for, and that head read in
the label order of the run that loads it.

A head's output rows carry no names: row i means the i-th label of the run that trained it.
A later run that lists the same labels in another order would read every prediction through
the wrong name, so a head loaded from a checkpoint is put into the loading run's order (same
labels) or refused (other labels). The order comes from what the training run recorded
beside the checkpoint (run_folder), or from a Hugging Face folder's id2label.
"""

import dataclasses
import json
import os
import re

from absl import logging
import numpy as np

from bert_tf import checkpoints
import bert_tf.checkpoints.names as names
import bert_tf.checkpoints.run_folder as run_folder
from bert_tf.errors import UserInputError

_HF_DEFAULT_LABEL = re.compile(r"LABEL_\d+$")


class TaskLabels(list):
  """A run's label names (empty for regression) with the task that gives them their meaning.

  Two tasks may name their labels alike and mean other things by them (MRPC's "0"/"1" say
  paraphrase or not, SST-2's the sentiment), so a head is read by its names only when the run
  that trained it recorded the same task, or one of `same` (task names whose labels mean the
  same: MNLI's and XNLI's). A recorded task outside `known` (the runner's task names; empty:
  any) is not compared: an HF folder's finetuning_task may be any text. Names compare without
  case, "-" or "_" (transformers says "sst2" for "SST-2"). `flag` names the task in messages.
  """

  def __init__(self, labels, task, same=(), known=(), flag="--task_name"):
    super().__init__(labels or [])
    self.task, self.flag = task, flag
    self.same = frozenset(map(task_key, same)) | {task_key(task)}
    self.known = frozenset(map(task_key, known))
    self.regression = labels is None

  def other_task(self, recorded):
    """Whether a head fine-tuned for the task `recorded` means other labels than these."""
    key = task_key(recorded)
    return key not in self.same and (not self.known or key in self.known)


def task_key(name):
  """A task name as compared: "SST-2", "sst2" and "sst_2" are one task."""
  return str(name).lower().replace("-", "").replace("_", "")


def _hf_config(source):
  """The HF folder's config.json as a dict and its path ({} when it cannot be read)."""
  path = os.path.join(source.path, "config.json")
  try:
    with open(path, encoding="utf-8") as f:
      data = json.load(f)
  except (OSError, ValueError):
    return {}, path
  return (data if isinstance(data, dict) else {}), path


def recorded_task(source):
  """(task name, where it was read) of the run that fine-tuned `source` (for an HF folder,
  its config.json's finetuning_task), or (None, None)."""
  if source.kind == "hf":
    data, path = _hf_config(source)
    task = data.get("finetuning_task")
    return (task, path + " (finetuning_task)") if isinstance(task, str) and task else (None, None)
  task = run_folder.recorded_settings(source.path).get("task_name")
  if isinstance(task, str) and task:
    return task, run_folder.settings_path(run_folder.checkpoint_folder(source.path))
  return None, None


def recorded_labels(source):
  """(labels, where they were read) of the run that wrote `source`, or (None, None)."""
  if source.kind == "hf":
    data, path = _hf_config(source)
    try:
      id2label = data.get("id2label") or {}
      labels = [id2label[str(i)] for i in range(len(id2label))]
    except (KeyError, AttributeError, TypeError):
      return None, None
    if not labels or all(_HF_DEFAULT_LABEL.match(str(label)) for label in labels):
      return None, None  # transformers' placeholder names say nothing about the order
    return labels, path + " (id2label)"
  labels = run_folder.recorded_settings(source.path).get("labels")
  if isinstance(labels, list) and labels:
    return [str(label) for label in labels], run_folder.settings_path(
        run_folder.checkpoint_folder(source.path))
  return None, None


def in_label_order(checkpoint, head_kind, labels, training, flag=None):
  """`checkpoint` (a path or CheckpointSource) with the rows of its `head_kind` head in the
  order of `labels`: the source itself when it has no such head or the order is the same; a
  reordering view when the head was trained on the same labels in another order. A head of
  other labels, or (`labels` a TaskLabels) of another task, is left out when `training` (the
  head starts as initialized, as from a pretrained BERT, and the log says so) and refused
  otherwise: its rows mean other labels."""
  source = checkpoints.open_source(checkpoint)
  head = [n.google for n in names.head_names(head_kind)]
  if not any(name in source.shapes for name in head):
    return source
  if isinstance(labels, TaskLabels):
    other = _other_task(source, head_kind, labels, training)
    if other is not None:
      return dataclasses.replace(
          source, shapes={n: s for n, s in source.shapes.items() if n not in head})
    if labels.regression:
      return source  # one output: no order to read
  labels = [str(label) for label in labels]
  trained, where = recorded_labels(source)
  if trained is None:
    logging.warning("The %s head in %s records no label order; its rows are read as this run's "
                    "labels in the order %s.", head_kind, source.path, ",".join(labels))
    return source
  if trained == labels:
    return source
  if sorted(trained) != sorted(labels):
    if training:
      logging.warning("The %s head in %s was trained on other labels (%s, recorded in %s) than "
                      "this run's (%s): it is not loaded, and this run trains a new one.",
                      head_kind, source.path, ",".join(trained), where, ",".join(labels))
      return dataclasses.replace(
          source, shapes={n: s for n, s in source.shapes.items() if n not in head})
    fix = "pass %s=%s" % (flag, ",".join(trained)) if flag else "pass the matching task"
    raise UserInputError("The %s head in %s was trained on the labels %s (recorded in %s), not "
                         "on this run's %s: %s, or train a model on yours." % (
                             head_kind, source.path, ",".join(trained), where,
                             ",".join(labels), fix))
  order = np.array([trained.index(label) for label in labels])
  logging.info("The %s head in %s was trained on the labels in the order %s; its rows are read "
               "in this run's order %s.", head_kind, source.path, ",".join(trained),
               ",".join(labels))
  read = source.get

  def reordered(name):
    value = read(name)
    return value[order] if name in head else value

  return dataclasses.replace(source, _get=reordered)


def _other_task(source, head_kind, labels, training):
  """The task `source`'s head was fine-tuned for when it is not this run's (`labels`, a
  TaskLabels), else None: refused when not `training`, logged when it is (the caller then
  leaves the head out)."""
  trained, where = recorded_task(source)
  if trained is None or not labels.other_task(trained):
    return None
  if training:
    logging.warning("The %s head in %s was fine-tuned for task %s (recorded in %s), not this "
                    "run's %s=%s: it is not loaded (its rows mean %s's labels, even where the "
                    "names match), and this run trains a new one.", head_kind, source.path,
                    trained, where, labels.flag, labels.task, trained)
    return trained
  raise UserInputError(
      "The %s head in %s was fine-tuned for task %s (recorded in %s), not for %s=%s: its rows "
      "mean %s's labels even where the names match. Pass %s=%s to use it, or fine-tune it on "
      "%s with --do_train, which trains a new head." % (
          head_kind, source.path, trained, where, labels.flag, labels.task, trained,
          labels.flag, trained, labels.task))
