"""BertModel: the original BERT encoder as a Keras 3 model with TF-Hub's input and output names.

    outputs = BertModel(config)({"input_word_ids": ids, "input_mask": mask,
                                 "input_type_ids": types}, training=False)

`input_mask` defaults to all ones and `input_type_ids` to all zeros, as in the
original. The outputs dict holds `sequence_output` [B, S, H], `pooled_output`
[B, H], `encoder_outputs` (one [B, S, H] tensor per layer, the original's
`get_all_encoder_layers()`) and `embedding_output` [B, S, H]. Hidden states are
float32 under every dtype policy (LayerNorm is their last op).

The model is Keras-native: it serializes with `get_config` (the BertConfig as a
dict), can be the core of a functional `keras.Model` trained with `fit`, and
survives `model.save("x.keras")` / `keras.saving.load_model`.
"""

import keras
from keras import ops
import tensorflow as tf

from bert_tf import layers
from bert_tf.checkpoints import names
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError

# The encoder's inputs, named as TF Hub's BERT encoders name them.
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def encoder_inputs(features):
  """The encoder's three inputs out of a features dict that may hold labels too."""
  return {name: features[name] for name in INPUT_NAMES if name in features}


def longest_length(input_mask, min_length=None, bucket=1):
  """The batch's longest real length (the mask's last 1), rounded up to a multiple of `bucket`.

  `min_length` (a scalar tensor) keeps positions a head will read. The result is
  at most the padded length.
  """
  seq_length = ops.shape(input_mask)[1]
  positions = ops.arange(1, seq_length + 1, dtype="int32")[None, :]
  # At least 1: an empty batch has no longest sequence, and the pooler reads position 0.
  length = ops.maximum(ops.max(ops.where(ops.cast(input_mask, "int32") > 0, positions, 1),
                               initial=1), 1)
  if min_length is not None:
    length = ops.maximum(length, ops.cast(min_length, "int32"))
  if bucket > 1:
    length = (length + bucket - 1) // bucket * bucket
  return ops.minimum(length, seq_length)


def trim_to_longest(inputs, min_length=None, bucket=1):
  """The encoder inputs cut to the batch's longest real sequence (see `longest_length`).

  Why the numbers do not move: a padding position enters a real position's
  attention only through exp(score - 10000 - max), which is exactly 0 in
  float32, and LayerNorm and the dense layers work per position; so the real
  positions' outputs are those of the full-length pass (up to the summation
  order of the matmul kernels, ~1e-7).
  """
  length = longest_length(inputs["input_mask"], min_length, bucket)
  return {name: value[:, :length] for name, value in inputs.items()}


def keras_inputs(seq_length=None):
  """Symbolic int32 [batch, seq_length] inputs for building a functional model."""
  return {name: keras.Input(shape=(seq_length,), dtype="int32", name=name)
          for name in INPUT_NAMES}


