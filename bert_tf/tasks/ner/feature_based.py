"""The feature-based approach of section 5.3 (Table 7): BERT frozen, its activations fed to
"a randomly initialized two-layer 768-dimensional BiLSTM before the classification layer".

BERT's per-word layers come from feature_cache. The BiLSTM reads one sentence (its words'
vectors) at a time, as the CoNLL tagger would, in batches of sentences of similar length (each
padded to its own longest, so a long sentence costs its own length, not every sentence's).
The representations of Table 7 are a single layer, a concatenation, or a learned
softmax-weighted sum (times a learned scale) of layers. The trained tagger's weights are saved
with a record of what they were trained with (labels, representation, units, checkpoint), which
a later run must match.
"""

import time

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import run_folder
from bert_tf.errors import UserInputError
from bert_tf.tasks.ner.labels import read_json

REPRESENTATIONS = ("embeddings", "second_to_last_hidden", "last_hidden",
                   "weighted_sum_last_four", "concat_last_four", "weighted_sum_all")
# A sentence this long is most likely sentences without the blank lines between them.
LONG_SENTENCE_WORDS = 250
# Batches are padded to a multiple of this many words (fewer distinct shapes to trace).
_LENGTH_STEP = 8


def layers_of(representation, num_layers):
  """The cached layer indexes a representation reads (0 = embeddings, L = the last hidden)."""
  return {"embeddings": [0], "second_to_last_hidden": [num_layers - 1],
          "last_hidden": [num_layers], "weighted_sum_last_four": list(range(num_layers - 3,
                                                                            num_layers + 1)),
          "concat_last_four": list(range(num_layers - 3, num_layers + 1)),
          "weighted_sum_all": list(range(1, num_layers + 1))}[representation]


def stack_layers(per_layer, layers):
  """[words, len(layers), H] of {layer: [words, H]}, in the order of `layers`."""
  return np.stack([per_layer[k] for k in layers], axis=1)


def sentence_lengths(documents):
  """The word count of every sentence of `documents`, in order."""
  return [len(s.words) for d in documents for s in d.sentences]


def warn_long_sentences(documents, path):
  """Logs the sentences of LONG_SENTENCE_WORDS words or more (each is one BiLSTM pass)."""
  for document in documents:
    for sentence in document.sentences:
      if len(sentence.words) >= LONG_SENTENCE_WORDS:
        logging.warning("%s line %d: a sentence of %d words (a blank line between sentences "
                        "missing?). The BiLSTM reads it in one pass, in a batch of its own "
                        "length.", path, sentence.line, len(sentence.words))


