"""Exports a BERT checkpoint as two TF-Hub-style SavedModels: an encoder and its text preprocessor.

Why: code written for TF Hub's BERT pairs (an encoder such as bert_en_uncased_L-12_H-768_A-12
and bert_en_uncased_preprocess, through tf.saved_model.load or hub.KerasLayer) then runs on any
bert_tf checkpoint. The encoder holds no tokenizer, so it loads without tensorflow_text; the
preprocessor is bert_tf's in-graph copy of the original FullTokenizer, so its ids are the
original's, not those of tensorflow_text's BertTokenizer that TF Hub's preprocessors use. Each
callable part is a sub-object owning what it reads, so a Keras layer holding only that part
saves. Both are written atomically by `bert_tf.export.core.save_serving_module`. Every attribute and
signature, and where the preprocessor differs from TF Hub's: docs/tfhub.md.
"""

import os

import tensorflow as tf

from bert_tf import checkpoints, heads, tokenization
from bert_tf.checkpoints import checks
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError
from bert_tf.export import core
from bert_tf.modeling import INPUT_NAMES, BertModel
from bert_tf.text import packing
from bert_tf.utils import precision

ENCODER_TASK = "tfhub_encoder"
PREPROCESSOR_TASK = "tfhub_preprocessor"
MLM_POSITIONS = "masked_lm_positions"


class _ReusableSavedModelMixin:
  """TF Hub's Reusable SavedModel attributes, saved as plain attributes.

  tf.Module has `variables` and `trainable_variables` as properties, which
  tf.saved_model.save does not save; these class attributes shadow them so that
  lists assigned per instance are saved and come back after loading.
  """

  variables = None
  trainable_variables = None
  regularization_losses = None

  def _set_reusable(self, call, variables, trainable_variables):
    self.__call__ = call
    self.variables = list(variables)
    self.trainable_variables = list(trainable_variables)
    self.regularization_losses = []


class _SubObject(_ReusableSavedModelMixin, tf.Module):
  """A callable part of an export (`mlm`, `tokenize`, `bert_pack_inputs`).

  It owns (tracks) the resources its function reads, as `tokenizer`: a model that
  holds only the loaded sub-object (hub.KerasLayer(preprocessor.tokenize)) saves
  just what the sub-object tracks, and tf.saved_model.save refuses a function that
  reads a table nothing saved owns.
  """

  def __init__(self, call, variables=(), trainable_variables=(), tokenizer=None, name=None):
    super().__init__(name=name)
    self._set_reusable(call, variables, trainable_variables)
    if tokenizer is not None:
      self.tokenizer = tokenizer


class _ExportRoot(_ReusableSavedModelMixin, core.ServingModule):
  """core.ServingModule with TF Hub's attributes."""


def _ids_spec(with_positions=False):
  names = INPUT_NAMES + ((MLM_POSITIONS,) if with_positions else ())
  return {n: tf.TensorSpec([None, None], tf.int32, name=n) for n in names}


def _state_variables(models, trainable_only=False):
  """The tf.Variables the models' calls read or write, each once.

  Besides the weights (core._plain_variables) these are the dropout layers'
  seed-generator states, which a training=True trace updates.
  """
  found = core._plain_variables(models)  # pylint: disable=protected-access
  if trainable_only:
    trainable = {id(getattr(w, "value", w)) for m in models for w in m.trainable_weights}
    return [v for v in found if id(v) in trainable]
  seen = {id(v) for v in found}
  for model in models:
    for variable in model.variables:
      variable = getattr(variable, "value", variable)
      if id(variable) not in seen:
        seen.add(id(variable))
        found.append(variable)
  return found


def mlm_logits(head, sequence_output, positions):
  """[B, S, H] states, [B, P] positions -> [B, P, vocab] logits (TF Hub's `mlm_logits`)."""
  logits = head.logits(sequence_output, positions)
  return tf.reshape(logits, tf.concat([tf.shape(positions), [head.config.vocab_size]], axis=0))


def _encoder_outputs(encoder, inputs, training):
  ids = core.checked_ids(inputs["input_word_ids"], inputs["input_mask"],
                           inputs["input_type_ids"], encoder.config)
  out = encoder(ids, training=training)
  return {"sequence_output": out["sequence_output"], "pooled_output": out["pooled_output"],
          "default": out["pooled_output"], "encoder_outputs": list(out["encoder_outputs"])}


