"""BERT's encoder in numpy float64, read straight from a Hugging Face state dict: the reference
hf_parity.py holds bert_tf and transformers to. It follows the model's definition (embeddings,
post-LayerNorm Transformer layers, tanh pooler) and shares no code with either library, so an
error in a name map or a transposition shows as a difference.
"""

import math

import numpy as np


def _gelu_erf(x):
  erf = np.vectorize(math.erf, otypes=[np.float64])
  return x * 0.5 * (1.0 + erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
  return x * 0.5 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * np.power(x, 3))))


# transformers' hidden_act names: the exact (erf) GELU and its tanh approximation.
ACTIVATIONS = {"gelu": _gelu_erf, "gelu_new": _gelu_tanh}


def _softmax(scores):
  shifted = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
  return shifted / np.sum(shifted, axis=-1, keepdims=True)


class _Parameters:
  """The state dict's tensors in float64; names relative to the encoder (its "bert." prefix,
  which heads' checkpoints have, is added where present)."""

  def __init__(self, state, eps):
    self.state, self.eps = state, eps
    self.prefix = "bert." if any(name.startswith("bert.") for name in state) else ""

  def __getitem__(self, name):
    return np.asarray(self.state[self.prefix + name], np.float64)

  def linear(self, name, x):
    """torch's nn.Linear: weight [out, in], y = x W^T + b."""
    return np.matmul(x, self[name + ".weight"].T) + self[name + ".bias"]

  def layer_norm(self, name, x):
    centered = x - np.mean(x, axis=-1, keepdims=True)
    scale = np.sqrt(np.mean(np.square(centered), axis=-1, keepdims=True) + self.eps)
    return centered / scale * self[name + ".weight"] + self[name + ".bias"]


def encoder_outputs(state, config, ids, mask, types):
  """{"sequence_output": [batch, seq, hidden], "pooled_output": [batch, hidden]} of the
  encoder of `state` (LayerNorm weights named .weight/.bias) with transformers' `config` dict,
  on int arrays `ids`, `mask` (1: real token) and `types`."""
  params = _Parameters(state, config.get("layer_norm_eps", 1e-12))
  activation = ACTIVATIONS[config["hidden_act"]]
  heads = config["num_attention_heads"]
  batch, length = ids.shape
  hidden = (params["embeddings.word_embeddings.weight"][ids] +
            params["embeddings.position_embeddings.weight"][:length][np.newaxis] +
            params["embeddings.token_type_embeddings.weight"][types])
  hidden = params.layer_norm("embeddings.LayerNorm", hidden)
  # Padding keys get a large negative score: their softmax weight underflows to 0.
  key_penalty = np.where(mask[:, np.newaxis, np.newaxis, :] > 0, 0.0, -1e9)

  def per_head(x):  # [batch, seq, hidden] -> [batch, heads, seq, hidden / heads]
    return x.reshape(batch, length, heads, -1).swapaxes(1, 2)

  for index in range(config["num_hidden_layers"]):
    layer = "encoder.layer.%d." % index
    query, key, value = (per_head(params.linear(layer + "attention.self." + part, hidden))
                         for part in ("query", "key", "value"))
    scores = np.einsum("bhqd,bhkd->bhqk", query, key) / math.sqrt(query.shape[-1])
    mixed = np.einsum("bhqk,bhkd->bqhd", _softmax(scores + key_penalty), value)
    attended = params.linear(layer + "attention.output.dense", mixed.reshape(hidden.shape))
    hidden = params.layer_norm(layer + "attention.output.LayerNorm", attended + hidden)
    expanded = activation(params.linear(layer + "intermediate.dense", hidden))
    hidden = params.layer_norm(layer + "output.LayerNorm",
                               params.linear(layer + "output.dense", expanded) + hidden)
  return {"sequence_output": hidden,
          "pooled_output": np.tanh(params.linear("pooler.dense", hidden[:, 0]))}
