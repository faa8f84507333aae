"""Sentence embeddings: strings -> [batch, dim] float32, in Python.

    embedder = text_embedder.load("all-MiniLM-L6-v2/")     # a sentence-transformers folder
    vectors = embedder(tf.constant(["A man is eating.", "Someone eats."]))  # [2, 384]
    text_embedder_export.export_embedder(embedder, "/tmp/minilm_embedder")

A `TextEmbedder` is bert_tf's BertModel, a `pooling.SentencePooling` and the
in-graph tokenizer (`text.BertTextTokenizer`, the original's tokens) joined in one
tf.function: strings are tokenized and packed as `[CLS] text [SEP]` (cut to
max_seq_length - 2 pieces, as sentence-transformers cuts), each batch is cut to its
longest real sequence (modeling.trim_to_longest: the same numbers, less work), the
encoder runs, and the sequence output is pooled (and L2-normalized if the model says
so). The SavedModel (bert_tf/inference/text_embedder_export.py) holds exactly that function, so
the library and the export give the same vectors.
"""
import numpy as np
import tensorflow as tf

from bert_tf import checkpoints, export, modeling
from bert_tf.checkpoints import checks, sentence_models
from bert_tf.errors import UserInputError
from bert_tf.pooling import SentencePooling
from bert_tf.utils import precision

# The name of the strings TextEmbedder.call (and the SavedModel's serving_default) takes.
INPUT_NAME = "sentences"


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

  def embed_ids(self, inputs, pack_tokens=False):
    """The float32 [batch, dim] embeddings of packed inputs (cut to the longest real row;
    with `pack_tokens`, each row must hold a real token: BertModel's pack_tokens)."""
    inputs = modeling.trim_to_longest(modeling.encoder_inputs(inputs), min_length=1)
    outputs = self.encoder(inputs, training=False, pack_tokens=pack_tokens)
    return self.pooling(outputs["sequence_output"], inputs["input_mask"])

  def embed_texts(self, texts, texts_b=None):
    """Strings [batch] (and optional second segments) -> float32 [batch, dim]. The tokenizer
    gives each text its [CLS], so the encoder skips the padding of shorter texts."""
    return self.embed_ids(self.encode(texts, texts_b), pack_tokens=True)

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
