"""The feature-based approach (Table 7) as the runner template drives it: what trains,
evaluates and predicts is a BiLSTM tagger over cached BERT word features, in place of the
fine-tuning Trainer, so run_ner's two approaches share one sequence of steps.

The frozen encoder is built, and its checkpoint read, on the first cache miss only. The
tagger's weights are saved with a record of what they were trained with, which later runs
are checked against (feature_based.check_record).
"""

import math
import os
import time

from absl import logging

from bert_tf import checkpoints
from bert_tf.checkpoints import run_folder
from bert_tf.errors import UserInputError
from bert_tf.modeling import BertModel
from bert_tf.tasks.ner import feature_based as fb
from bert_tf.tasks.ner import feature_cache

DEFAULT_REPRESENTATION = "concat_last_four"  # the paper's best


def weights_path(output_dir, representation):
  return os.path.join(output_dir, "feature_based_%s.weights.h5" % representation)


class SavedTagger:
  """The tagger of one --features and --lstm_units in --output_dir (its weights and record),
  and the frozen BERT checkpoint whose features it reads (identified by its digest)."""

  def __init__(self, output_dir, representation, lstm_units, init_checkpoint):
    if not init_checkpoint:
      raise UserInputError("--approach=feature_based needs --init_checkpoint (the frozen "
                           "BERT whose features the BiLSTM reads).")
    self.representation = representation or DEFAULT_REPRESENTATION
    self.weights = weights_path(output_dir, self.representation)
    self.output_dir, self.lstm_units, self.init_checkpoint = output_dir, lstm_units, init_checkpoint
    self.checkpoint_sha1 = feature_cache.checkpoint_digest(init_checkpoint)

  def trained_record(self):
    """(record, its path) of the saved tagger, checked against this run's --lstm_units and
    --init_checkpoint."""
    if not os.path.isfile(self.weights):
      raise UserInputError("No %s in --output_dir=%s: train with --do_train and --features=%s "
                           "first." % (os.path.basename(self.weights), self.output_dir,
                                       self.representation))
    return (fb.check_record(self.weights, {"lstm_units": self.lstm_units}, self.init_checkpoint,
                            self.checkpoint_sha1), fb.record_path(self.weights))

  def trainer(self, config, strategy, tokenizer, labels, vocab_file, max_seq_length, doc_stride,
              learning_rate, seed, compute_batch_size):
    """A FeatureBasedTrainer of a new tagger for `labels` (a RunLabels), over the BERT
    features of windows of `max_seq_length` pieces, `doc_stride` apart, cut by `tokenizer` (of
    `vocab_file`): with its casing, what the cached features depend on besides the checkpoint
    and the data (feature_cache.cache_key). `compute_batch_size`: the encoder's batch when
    computing them."""
    key = dict(checkpoint_sha1=self.checkpoint_sha1, vocab_file=vocab_file,
               do_lower_case=tokenizer.do_lower_case, strip_accents=tokenizer.strip_accents,
               max_seq_length=max_seq_length, doc_stride=doc_stride)
    features = CachedWordFeatures(self.init_checkpoint, config, strategy, tokenizer,
                                  os.path.join(self.output_dir, "bert_features"), key,
                                  compute_batch_size)
    record = {**labels.record(), "features": self.representation, "lstm_units": self.lstm_units,
              "checkpoint": self.init_checkpoint, "checkpoint_sha1": self.checkpoint_sha1}
    return FeatureBasedTrainer.build(config, features, record, self.weights, learning_rate, seed)


