"""The frozen BERT features of the feature-based approach, computed once and cached on disk.

Each word's vector of each needed layer (the first piece's, from the window that gives it the
most context, as in fine-tuning) is cached as `<folder>/<split>_layer<k>.npy` (k = 0 the
embedding output, 1..L the hidden layers). The folder's name hashes what the vectors depend on
(checkpoint weights, vocab, casing, max_seq_length, doc_stride, the split's data file), so
another --features mode or a later run reuses the cached layers and computes only the others.
A manifest per split (`<split>.json`) records the data's digest and word count and each layer
file's digest; a file that no longer matches it (replaced, appended to, cut short) is not
trusted: it is computed again and the log says why.
"""

import hashlib
import json
import os
import time

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf import checkpoints, modeling
from bert_tf.checkpoints import run_folder
from bert_tf.tasks.ner.features import convert_document, word_predictions

_WEIGHT_FILES = (".safetensors", ".bin", ".h5", ".msgpack")


def checkpoint_digest(path):
  """sha1 of a checkpoint's identity: a Google checkpoint's .index bytes (they hold every
  tensor's checksum) or an HF folder's weight files."""
  source = checkpoints.open_source(path)
  digest = hashlib.sha1()
  if source.kind == "google":
    run_folder.update_digest(digest, source.path + ".index")
  else:
    for name in sorted(os.listdir(source.path)):
      if name.endswith(_WEIGHT_FILES):
        digest.update(name.encode("utf-8"))
        run_folder.update_digest(digest, os.path.join(source.path, name))
  return digest.hexdigest()


def cache_key(checkpoint_sha1, vocab_file, data_file, do_lower_case, strip_accents,
              max_seq_length, doc_stride):
  """The folder name of one split's cached features: changes with anything they depend on."""
  digest = hashlib.sha1(json.dumps(
      [checkpoint_sha1, do_lower_case, strip_accents, max_seq_length, doc_stride]).encode())
  run_folder.update_digest(digest, vocab_file)
  run_folder.update_digest(digest, data_file)
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
  """Per-word BERT layers of one split under `folder`, checked on every hit and computed where
  missing or no longer trustworthy.

  `data_sha1` and `num_words` identify the split's data (the file's digest, its word count).
  """

  def __init__(self, folder, split, data_sha1, num_words):
    self.folder, self.split = folder, split
    self.data_sha1, self.num_words = data_sha1, num_words

  def path(self, layer):
    return os.path.join(self.folder, "%s_layer%d.npy" % (self.split, layer))

  @property
  def manifest_path(self):
    return os.path.join(self.folder, "%s.json" % self.split)

  def _manifest(self):
    try:
      with open(self.manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
      if not isinstance(manifest.get("layers"), dict):
        raise ValueError("no layers")
      return manifest
    except FileNotFoundError:
      return {"layers": {}}
    except (OSError, ValueError, AttributeError) as e:
      logging.warning("Feature cache manifest %s is damaged (%s); its layers are computed again.",
                      self.manifest_path, e)
      return {"layers": {}}

  def _cached(self, layer, manifest):
    """(array, None) for a cached layer that matches the manifest, else (None, why not)."""
    path = self.path(layer)
    if not os.path.isfile(path):
      return None, None
    entry = manifest["layers"].get(str(layer))
    if not isinstance(entry, dict):
      return None, "the manifest %s does not list it" % self.manifest_path
    if manifest.get("data_sha1") != self.data_sha1 or manifest.get("words") != self.num_words:
      return None, "it was computed from other data than this %s file" % self.split
    if run_folder.file_digest(path) != entry.get("sha1"):
      return None, "the file changed after it was written (replaced, appended to or cut short)"
    try:
      values = np.load(path)
    except (OSError, ValueError, EOFError) as e:
      return None, "it cannot be read (%s)" % e
    if values.ndim != 2 or values.shape[0] != self.num_words:
      return None, "it holds %s vectors for %d words" % (values.shape, self.num_words)
    return values, None

  def load(self, layers, compute):
    """{layer: array}; `compute(missing layers)` gives those not cached (or not trusted), which
    are then saved."""
    manifest = self._manifest()
    found = {}
    for layer in layers:
      values, problem = self._cached(layer, manifest)
      if values is not None:
        found[layer] = values
      elif problem:
        logging.warning("Cached BERT features %s are not used: %s. Computing them again.",
                        self.path(layer), problem)
    missing = [k for k in layers if k not in found]
    if not missing:
      logging.info("BERT features of %s: cache hit (layers %s in %s)", self.split, list(layers),
                   self.folder)
      return found
    logging.info("BERT features of %s: computing layers %s (cached: %s) into %s", self.split,
                 missing, sorted(found) or "none", self.folder)
    os.makedirs(self.folder, exist_ok=True)
    started = time.time()
    computed = compute(missing)
    if manifest.get("data_sha1") != self.data_sha1 or manifest.get("words") != self.num_words:
      manifest = {"layers": {}}
    manifest.update(data_sha1=self.data_sha1, words=self.num_words)
    for layer in missing:
      values = computed[layer]
      tmp = self.path(layer) + ".partial.npy"
      np.save(tmp, values)
      os.replace(tmp, self.path(layer))  # a killed run leaves no half file behind
      manifest["layers"][str(layer)] = {"sha1": run_folder.file_digest(self.path(layer)),
                                        "shape": list(values.shape)}
      found[layer] = values
    tmp = self.manifest_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, self.manifest_path)
    logging.info("BERT features of %s: extracted in %.1f s", self.split, time.time() - started)
    return found
