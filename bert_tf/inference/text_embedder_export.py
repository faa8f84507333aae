"""A TextEmbedder (bert_tf/inference/text_embedder.py) as a TF-Hub-style text-embedding SavedModel.

    embedder = text_embedder.load("all-MiniLM-L6-v2/")
    text_embedder_export.export_embedder(embedder, "/tmp/minilm_embedder")

The SavedModel follows TF Hub's text-embedding convention:
  __call__(strings): string [batch] -> float32 [batch, dim]; so
    `tf.saved_model.load(dir)(tf.constant(texts))` works as for other TF-Hub text
    embeddings.
  signature serving_default: `sentences` in, `embedding` out (TF Serving, saved_model_cli).
  signature serve_ids: input_word_ids, input_mask, input_type_ids in, `embedding` out.
  variables, trainable_variables, regularization_losses: TF Hub's Reusable SavedModel
    attributes.
Its __call__ is the embedder's own tf.function, so the library and the export give the
same vectors. Loading needs `import tensorflow, tensorflow_text` only, like bert_tf's
other exports (see bert_tf/export/core.py); `assets.extra/bert_tf_export.json` records the
pooling, normalization, max_seq_length and the model folder.
"""

import os

from bert_tf import export
from bert_tf.inference import text_embedder

TASK = "text_embedder"
OUTPUT_NAME = "embedding"


class _EmbedderRoot(export.ServingModule):
  """export.ServingModule with TF Hub's Reusable SavedModel attributes.

  tf.Module's `variables` and `trainable_variables` are properties, which
  tf.saved_model.save does not save; these class attributes let instance lists be
  saved and come back after loading.
  """

  variables = None
  trainable_variables = None
  regularization_losses = None


def build_module(embedder):
  """The SavedModel's root object and its signatures: serving_default (sentences) and
  serve_ids (packed ids, as the other exports)."""
  module = _EmbedderRoot(embedder.tokenizer, [embedder.encoder])
  module.__call__ = embedder.call
  module.variables = list(module.model_variables)
  module.trainable_variables = list(module.model_variables)
  module.regularization_losses = []

  def serving_default(sentences):
    return {OUTPUT_NAME: embedder.call(sentences)}

  def serve_ids(input_word_ids, input_mask, input_type_ids):
    inputs = export.checked_ids(input_word_ids, input_mask, input_type_ids,
                                embedder.encoder.config)
    return {OUTPUT_NAME: embedder.embed_ids(inputs)}

  return module, {
      export.DEFAULT_SIGNATURE: export.serving_function(
          serving_default, [export.text_spec(text_embedder.INPUT_NAME)]),
      # Packed ids in (LiteRT and MediaPipe convert this one: tokenizer tables are no LiteRT ops).
      export.IDS_SIGNATURE: export.serving_function(serve_ids, export.ids_specs())}


def metadata(embedder, **extra):
  """What the export records about itself (assets.extra/bert_tf_export.json)."""
  out = {"task": TASK, "pooling": list(embedder.pooling.modes),
         "normalize": embedder.pooling.normalize, "max_seq_length": embedder.max_seq_length,
         "dimension": embedder.dimension, "prompt": embedder.prompt,
         "bert_config": embedder.encoder.config.to_dict()}
  model = getattr(embedder, "sentence_model", None)
  if model is not None:
    out.update({"model_dir": os.path.abspath(model.folder), "similarity": model.similarity})
  out.update(extra)
  return out


def export_embedder(embedder, export_dir, overwrite=False):
  """Writes the SavedModel (see the module docstring); returns export_dir."""
  module, signatures = build_module(embedder)
  return export.save_serving_module(export_dir, module, signatures, metadata(embedder),
                                    overwrite)


def export_from_folder(model_dir, export_dir, max_seq_length=None, overwrite=False,
                       inference_precision="float32"):
  """export_text_embedder.py: a sentence-transformers folder -> the SavedModel."""
  export.check_export_dir(export_dir, overwrite)  # before the weights are read
  embedder = text_embedder.load(model_dir, max_seq_length, inference_precision)
  return export_embedder(embedder, export_dir, overwrite)