def train_steps(documents, num_train_epochs, batch_size):
  """(steps, warmup steps): whole epochs of sentence batches, no warmup (Adam at a constant
  rate, as the tagger trains)."""
  batches = -(-sum(len(d.sentences) for d in documents) // batch_size)
  return max(1, int(math.ceil(num_train_epochs))) * batches, 0


class CachedWordFeatures:
  """Each split's BERT word features (feature_cache), as SentenceBatches.

  `key` holds what the features depend on besides the data file (feature_cache.cache_key's
  other arguments); `compute_batch_size` is the encoder's batch when computing them.
  """

  def __init__(self, init_checkpoint, config, strategy, tokenizer, cache_dir, key,
               compute_batch_size):
    self.init_checkpoint, self.config, self.strategy = init_checkpoint, config, strategy
    self.tokenizer, self.cache_dir, self.key = tokenizer, cache_dir, key
    self.compute_batch_size = compute_batch_size
    self._encoder = None

  def _compute(self, documents, layers):
    if self._encoder is None:
      with self.strategy.scope():
        self._encoder = BertModel(self.config)
      checkpoints.load_checkpoint(self.init_checkpoint, self._encoder)
    return feature_cache.compute_word_features(
        self._encoder, documents, self.tokenizer, self.key["max_seq_length"],
        self.key["doc_stride"], layers, self.compute_batch_size)

  def batches(self, split, documents, data_file, layers, label_ids, batch_size):
    """SentenceBatches of `documents` (read from `data_file`): words [W, layers, H]."""
    fb.warn_long_sentences(documents, data_file)
    cache = feature_cache.FeatureCache(
        os.path.join(self.cache_dir, feature_cache.cache_key(data_file=data_file, **self.key)),
        split, run_folder.file_digest(data_file), sum(len(d.words) for d in documents))
    per_layer = cache.load(layers, lambda missing: self._compute(documents, missing))
    words = fb.stack_layers(per_layer, layers)
    return fb.SentenceBatches(words, fb.sentence_lengths(documents), label_ids, batch_size)


class FeatureBasedTrainer:
  """The tagger, trained, restored, evaluated and applied as runner.run_task asks a trainer.

  `record` is what the weights are saved with (labels, scheme, features, units, checkpoint).
  """

  chief = True  # one process

  def __init__(self, model, features, layers, weights, record, learning_rate, seed):
    self.model, self.features, self.layers = model, features, layers
    self.weights, self.record = weights, record
    self.learning_rate, self.seed = learning_rate, seed

  @classmethod
  def build(cls, config, features, record, weights, learning_rate, seed):
    """A new tagger for `record`'s representation, labels and units, over `features`."""
    representation = record["features"]
    fb.check_representation(representation, config.num_hidden_layers)
    layers = fb.layers_of(representation, config.num_hidden_layers)
    model = fb.build_tagger(representation, len(layers), config.hidden_size,
                            len(record["labels"]), record["lstm_units"])
    return cls(model, features, layers, weights, record, learning_rate, seed)

  def batches(self, split, documents, data_file, label_ids, batch_size):
    return self.features.batches(split, documents, data_file, self.layers, label_ids,
                                 batch_size)

  def train(self, batches, num_steps, save_steps=None, log_steps=None):
    """num_steps // batches whole epochs; the weights and their record saved at the end."""
    del save_steps, log_steps  # the tagger saves once, after its last epoch
    epochs = max(1, num_steps // len(batches.batches))
    logging.info("Training the BiLSTM on %s: %d sentences in %d batches of similar length, "
                 "%d epochs", self.record["features"], len(batches.lengths),
                 len(batches.batches), epochs)
    started = time.time()
    fb.train_tagger(self.model, batches, self.learning_rate, epochs, self.seed)
    logging.info("Trained in %.1f s", time.time() - started)
    self.model.save_weights(self.weights)
    fb.write_record(self.weights, self.record)

  def restore_or_initialize(self):
    self.model.load_weights(self.weights)

  def evaluate(self, batches, max_steps=None, with_predictions=False):
    """Token loss and accuracy (and, `with_predictions`, each word's probabilities)."""
    del max_steps  # every batch
    outputs = self.predict(batches)
    result = fb.token_metrics(outputs["word_probabilities"], batches.label_ids)
    return (result, outputs) if with_predictions else result

  def predict(self, batches):
    return {"word_probabilities": fb.predict_tagger(self.model, batches)}
