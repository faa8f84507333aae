"""Sentence embeddings: strings -> [batch, dim] float32, in Python and as a TF-Hub-style SavedModel.

    embedder = text_embedder.load("all-MiniLM-L6-v2/")     # a sentence-transformers folder
    vectors = embedder(tf.constant(["A man is eating.", "Someone eats."]))  # [2, 384]
    text_embedder.export(embedder, "/tmp/minilm_embedder")

A `TextEmbedder` is bert_tf's BertModel, a `pooling.SentencePooling` and the
in-graph tokenizer (`text.BertTextTokenizer`, the original's tokens) joined in one
tf.function: strings are tokenized and packed as `[CLS] text [SEP]` (cut to
max_seq_length - 2 pieces, as sentence-transformers cuts), each batch is cut to its
longest real sequence (modeling.trim_to_longest: the same numbers, less work), the
encoder runs, and the sequence output is pooled (and L2-normalized if the model says
so). The SavedModel holds exactly that function, so the library and the export give
the same vectors.

The SavedModel follows TF Hub's text-embedding convention:
  __call__(strings): string [batch] -> float32 [batch, dim]; so
    `tf.saved_model.load(dir)(tf.constant(texts))` works as for other TF-Hub text
    embeddings.
  signature serving_default: `sentences` in, `embedding` out (TF Serving, saved_model_cli).
  signature serve_ids: input_word_ids, input_mask, input_type_ids in, `embedding` out.
  variables, trainable_variables, regularization_losses: TF Hub's Reusable SavedModel
    attributes.
Loading needs `import tensorflow, tensorflow_text` only, like bert_tf's other
exports (see bert_tf/export/core.py); `assets.extra/bert_tf_export.json` records the
pooling, normalization, max_seq_length and the model folder.
"""

import json
import os

import numpy as np
import tensorflow as tf

from bert_tf import checkpoints, export, modeling
from bert_tf.checkpoints import checks, sentence_models
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError
from bert_tf.pooling import SentencePooling
from bert_tf.utils import precision
from bert_tf.utils.progress import Progress

TASK = "text_embedder"
INPUT_NAME = "sentences"
OUTPUT_NAME = "embedding"


class TextEmbedder(tf.Module):
  """BERT encoder + sentence pooling + in-graph tokenizer; call it with a batch of strings.

  Args:
    encoder: a BertModel with its weights loaded.
    pooling: a SentencePooling.
    tokenizer: a text.BertTextTokenizer matching the encoder's vocabulary.
    max_seq_length: tokens per text at most, [CLS] and [SEP] included.
    prompt: put before every text (a sentence-transformers default prompt).
  """

  def __init__(self, encoder, pooling, tokenizer, max_seq_length, prompt="", name=None):
    super().__init__(name=name)
    checks.check_seq_length(max_seq_length, encoder.config, 2, flag="max_seq_length")
    if tokenizer.cls_id is None or tokenizer.sep_id is None:
      raise UserInputError("The vocabulary has no [CLS] or [SEP] token; it cannot pack texts.")
    self.encoder, self.pooling, self.tokenizer = encoder, pooling, tokenizer
    self.max_seq_length = max_seq_length
    self.prompt = prompt or ""
    self.dimension = encoder.config.hidden_size * len(pooling.modes)
    self.call = export.serving_function(self.embed_texts, [export.text_spec(INPUT_NAME)])
    self._embed_pairs = export.serving_function(
        self.embed_texts, [export.text_spec("text_a"), export.text_spec("text_b")])

  def __call__(self, texts):
    """Strings [batch] -> float32 [batch, dim] (one traced graph for every batch)."""
    return self.call(texts)

  def encode(self, texts, texts_b=None):
    """The packed, right-padded int32 inputs [batch, max_seq_length] of a batch of texts."""
    texts = tf.convert_to_tensor(texts, tf.string)
    if self.prompt:
      texts = tf.strings.join([self.prompt, texts])
    return self.tokenizer.encode(texts, texts_b, seq_length=self.max_seq_length)

  def embed_ids(self, inputs):
    """The float32 [batch, dim] embeddings of packed inputs (cut to the longest real row)."""
    inputs = modeling.trim_to_longest(modeling.encoder_inputs(inputs), min_length=1)
    outputs = self.encoder(inputs, training=False)
    return self.pooling(outputs["sequence_output"], inputs["input_mask"])

  def embed_texts(self, texts, texts_b=None):
    """Strings [batch] (and optional second segments) -> float32 [batch, dim]."""
    return self.embed_ids(self.encode(texts, texts_b))

  def embed(self, texts, batch_size=32, texts_b=None):
    """A list of strings -> numpy float32 [len(texts), dim], `batch_size` texts per call.

    Texts are batched in order of length (as sentence-transformers does), so a batch
    has little padding; the rows come back in the input order.
    """
    texts = list(texts)
    if texts_b is not None and len(texts_b) != len(texts):
      raise ValueError("texts and texts_b differ in length (%d, %d)." % (len(texts),
                                                                        len(texts_b)))
    out = np.zeros((len(texts), self.dimension), np.float32)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    for start in range(0, len(order), batch_size):
      rows = order[start:start + batch_size]
      batch = tf.constant([texts[i] for i in rows], tf.string)
      if texts_b is None:
        vectors = self(batch)
      else:
        vectors = self._embed_pairs(batch, tf.constant([texts_b[i] or "" for i in rows],
                                                       tf.string))
      out[rows] = vectors.numpy()
    return out