class SentenceBatches:
  """Sentences of per-word vectors in batches of similar length.

  `words` [W, ...] holds every word's vector in order, `lengths` the sentences' word counts
  (summing to W), `label_ids` [W] the gold ids (or None). A batch is (features [b, T, ...],
  mask [b, T]), ids [b, T] and per-word weights that make the loss the mean over its words.
  """

  def __init__(self, words, lengths, label_ids, batch_size):
    self.words, self.label_ids = words, label_ids
    self.lengths = np.asarray(lengths, np.int64)
    self.offsets = np.concatenate([[0], np.cumsum(self.lengths)])
    order = np.argsort(self.lengths, kind="stable")
    self.batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]

  def batch(self, index):
    rows = self.batches[index]
    longest = max(1, int(self.lengths[rows].max()))
    width = -(-longest // _LENGTH_STEP) * _LENGTH_STEP
    features = np.zeros((len(rows), width) + self.words.shape[1:], np.float32)
    mask = np.zeros((len(rows), width), bool)
    ids = np.zeros((len(rows), width), np.int32)
    for i, sentence in enumerate(rows):
      start, n = self.offsets[sentence], self.lengths[sentence]
      features[i, :n] = self.words[start:start + n]
      mask[i, :n] = True
      if self.label_ids is not None:
        ids[i, :n] = self.label_ids[start:start + n]
    weights = mask * np.float32(mask.size / max(1, mask.sum()))
    return (features, mask), ids, weights

  def dataset(self, seed):
    """The batches as a tf.data.Dataset, in an order shuffled anew (from `seed`) each epoch."""
    rng = np.random.RandomState(seed)
    shape = (None, None) + self.words.shape[1:]

    def generate():
      for index in rng.permutation(len(self.batches)):
        yield self.batch(index)

    spec = lambda s, dtype: tf.TensorSpec(s, dtype)
    return tf.data.Dataset.from_generator(generate, output_signature=(
        (spec(shape, tf.float32), spec((None, None), tf.bool)),
        spec((None, None), tf.int32), spec((None, None), tf.float32)))

  def scatter(self, index, values):
    """Per-word rows of batch `index`'s [b, T, ...] `values`, as (word positions, rows)."""
    rows = self.batches[index]
    positions = np.concatenate([np.arange(self.offsets[s], self.offsets[s + 1]) for s in rows])
    picked = np.concatenate([values[i, :self.lengths[s]] for i, s in enumerate(rows)])
    return positions, picked


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


def train_tagger(model, batches, learning_rate, epochs, seed):
  """Adam on the mean cross-entropy of each batch's words, `epochs` passes, batch order
  shuffled by `seed`."""
  keras.utils.set_random_seed(seed)
  model.compile(optimizer=keras.optimizers.Adam(learning_rate),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  model.fit(batches.dataset(seed), epochs=epochs, verbose=0, callbacks=[_EpochTimes()])


def predict_tagger(model, batches):
  """Softmax probabilities [W, labels] of every word, in the words' order."""
  out = None
  for index in range(len(batches.batches)):
    (features, mask), _, _ = batches.batch(index)
    logits = model.predict_on_batch([features, mask])
    positions, rows = batches.scatter(index, tf.nn.softmax(logits, axis=-1).numpy())
    if out is None:
      out = np.zeros((len(batches.words), rows.shape[-1]), np.float32)
    out[positions] = rows
  return out


def token_metrics(probabilities, label_ids):
  """eval_loss (mean cross-entropy) and eval_token_accuracy over words [W, labels] / [W]."""
  picked = np.take_along_axis(probabilities, label_ids[:, None], -1)[:, 0]
  return {"eval_loss": float(np.mean(-np.log(np.maximum(picked, 1e-12)))),
          "eval_token_accuracy": float(np.mean(probabilities.argmax(-1) == label_ids))}


def record_path(weights_path):
  return weights_path[:-len(".weights.h5")] + ".json"


def write_record(weights_path, record):
  """What the weights at `weights_path` were trained with, beside them."""
  run_folder.write_json(record_path(weights_path), record, sort_keys=False)


def check_record(weights_path, flag_values, checkpoint, checkpoint_sha1):
  """The record of the weights at `weights_path`, after checking this run against it: the
  flags in `flag_values` ({name: value}) and the BERT checkpoint whose features it reads."""
  path = record_path(weights_path)
  record = read_json(path, "Feature-based tagger record")
  if record is None:
    raise UserInputError("%s has no record %s of what it was trained with: train it again with "
                         "--do_train." % (weights_path, path))
  for name, value in flag_values.items():
    if record.get(name) != value:
      raise UserInputError("%s was trained with --%s=%s; this run gives --%s=%s. Pass --%s=%s, "
                           "or train again with --do_train." % (
                               weights_path, name, record.get(name), name, value, name,
                               record.get(name)))
  if record.get("checkpoint_sha1") != checkpoint_sha1:
    raise UserInputError("%s was trained on the features of another BERT checkpoint than "
                         "--init_checkpoint=%s (%s). Pass the checkpoint it was trained on, or "
                         "train again with --do_train." % (weights_path, checkpoint,
                                                          record.get("checkpoint", "unknown")))
  return record


def check_representation(representation, num_layers):
  if representation not in REPRESENTATIONS:
    raise UserInputError("--features=%s is not one of %s." % (representation,
                                                             ", ".join(REPRESENTATIONS)))
  if representation.endswith("last_four") and num_layers < 4:
    raise UserInputError("--features=%s needs at least 4 hidden layers; the model has %d "
                         "(pick another --features)." % (representation, num_layers))
