"""--class_weights: none, balanced (from the training rows' label counts) or one weight a label.

single_label: a label's weight multiplies the loss of its examples; balanced is
rows / (labels * rows of the label) (scikit-learn's "balanced"). multi_label: a label's weight
multiplies the loss of its positive targets; balanced is the label's negative rows over its
positive rows (PyTorch's suggestion for BCEWithLogitsLoss pos_weight). A label with no training
row (or, multi-label, on every row) gets 1.0.

Training with weights makes the model's odds of label j those of the data times w_j (Elkan,
"The Foundations of Cost-Sensitive Learning", 2001), so its probabilities lean toward the
up-weighted labels. --correct_class_weights (default on) takes log(w_j) back off each logit at
evaluation, prediction and export (`logit_shift`): the weights then shape what the encoder
learns, and the probabilities and the 0.5 / argmax decision are the data's own.
"""

import math

from bert_tf.errors import UserInputError


def class_weights(spec, problem_type, labels, rows):
  """The weights of --class_weights=`spec` for `labels` (None: no weights), given the
  training `rows` (labels read by data.with_labels)."""
  spec = (spec or "none").strip()
  if spec == "none":
    return None
  if problem_type == "regression":
    raise UserInputError("--class_weights=%s is for single_label and multi_label runs; this "
                         "run is a regression: drop the flag." % spec)
  if spec == "balanced":
    return balanced(problem_type, labels, rows)
  try:
    weights = [float(w) for w in spec.split(",")]
  except ValueError:
    weights = []
  if len(weights) != len(labels) or any(not 0 < w < math.inf for w in weights):
    raise UserInputError("--class_weights=%s must be none, balanced, or %d positive finite "
                         "numbers, one per label in the order %s." %
                         (spec, len(labels), ",".join(labels)))
  return weights


def logit_shift(class_weights):
  """What corrected inference adds to each label's logit: -log(w) (None without weights).
  single_label: softmax(logits - log w) is p_j / w_j renormalised; multi_label: a label's odds
  divided by its positive weight."""
  if not class_weights:
    return None
  return [-math.log(float(w)) for w in class_weights]


def balanced(problem_type, labels, rows):
  """The balanced weights of `labels` from the training `rows`."""
  if problem_type == "multi_label":
    positives = [sum(1 for r in rows if name in r.label) for name in labels]
    # A label on every row has no negatives: its weight would be 0, and it would learn nothing.
    return [(len(rows) - p) / p if 0 < p < len(rows) else 1.0 for p in positives]
  counts = [sum(1 for r in rows if r.label == name) for name in labels]
  return [len(rows) / (len(labels) * c) if c else 1.0 for c in counts]