# ------------------------------------------------------------------------------ building

def build(source, pooling="mean", normalize=False, max_seq_length=None, do_lower_case=None,
          strip_accents=None, vocab_file=None, config=None, prompt="",
          inference_precision="float32"):
  """A TextEmbedder from any checkpoint source (Google prefix/folder or HF folder).

  `config`, `vocab_file` and the casing default to what the source has beside it
  (an HF folder's tokenizer_config.json; lower-casing otherwise); `max_seq_length`
  to the config's max_position_embeddings; the encoder computes in `inference_precision`
  (bert_tf.utils.precision).
  """
  precision.check(inference_precision)
  source = checkpoints.open_source(source)
  config = config or source.config
  vocab_file = vocab_file or source.vocab_file
  if config is None or vocab_file is None:
    raise UserInputError("Checkpoint %s has no %s beside it; pass it explicitly." %
                         (source.path, "config" if config is None else "vocab.txt"))
  if do_lower_case is None:
    casing = source.tokenizer or {"do_lower_case": True, "strip_accents": strip_accents}
    do_lower_case, strip_accents = casing["do_lower_case"], casing["strip_accents"]
  tokenizer = export.make_tokenizer(vocab_file, do_lower_case, strip_accents)
  if tokenizer.vocab_size > config.vocab_size:
    raise UserInputError("Vocab file %s has %d tokens but the model's vocab_size is %d; use the "
                         "vocab that belongs to the checkpoint." %
                         (vocab_file, tokenizer.vocab_size, config.vocab_size))
  if max_seq_length is None:
    max_seq_length = config.max_position_embeddings
  encoder = modeling.BertModel(config, dtype=precision.keras_policy(inference_precision))
  checkpoints.load_checkpoint(source, encoder)
  precision.finish(encoder, inference_precision)
  modes = sentence_models.parse_pooling_mode(pooling, "pooling") if isinstance(
      pooling, str) else tuple(pooling)
  return TextEmbedder(encoder, SentencePooling(modes, normalize, name="pooling"), tokenizer,
                      max_seq_length, prompt)


def load(model_dir, max_seq_length=None, inference_precision="float32"):
  """The TextEmbedder of a sentence-transformers folder (bert_tf/checkpoints/sentence_models.py
  reads it).

  `max_seq_length` overrides the folder's (sentence_bert_config.json).
  """
  model = sentence_models.read_sentence_model(model_dir)
  if max_seq_length is not None:
    limit = model.config.max_position_embeddings
    if not isinstance(max_seq_length, int) or not 2 <= max_seq_length <= limit:
      raise UserInputError("--max_seq_length=%r must be between 2 and max_position_embeddings="
                           "%d of %s." % (max_seq_length, limit, model.source.config_file))
  embedder = build(model.source, model.pooling, model.normalize,
                   max_seq_length or model.max_seq_length, model.do_lower_case,
                   model.strip_accents, prompt=model.prompt,
                   inference_precision=inference_precision)
  embedder.sentence_model = model
  return embedder


