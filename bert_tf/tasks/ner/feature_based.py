"""The feature-based approach of section 5.3 (Table 7): BERT frozen, its activations fed to
"a randomly initialized two-layer 768-dimensional BiLSTM before the classification layer".

BERT runs once per data set and checkpoint: each word's vector of each needed layer (the
first piece's, from the window that gives it the most context, as in fine-tuning) is cached
as `<cache_dir>/<key>/<split>_layer<k>.npy` (k = 0 the embedding output, 1..L the hidden
layers). The key hashes everything the vectors depend on (checkpoint weights, vocab,
casing, max_seq_length, doc_stride and the split's data file), so another --features mode
or a later run reuses the cached layers and computes only the missing ones.

The BiLSTM reads one sentence (its words' vectors) at a time, as the CoNLL tagger would;
the representations of Table 7 are a single layer, a concatenation, or a learned
softmax-weighted sum (times a learned scale) of layers.
"""

import hashlib
import json
import os
import time

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from bert_tf import checkpoints, modeling
from bert_tf.errors import UserInputError
from bert_tf.tasks.ner.data import to_iob2
from bert_tf.tasks.ner.features import convert_document, word_predictions

REPRESENTATIONS = ("embeddings", "second_to_last_hidden", "last_hidden",
                   "weighted_sum_last_four", "concat_last_four", "weighted_sum_all")
_WEIGHT_FILES = (".safetensors", ".bin", ".h5", ".msgpack")


def layers_of(representation, num_layers):
  """The cached layer indexes a representation reads (0 = embeddings, L = the last hidden)."""
  return {"embeddings": [0], "second_to_last_hidden": [num_layers - 1],
          "last_hidden": [num_layers], "weighted_sum_last_four": list(range(num_layers - 3,
                                                                            num_layers + 1)),
          "concat_last_four": list(range(num_layers - 3, num_layers + 1)),
          "weighted_sum_all": list(range(1, num_layers + 1))}[representation]


def _update_with_file(digest, path):
  with tf.io.gfile.GFile(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)


def checkpoint_digest(path):
  """sha1 of a checkpoint's identity: a Google checkpoint's .index bytes (they hold every
  tensor's checksum) or an HF folder's weight files."""
  source = checkpoints.open_source(path)
  digest = hashlib.sha1()
  if source.kind == "google":
    _update_with_file(digest, source.path + ".index")
  else:
    for name in sorted(os.listdir(source.path)):
      if name.endswith(_WEIGHT_FILES):
        digest.update(name.encode("utf-8"))
        _update_with_file(digest, os.path.join(source.path, name))
  return digest.hexdigest()


def cache_key(checkpoint_sha1, vocab_file, data_file, do_lower_case, strip_accents,
              max_seq_length, doc_stride):
  """The folder name of one split's cached features: changes with anything they depend on."""
  digest = hashlib.sha1(json.dumps(
      [checkpoint_sha1, do_lower_case, strip_accents, max_seq_length, doc_stride]).encode())
  _update_with_file(digest, vocab_file)
  _update_with_file(digest, data_file)
  return digest.hexdigest()[:16]


def compute_word_features(encoder, documents, tokenizer, max_seq_length, doc_stride, layers,
                          batch_size=32):
  """{layer: float32 [words of all documents, H]}: each word's first-piece vector of each
  layer in `layers`, from its max-context window (documents' words in order)."""
  windows, num_words = [], {}
  for index, document in enumerate(documents):
    words = document.words
    num_words[index] = len(words)
    windows.extend(convert_document(index, words, None, tokenizer, max_seq_length, doc_stride))

  @tf.function(reduce_retracing=True)
  def forward(inputs):
    outputs = encoder(inputs, training=False)
    every = [outputs["embedding_output"]] + list(outputs["encoder_outputs"])
    return tf.stack([tf.cast(every[k], tf.float32) for k in layers])  # [n, B, S, H]

  per_window = []
  for start in range(0, len(windows), batch_size):
    batch = windows[start:start + batch_size]
    inputs = {name: tf.constant([getattr(w, field) for w in batch], tf.int32)
              for name, field in zip(modeling.INPUT_NAMES,
                                     ("input_ids", "input_mask", "segment_ids"))}
    values = forward(inputs).numpy()
    per_window.extend(np.moveaxis(values, 0, 2))  # [S, n, H] per window
  rows = word_predictions(windows, per_window, num_words)
  stacked = np.stack([row for index in range(len(documents)) for row in rows[index]])
  return {k: np.ascontiguousarray(stacked[:, i]) for i, k in enumerate(layers)}


class FeatureCache:
  """Per-word BERT layers of one split under `folder`, computed only where missing."""

  def __init__(self, folder, split):
    self.folder, self.split = folder, split

  def path(self, layer):
    return os.path.join(self.folder, "%s_layer%d.npy" % (self.split, layer))

  def load(self, layers, compute):
    """{layer: array}; `compute(missing layers)` gives those not cached yet, then saved."""
    missing = [k for k in layers if not os.path.isfile(self.path(k))]
    cached = [k for k in layers if k not in missing]
    if not missing:
      logging.info("BERT features of %s: cache hit (layers %s in %s)", self.split, cached,
                   self.folder)
    else:
      logging.info("BERT features of %s: computing layers %s (cached: %s) into %s",
                   self.split, missing, cached or "none", self.folder)
      os.makedirs(self.folder, exist_ok=True)
      started = time.time()
      for layer, values in compute(missing).items():
        tmp = self.path(layer) + ".partial.npy"
        np.save(tmp, values)
        os.replace(tmp, self.path(layer))  # a killed run leaves no half file behind
      logging.info("BERT features of %s: extracted in %.1f s", self.split,
                   time.time() - started)
    return {k: np.load(self.path(k)) for k in layers}


