"""Leaner stand-ins for three TF / tensorflow_text ops on the per-request path of exports.

Each gives the public op's result with fewer graph ops: no validation of row splits that an
op has just built, and a cond that runs only its taken branch. Two of them reach into
private modules of the pinned versions (requirements/runtime.txt); keeping them here puts
that dependency in one place, to check when TensorFlow or tensorflow_text is upgraded.
"""

import tensorflow as tf

# Internals: an un-lowered Case (`lazy_cond`) and tf-text's split kernel without the
# validation of its public wrapper (`regex_split`).
from tensorflow.python.ops import cond_v2
from tensorflow_text.python.ops import regex_split_ops


def regex_split(text, split_pattern, keep_pattern):
  """`tensorflow_text.regex_split` of a 1-D string tensor, minus the validation of the row
  splits its kernel has just produced: the public function builds three validated ragged
  tensors (words and both offsets, the offsets unused here), dozens of assert ops that every
  request would run."""
  words, _, _, row_splits = regex_split_ops.gen_regex_split_ops.regex_split_with_offsets(
      text, "(%s)" % split_pattern, "(%s)" % keep_pattern)
  return tf.RaggedTensor.from_row_splits(words, row_splits, validate=False)


def merge_words(pieces):
  """[batch, (words), (pieces)] -> [batch, (pieces)]: `merge_dims(1, 2)` without validating
  the row splits it builds from valid ones (dozens of assert ops per request)."""
  splits = tf.gather(pieces.values.row_splits, pieces.row_splits)
  return tf.RaggedTensor.from_row_splits(pieces.values.values, splits, validate=False)


def lazy_cond(pred, true_fn, false_fn):
  """tf.cond(pred, true_fn, false_fn) that runs only the taken branch's ops.

  Inside a tf.function, tf.cond is lowered to Switch/Merge, and the runtime still visits
  every op of the branch not taken (to mark it dead); a Case op kept as such calls only
  the chosen branch's function. Worth it for a rarely taken branch of many ops (the
  Unicode tables, skipped for all-ASCII requests).
  """
  if tf.executing_eagerly():
    return true_fn() if bool(pred) else false_fn()
  outputs = cond_v2.indexed_case(tf.cast(pred, tf.int32), [false_fn, true_fn],
                                 lower_using_switch_merge=False)
  return outputs[0] if isinstance(outputs, (list, tuple)) else outputs
