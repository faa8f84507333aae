"""run_ner's label lists: --labels checked, the label order a trained model was made with
(stored beside it), the order a run uses when both are given, and the tags of its files.

A model's output rows follow the label order it was trained with, so a run that evaluates,
predicts or exports a trained model uses that order: --labels listing the same labels in
another order is read as that order (and said in the log); other labels are refused.
"""

import json
import os

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf.checkpoints import head_labels, names, run_folder
from bert_tf.errors import UserInputError
from bert_tf.tasks.ner.data import detect_scheme, label_list, to_iob2

LABELS_FILE = "ner_labels.json"  # written by fine-tuning: its labels and tag scheme
# What needs every sentence of a split's file tagged (the predict file may have no tags).
NEEDS_TAGS = {"train": "training", "eval": "--do_eval"}


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


class RunLabels:
  """The labels (in the order of the model's output rows) and tag scheme of one run.

  A training run takes them from the training file (or --labels); any other run from the
  trained model (use_trained, use_record), with --labels read in the model's order.
  `tag_scheme` is --tag_scheme ("auto" or a scheme).
  """

  def __init__(self, flag_labels, tag_scheme):
    self.given = from_flag(flag_labels)
    self.tag_scheme = tag_scheme
    self.labels = None
    self.trained_scheme = None  # the training file's, or the one stored with the model

  def use(self, labels, scheme):
    self.labels, self.trained_scheme = list(labels), self.trained_scheme or scheme

  def use_trained(self, output_dir, init_checkpoint):
    """The fine-tuned model's: the one in `output_dir`, else the head of `init_checkpoint`,
    else --labels."""
    stored = read_stored(output_dir)
    if stored:
      where = os.path.join(output_dir, LABELS_FILE)
      self.use(reconcile(self.given, stored["labels"], where), stored.get("tag_scheme"))
      return
    if init_checkpoint:
      source = checkpoints.open_source(init_checkpoint)
      recorded, where = head_labels.recorded_labels(source)
      if recorded and any(n.google in source.shapes for n in names.head_names("ner")):
        self.use(reconcile(self.given, recorded, where), None)
        return
    if self.given is None:
      raise UserInputError("No --labels and no %s in --output_dir=%s (a training run writes "
                           "it): pass --labels=O,B-PER,I-PER,... or train first." %
                           (LABELS_FILE, output_dir))
    self.use(self.given, None)

  def use_record(self, record, where):
    """Those of a trained tagger's record (read from `where`)."""
    self.use(reconcile(self.given, record["labels"], where), record.get("tag_scheme"))

  def record(self):
    """What a trained model keeps of them: its labels and the training file's scheme."""
    return {"labels": self.labels, "tag_scheme": self.trained_scheme}

  def write(self, output_dir):
    """Writes `record` beside the model fine-tuned in `output_dir` (read by use_trained)."""
    run_folder.write_json(os.path.join(output_dir, LABELS_FILE), self.record(), sort_keys=False)

  def use_training_file(self, path, documents, output_dir):
    """The training file's scheme and labels (--labels if given); a run resuming in
    `output_dir` keeps its head's order."""
    self.trained_scheme = (self.tag_scheme if self.tag_scheme != "auto" else
                           detect_scheme(documents))
    labels = self.given or label_list(documents)
    stored = read_stored(output_dir)
    if stored and sorted(stored["labels"]) == sorted(labels):
      labels = stored["labels"]
    self.labels = labels
    logging.info("Training file %s: %s tags, labels %s", path, self.trained_scheme,
                 ",".join(labels))

  def check_tags(self, path, documents, needs_tags):
    """Every tag of `documents` (read from `path`) is one of the labels, and every sentence
    has tags when `needs_tags` names what needs them (training, --do_eval)."""
    untagged = [s for d in documents for s in d.sentences if s.tags is None]
    if untagged and needs_tags:
      raise UserInputError("%s line %d has no tag column; %s needs `word ... tag` lines (tag "
                           "an untagged file with --do_predict)." % (path, untagged[0].line,
                                                                    needs_tags))
    known = set(self.labels)
    for document in documents:
      for sentence in document.sentences:
        for i, tag in enumerate(to_iob2(sentence.tags or [])):
          if tag not in known:
            raise UserInputError("%s line %d: tag %s (IOB2 %s) is not among the labels %s; "
                                 "add it to --labels (or to the training file)." %
                                 (path, sentence.line + i, sentence.tags[i], tag,
                                  ",".join(self.labels)))

  def scheme_for(self, documents):
    """The tag scheme predictions of `documents` are written in."""
    if self.tag_scheme != "auto":
      return self.tag_scheme
    return self.trained_scheme or detect_scheme(documents)

  def word_ids(self, documents):
    """The IOB2 label ids [words] of every word of `documents` (None without gold tags)."""
    ids = [self.ids(document) for document in documents]
    if any(row is None for row in ids):
      return None
    return np.array([i for row in ids for i in row], np.int32)

  def ids(self, document):
    """The IOB2 label ids of a document's words (None without gold tags)."""
    if any(s.tags is None for s in document.sentences):
      return None
    index = {label: i for i, label in enumerate(self.labels)}
    return [index[t] for s in document.sentences for t in to_iob2(s.tags)]