def _traced(fn, *specs):
  """A tf.function traced for training=False and training=True (a Python bool)."""
  fn = tf.function(fn, autograph=False, jit_compile=False)
  for training in (False, True):
    fn.get_concrete_function(*specs, training=training)
  return fn


def build_encoder_module(encoder, vocab_file, do_lower_case, strip_accents=None, mlm_head=None):
  """The encoder SavedModel's root object and its serving_default signature."""
  models = [encoder] + ([mlm_head] if mlm_head is not None else [])
  module = _ExportRoot(None, models)  # no tokenizer: loads without tensorflow_text

  def call(inputs, training=False):
    return _encoder_outputs(encoder, inputs, training)

  module._set_reusable(_traced(call, _ids_spec()),  # pylint: disable=protected-access
                       _state_variables([encoder]),
                       _state_variables([encoder], trainable_only=True))
  if mlm_head is not None:

    def call_mlm(inputs, training=False):
      outputs = _encoder_outputs(encoder, inputs, training)
      outputs["mlm_logits"] = mlm_logits(mlm_head, outputs["sequence_output"],
                                         inputs[MLM_POSITIONS])
      return outputs

    module.mlm = _SubObject(_traced(call_mlm, _ids_spec(with_positions=True)),
                            _state_variables(models),
                            _state_variables(models, trainable_only=True), name="mlm")
  module.vocab_file = tf.saved_model.Asset(os.fspath(vocab_file))
  module.do_lower_case = tf.Variable(bool(do_lower_case), trainable=False, name="do_lower_case")
  module.strip_accents = tf.Variable(
      tokenization.resolve_strip_accents(do_lower_case, strip_accents), trainable=False,
      name="strip_accents")

  def serving_default(inputs):
    outputs = _encoder_outputs(encoder, inputs, training=False)
    layers = outputs.pop("encoder_outputs")
    outputs.update({"encoder_outputs_%d" % i: layer for i, layer in enumerate(layers)})
    return outputs

  signature = core.serving_function(serving_default, [_ids_spec()])
  return module, {core.DEFAULT_SIGNATURE: signature}


def export_encoder(export_dir, encoder, vocab_file, do_lower_case, strip_accents=None,
                   mlm_head=None, overwrite=False):
  """Writes the encoder SavedModel (see the module docstring); returns export_dir."""
  module, signatures = build_encoder_module(encoder, vocab_file, do_lower_case, strip_accents,
                                            mlm_head)
  metadata = _encoder_metadata(encoder, mlm_head, vocab_file, do_lower_case, strip_accents)
  return core.save_serving_module(export_dir, module, signatures, metadata, overwrite)


def _encoder_metadata(encoder, mlm_head, vocab_file, do_lower_case, strip_accents, **extra):
  """What the encoder export records (it has no tokenizer to read these from)."""
  return {"task": ENCODER_TASK, "with_mlm": mlm_head is not None,
          "bert_config": encoder.config.to_dict(), "do_lower_case": bool(do_lower_case),
          "strip_accents": tokenization.resolve_strip_accents(do_lower_case, strip_accents),
          "vocab_size": max(tokenization.load_vocab(os.fspath(vocab_file)).values()) + 1,
          **extra}


