"""Sentence pooling: token vectors [B, S, H] and their mask -> one float32 vector per sentence.

Computed as sentence-transformers' Pooling and Normalize modules compute it, so a
sentence-transformers model run by bert_tf gives its embeddings: only real tokens
count (the mask), inputs are right-padded, and several modes are concatenated in
the order given (bert_tf.checkpoints.sentence_models.POOLING_MODES):

  cls                   the first token's vector ([CLS])
  max                   per component, the largest over real tokens (padding is -inf)
  mean                  sum over real tokens / max(count, 1e-9)
  mean_sqrt_len_tokens  sum over real tokens / sqrt(max(count, 1e-9))
  weightedmean          tokens weighted by their position 1, 2, ...
  lasttoken             the last real token's vector

`normalize` divides by the L2 norm, max(||x||, 1e-12) (torch's F.normalize).
"""

import keras
from keras import ops

from bert_tf import layers
from bert_tf.checkpoints.sentence_models import POOLING_MODES


def _pool(mode, hidden, mask):
  """One mode's [B, H] vectors; `mask` is float32 [B, S, 1]."""
  if mode == "cls":
    return hidden[:, 0]
  if mode == "max":
    return ops.max(ops.where(mask > 0, hidden, float("-inf")), axis=1)
  if mode in ("mean", "mean_sqrt_len_tokens"):
    total = ops.sum(hidden * mask, axis=1)
    count = ops.maximum(ops.sum(mask, axis=1), 1e-9)
    return total / (count if mode == "mean" else ops.sqrt(count))
  if mode == "weightedmean":
    positions = ops.arange(1, ops.shape(hidden)[1] + 1, dtype="float32")[None, :, None]
    weights = mask * positions
    return ops.sum(hidden * weights, axis=1) / ops.maximum(ops.sum(weights, axis=1), 1e-9)
  if mode == "lasttoken":
    last = ops.maximum(ops.cast(ops.sum(mask[:, :, 0], axis=1), "int32") - 1, 0)
    return ops.take_along_axis(hidden, last[:, None, None], axis=1)[:, 0]
  raise ValueError("Unknown pooling mode %r (known: %s)." % (mode, ", ".join(POOLING_MODES)))


def l2_normalize(vectors):
  """x / max(||x||, 1e-12) along the last axis."""
  norm = ops.sqrt(ops.sum(ops.square(vectors), axis=-1, keepdims=True))
  return vectors / ops.maximum(norm, 1e-12)


@layers.serializable
class SentencePooling(keras.layers.Layer):
  """(sequence_output [B, S, H], input_mask [B, S]) -> float32 [B, H * len(modes)]."""

  def __init__(self, modes=("mean",), normalize=False, **kwargs):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)
    modes = (modes,) if isinstance(modes, str) else tuple(modes)
    unknown = [m for m in modes if m not in POOLING_MODES]
    if not modes or unknown:
      raise ValueError("Pooling modes %r: each must be one of %s." %
                       (modes, ", ".join(POOLING_MODES)))
    self.modes = modes
    self.normalize = bool(normalize)

  def call(self, sequence_output, input_mask):
    hidden = ops.cast(sequence_output, "float32")
    mask = ops.cast(input_mask, "float32")[:, :, None]
    vectors = [_pool(mode, hidden, mask) for mode in self.modes]
    out = vectors[0] if len(vectors) == 1 else ops.concatenate(vectors, axis=-1)
    return l2_normalize(out) if self.normalize else out

  def get_config(self):
    config = super().get_config()
    config.update({"modes": list(self.modes), "normalize": self.normalize})
    return config