# ------------------------------------------------------------------------------ exporting

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
      export.DEFAULT_SIGNATURE: export.serving_function(serving_default,
                                                        [export.text_spec(INPUT_NAME)]),
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
  return export_embedder(load(model_dir, max_seq_length, inference_precision), export_dir,
                         overwrite)


# ------------------------------------------------------------------------------ files

FROM_MODEL = "from_model"


def for_extract_features(pooling, model_dir, init_checkpoint, bert_config_file, vocab_file,
                         do_lower_case, strip_accents, max_seq_length, given_flags=(),
                         inference_precision="float32"):
  """The TextEmbedder extract_features.py's --pooling / --model_dir ask for.

  With --model_dir the sentence-transformers folder says everything (its own
  max_seq_length unless the flag is given); otherwise the checkpoint flags are the
  per-token run's, pooled from the last layer without normalization.
  `given_flags` names the flags set on the command line.
  """
  if "layers" in given_flags:
    raise UserInputError("--layers selects per-token features; pooled sentence embeddings come "
                         "from the last layer. Drop --layers (or --pooling/--model_dir).")
  if model_dir:
    if pooling not in (None, "", FROM_MODEL):
      raise UserInputError("--model_dir brings its own pooling; drop --pooling=%s (or use "
                           "--pooling=%s)." % (pooling, FROM_MODEL))
    clashing = [n for n, v in (("init_checkpoint", init_checkpoint),
                               ("bert_config_file", bert_config_file),
                               ("vocab_file", vocab_file)) if v]
    clashing += [n for n in ("do_lower_case", "strip_accents") if n in given_flags]
    if clashing:
      raise UserInputError("--model_dir brings its own weights, config, vocab and casing; drop "
                           "%s." % ", ".join("--" + n for n in clashing))
    return load(model_dir, max_seq_length if "max_seq_length" in given_flags else None,
                inference_precision)
  if pooling == FROM_MODEL:
    raise UserInputError("--pooling=%s needs --model_dir=FOLDER (a sentence-transformers "
                         "model)." % FROM_MODEL)
  missing = [n for n, v in (("init_checkpoint", init_checkpoint),
                            ("bert_config_file", bert_config_file),
                            ("vocab_file", vocab_file)) if not v]
  if missing:
    raise UserInputError("missing required flag(s): %s" % ", ".join("--" + n for n in missing))
  modes = sentence_models.parse_pooling_mode(pooling, "--pooling")
  config = BertConfig.from_json_file(bert_config_file)
  if max_seq_length > config.max_position_embeddings or max_seq_length < 2:
    raise UserInputError("--max_seq_length=%d must be between 2 and max_position_embeddings=%d "
                         "of %s." % (max_seq_length, config.max_position_embeddings,
                                     bert_config_file))
  return build(init_checkpoint, modes, False, max_seq_length, do_lower_case, strip_accents,
               vocab_file, config, inference_precision=inference_precision)


def write_embeddings(embedder, examples, output_file, batch_size, progress_stream=None):
  """One JSON line per example, {"linex_index": id, "embedding": [...]}; returns the count.

  `examples` have `unique_id`, `text_a` and `text_b` (None or "" for one text), as
  extract_features.py reads them; values are rounded to 6 decimals like its per-token
  features. The file appears only when complete.
  """
  folder = os.path.dirname(os.path.abspath(output_file))
  if not os.path.isdir(folder):
    raise UserInputError("Output folder %s does not exist (check --output_file)." % folder)
  if batch_size < 1:
    raise UserInputError("--batch_size must be positive, got %d." % batch_size)
  examples = list(examples)
  pairs = any(e.text_b for e in examples)
  progress = Progress(len(examples), "examples", "sentence embeddings", stream=progress_stream)
  tmp = output_file + ".partial"
  with open(tmp, "w", encoding="utf-8") as writer:
    for start in range(0, len(examples), batch_size):
      batch = examples[start:start + batch_size]
      vectors = embedder.embed([e.text_a for e in batch], batch_size,
                               [e.text_b or "" for e in batch] if pairs else None)
      for example, vector in zip(batch, vectors):
        writer.write(json.dumps({"linex_index": example.unique_id,
                                 "embedding": [round(x, 6) for x in vector.tolist()]}) + "\n")
      progress.update(len(batch))
  os.replace(tmp, output_file)
  return len(examples)