def build_preprocessor_module(vocab_file, do_lower_case, strip_accents=None, seq_length=128):
  """The preprocessor SavedModel's root object and its serving_default signature."""
  tokenizer = core.make_tokenizer(vocab_file, do_lower_case, strip_accents)
  if tokenizer.cls_id is None or tokenizer.sep_id is None:
    raise UserInputError("Vocab file %s has no [CLS] or [SEP] token; the preprocessor cannot "
                         "pack inputs." % vocab_file)
  checks.check_seq_length(seq_length, None, 2, flag="seq_length")  # [CLS] and [SEP]
  module = _ExportRoot(tokenizer, [])
  sentences = tf.TensorSpec([None], tf.string, name="sentences")

  def call(strings):
    return tokenizer.encode(strings, seq_length=seq_length)

  call = core.serving_function(call, [sentences])
  module._set_reusable(call, [], [])  # pylint: disable=protected-access

  module.tokenize = _SubObject(core.serving_function(tokenizer.tokenize_words, [sentences]),
                               tokenizer=tokenizer, name="tokenize")
  special = {"start_of_sequence_id": tokenizer.cls_id, "end_of_segment_id": tokenizer.sep_id,
             "padding_id": tokenizer.pad_id, "mask_id": tokenizer.mask_id,
             "vocab_size": tokenizer.vocab_size}
  special = {k: v for k, v in special.items() if v is not None}
  module.tokenize.get_special_tokens_dict = core.serving_function(
      lambda: {k: tf.constant(v, tf.int32) for k, v in special.items()}, [])

  def pack(inputs, seq_length=seq_length):
    if not isinstance(inputs, (list, tuple)):
      inputs = [inputs]
    if len(inputs) not in (1, 2):
      raise ValueError("bert_pack_inputs takes a list of 1 or 2 segments, got %d." % len(inputs))
    return packing.pack_inputs(inputs[0], inputs[1] if len(inputs) == 2 else None,
                                    seq_length, tokenizer.cls_id, tokenizer.sep_id)

  pack = tf.function(pack, autograph=False, jit_compile=False)
  for ragged_rank in (1, 2):
    segment = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32, ragged_rank)
    for count in (1, 2):
      pack.get_concrete_function([segment] * count, seq_length=tf.TensorSpec([], tf.int32))
      pack.get_concrete_function([segment] * count)
  module.bert_pack_inputs = _SubObject(pack, name="bert_pack_inputs")
  return module, {core.DEFAULT_SIGNATURE: call}


def export_preprocessor(export_dir, vocab_file, do_lower_case, strip_accents=None,
                        seq_length=128, overwrite=False):
  """Writes the preprocessor SavedModel (see the module docstring); returns export_dir."""
  module, signatures = build_preprocessor_module(vocab_file, do_lower_case, strip_accents,
                                                 seq_length)
  return core.save_serving_module(export_dir, module, signatures,
                                    _preprocessor_metadata(seq_length), overwrite)


def _preprocessor_metadata(seq_length):
  return {"task": PREPROCESSOR_TASK, "seq_length": seq_length}


def export_from_checkpoint(bert_config_file, vocab_file, init_checkpoint, do_lower_case,
                           encoder_export_dir, preprocessor_export_dir, seq_length=128,
                           with_mlm=False, strip_accents=None, inference_precision="float32"):
  """Loads a Google-layout checkpoint and writes both SavedModels (export_tfhub.py).

  The encoder computes in `inference_precision` (bert_tf.utils.precision; its outputs are
  float32 in every precision).

  Everything that can be checked is checked before the first export is written.
  Returns (encoder_export_dir, preprocessor_export_dir).
  """
  if os.path.abspath(encoder_export_dir) == os.path.abspath(preprocessor_export_dir):
    raise UserInputError("--encoder_export_dir and --preprocessor_export_dir are the same "
                         "folder; give each export its own.")
  core.check_export_dir(encoder_export_dir)
  core.check_export_dir(preprocessor_export_dir)
  config = BertConfig.from_json_file(bert_config_file)
  checks.check_vocab(tokenization.load_vocab(vocab_file), config, vocab_file)
  checks.check_seq_length(seq_length, config, 2, flag="--seq_length")
  policy = precision.keras_policy(inference_precision)
  encoder = BertModel(config, dtype=policy)
  head = None
  if with_mlm:
    head = heads.MaskedLMHead(config, encoder.get_embedding_table(), name="mlm", dtype=policy)
    head.build()
  report = checkpoints.load_checkpoint(init_checkpoint, encoder, [head] if head else [])
  if head is not None and head.name in report.skipped_heads:
    raise UserInputError("Checkpoint %s has no masked-LM head (cls/predictions/*); drop "
                         "--with_mlm to export the encoder alone." % report.checkpoint)
  for model in [encoder] + ([head] if head is not None else []):
    precision.finish(model, inference_precision)
  # Built (and so checked) before either export is written.
  preprocessor = build_preprocessor_module(vocab_file, do_lower_case, strip_accents, seq_length)
  encoder_module = build_encoder_module(encoder, vocab_file, do_lower_case, strip_accents, head)
  core.save_serving_module(encoder_export_dir, *encoder_module,
                             _encoder_metadata(encoder, head, vocab_file, do_lower_case,
                                               strip_accents, init_checkpoint=report.checkpoint))
  core.save_serving_module(preprocessor_export_dir, *preprocessor,
                             _preprocessor_metadata(seq_length))
  return encoder_export_dir, preprocessor_export_dir