def sentence_arrays(documents, word_vectors, labels=None):
  """Per sentence, padded: (features [N, T, ...], mask [N, T] bool, label ids [N, T]).

  `word_vectors` [words, ...] holds the documents' words in order; `labels` maps each
  sentence's IOB2 tags to ids (None: no gold tags, ids 0)."""
  sentences = [s for d in documents for s in d.sentences]
  longest = max(len(s.words) for s in sentences)
  shape = (len(sentences), longest) + word_vectors.shape[1:]
  out = np.zeros(shape, np.float32)
  mask = np.zeros((len(sentences), longest), bool)
  ids = np.zeros((len(sentences), longest), np.int32)
  start = 0
  for row, sentence in enumerate(sentences):
    n = len(sentence.words)
    out[row, :n] = word_vectors[start:start + n]
    mask[row, :n] = True
    if labels is not None and sentence.tags is not None:
      ids[row, :n] = [labels[t] for t in to_iob2(sentence.tags)]
    start += n
  return out, mask, ids


@keras.saving.register_keras_serializable("bert_tf")
class LayerMix(keras.layers.Layer):
  """[B, T, layers, H] -> [B, T, H']: one layer, the concatenation, or the softmax-weighted
  sum of the layers times a learned scale (ELMo's scalar mix)."""

  def __init__(self, mode, **kwargs):
    super().__init__(**kwargs)
    self.mode = mode

  def build(self, input_shape):
    if self.mode == "weighted_sum":
      self.layer_weights = self.add_weight(shape=(input_shape[2],), initializer="zeros",
                                           name="layer_weights")
      self.scale = self.add_weight(shape=(), initializer="ones", name="scale")

  def call(self, x):
    if self.mode == "weighted_sum":
      weights = keras.ops.softmax(self.layer_weights)
      return self.scale * keras.ops.einsum("btlh,l->bth", x, weights)
    if self.mode == "concat":
      return keras.ops.concatenate([x[:, :, i] for i in range(x.shape[2])], axis=-1)
    return x[:, :, 0]

  def get_config(self):
    return {**super().get_config(), "mode": self.mode}


def build_tagger(representation, num_layers, hidden_size, num_labels, lstm_units):
  """The BiLSTM tagger over word features [B, T, layers, H] and a word mask [B, T]."""
  mode = ("weighted_sum" if representation.startswith("weighted_sum") else
          "concat" if representation.startswith("concat") else "single")
  features = keras.Input((None, num_layers, hidden_size), name="features")
  mask = keras.Input((None,), dtype="bool", name="mask")
  x = LayerMix(mode, name="layer_mix")(features)
  for index in range(2):
    x = keras.layers.Bidirectional(keras.layers.LSTM(lstm_units, return_sequences=True),
                                   name="bilstm_%d" % index)(x, mask=mask)
  logits = keras.layers.Dense(num_labels, name="classifier")(x)
  return keras.Model([features, mask], logits, name="ner_feature_based")


class _EpochTimes(keras.callbacks.Callback):

  def on_epoch_begin(self, epoch, logs=None):
    self.started = time.time()

  def on_epoch_end(self, epoch, logs=None):
    logging.info("Epoch %d: loss %.4f, %.1f s", epoch + 1, (logs or {}).get("loss", float("nan")),
                 time.time() - self.started)


def train_tagger(model, features, mask, label_ids, learning_rate, epochs, batch_size, seed):
  """Adam on the masked cross-entropy of every word, `epochs` passes, shuffled by `seed`."""
  keras.utils.set_random_seed(seed)
  model.compile(optimizer=keras.optimizers.Adam(learning_rate),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  model.fit([features, mask], label_ids, sample_weight=mask.astype(np.float32),
            batch_size=batch_size, epochs=epochs, shuffle=True, verbose=0,
            callbacks=[_EpochTimes()])


def predict_tagger(model, features, mask, batch_size):
  """Softmax probabilities [N, T, labels] of the sentences."""
  logits = model.predict([features, mask], batch_size=batch_size, verbose=0)
  return tf.nn.softmax(logits, axis=-1).numpy()


def token_metrics(probabilities, mask, label_ids):
  """eval_loss (mean cross-entropy) and eval_token_accuracy over the words of `mask`."""
  picked = np.take_along_axis(probabilities, label_ids[..., None], -1)[..., 0][mask]
  correct = (probabilities.argmax(-1) == label_ids)[mask]
  return {"eval_loss": float(np.mean(-np.log(np.maximum(picked, 1e-12)))),
          "eval_token_accuracy": float(np.mean(correct))}


def word_rows(probabilities, mask):
  """The rows of every word [words, labels], in document order (sentence_arrays' inverse)."""
  return probabilities[mask]


def check_representation(representation, num_layers):
  if representation not in REPRESENTATIONS:
    raise UserInputError("--features=%s is not one of %s." % (representation,
                                                             ", ".join(REPRESENTATIONS)))
  if representation.endswith("last_four") and num_layers < 4:
    raise UserInputError("--features=%s needs at least 4 hidden layers; the model has %d "
                         "(pick another --features)." % (representation, num_layers))