def export_model(model, filepath, format, verbose, input_signature, kwargs, rank=2):
  """keras.Model.export with bert_tf's defaults: the three TF-Hub inputs as int32
  [batch, length] (rank 3 for [batch, choices, length]), and for LiteRT builtin ops only,
  so a .tflite never holds TensorFlow ops that the LiteRT runtimes cannot run."""
  import tensorflow as tf  # the TF backend's exporters need it; modeling stays Keras-only
  if input_signature is None:
    input_signature = [{name: tf.TensorSpec((None,) * rank, tf.int32, name=name)
                        for name in INPUT_NAMES}]
  if format == "litert" and "target_spec" not in kwargs and "enable_select_tf_ops" not in kwargs:
    kwargs = dict(kwargs, target_spec={"supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS]})
  return keras.Model.export(model, filepath, format=format, verbose=verbose,
                            input_signature=input_signature, **kwargs)


class _NamedOutputs(keras.Model):
  """A BertModel whose outputs are all named tensors: a signature returns no list, so each
  of `encoder_outputs` becomes `encoder_output_<i>`."""

  def __init__(self, bert, **kwargs):
    super().__init__(name=bert.name + "_export", **kwargs)
    self.bert = bert
    self.built = True

  def call(self, inputs):
    outputs = dict(self.bert(inputs, training=False))
    for index, value in enumerate(outputs.pop("encoder_outputs")):
      outputs["encoder_output_%d" % index] = value
    return outputs


@layers.serializable
class BertModel(keras.Model):
  """Embeddings, `num_hidden_layers` post-LN transformer blocks and the pooler."""

  def __init__(self, config, use_one_hot_embeddings=False, name="bert", **kwargs):
    super().__init__(name=name, **kwargs)
    if not isinstance(config, (BertConfig, dict)):
      raise TypeError("BertModel needs a BertConfig, got %s." % type(config).__name__)
    self.config = config = BertConfig.coerce(config)
    self.use_one_hot_embeddings = bool(use_one_hot_embeddings)
    policy = self.dtype_policy
    self.embeddings = layers.BertEmbeddings(config, use_one_hot_embeddings,
                                            name="embeddings", dtype=policy)
    self.encoder_layers = [
        layers.TransformerBlock(config, name="layer_%d" % i, dtype=policy)
        for i in range(config.num_hidden_layers)
    ]
    self.pooler = layers.Pooler(config, name="pooler", dtype=policy)
    self.embeddings.build()
    for block in self.encoder_layers:
      block.build()
    self.pooler.build()
    self.built = True

  def get_config(self):
    return {"name": self.name, "trainable": self.trainable,
            "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
            "config": self.config.to_dict(),
            "use_one_hot_embeddings": self.use_one_hot_embeddings}

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    if isinstance(config.get("dtype"), dict):
      config["dtype"] = keras.saving.deserialize_keras_object(config["dtype"])
    return cls(**config)

  def checkpoint_variables(self):
    """Google name -> variable for every weight (bert_tf/checkpoints/names.py's encoder rows)."""
    return names.variables_of(self, names.encoder(self.config.num_hidden_layers))

  def export(self, filepath, format="tf_saved_model", verbose=None, input_signature=None,
             **kwargs):
    """Keras' export (SavedModel, LiteRT, ONNX, OpenVINO) of the encoder: inputs as
    `export_model` says, outputs the call's with `encoder_outputs` as `encoder_output_<i>`."""
    return export_model(_NamedOutputs(self), filepath, format, verbose, input_signature, kwargs)

  def _blocks(self, embedding_output, input_mask, training, packed=None):
    """(sequence output, every layer's output) of the transformer blocks; with `packed`
    (layers.PackedTokens) they run on the real tokens' rows, and padding gets zeros."""
    hidden = embedding_output
    if packed is not None:
      hidden = tf.gather(tf.reshape(hidden, (-1, self.config.hidden_size)), packed.real)
    encoder_outputs = []
    for block in self.encoder_layers:
      hidden = block(hidden, input_mask, training=training, packed=packed)
      encoder_outputs.append(hidden)
    if packed is not None:
      shape = tf.shape(embedding_output)
      flat_shape = (shape[0] * shape[1], shape[2])
      encoder_outputs = [tf.reshape(tf.scatter_nd(packed.real[:, None], rows, flat_shape), shape)
                         for rows in encoder_outputs]
    return encoder_outputs[-1], encoder_outputs

  def get_embedding_table(self):
    """The [vocab_size, H] word embeddings, shared with the masked-LM head."""
    return self.embeddings.word_embeddings

  def call(self, inputs, training=False, pack_tokens=False):
    """The outputs of the module docstring. With `pack_tokens` (inference only), the layers
    compute only the real tokens' rows (layers.pack_tokens): the real positions' outputs are
    the same up to float32 rounding, padding positions hold zeros, and each sequence needs a
    real token."""
    if pack_tokens and training:
      raise ValueError("pack_tokens is for inference: dropout would draw other masks.")
    if not isinstance(inputs, dict):
      inputs = {"input_word_ids": inputs}
    unknown = sorted(set(inputs) - set(INPUT_NAMES))
    if unknown or "input_word_ids" not in inputs:
      raise ValueError("BertModel takes a dict with %s (input_word_ids required), got keys %s."
                       % (", ".join(INPUT_NAMES), sorted(inputs)))
    input_ids = ops.convert_to_tensor(inputs["input_word_ids"], "int32")
    seq_length = input_ids.shape[1]
    if seq_length is not None and seq_length > self.config.max_position_embeddings:
      raise UserInputError(
          "Sequence length %d is longer than max_position_embeddings=%d of the BERT config; "
          "lower --max_seq_length." % (seq_length, self.config.max_position_embeddings))
    input_mask = inputs.get("input_mask")
    if input_mask is None:
      input_mask = ops.ones_like(input_ids)
    input_type_ids = inputs.get("input_type_ids")
    if input_type_ids is None:
      input_type_ids = ops.zeros_like(input_ids)
    input_type_ids = ops.convert_to_tensor(input_type_ids, "int32")

    embedding_output = self.embeddings(input_ids, input_type_ids, training=training)
    input_mask = ops.convert_to_tensor(input_mask, "int32")
    if pack_tokens:
      # A batch without padding gains nothing from packing and would pay its gathers.
      hidden, encoder_outputs = tf.cond(
          ops.all(input_mask > 0),
          lambda: self._blocks(embedding_output, input_mask, training),
          lambda: self._blocks(embedding_output, input_mask, training,
                               layers.pack_tokens(input_mask)))
    else:
      hidden, encoder_outputs = self._blocks(embedding_output, input_mask, training)
    return {
        "sequence_output": hidden,
        "pooled_output": ops.cast(self.pooler(hidden, input_mask), "float32"),
        "encoder_outputs": encoder_outputs,
        "embedding_output": embedding_output,
    }
