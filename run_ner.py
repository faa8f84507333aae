"""Named entity recognition on CoNLL-2003 (paper section 5.3), both approaches of the paper.

Fine-tuning (the default): BERT plus a token-classification layer over each word's first
WordPiece, windows over whole documents ("the maximal document context"):

  python run_ner.py --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --do_lower_case=false --data_dir=$CONLL_DIR \
    --do_train=true --do_eval=true --do_predict=true --max_seq_length=128 --doc_stride=128 \
    --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3 --output_dir=/tmp/ner

Feature-based (Table 7): BERT frozen, its layers (computed once and cached under
--output_dir/bert_features) fed to a two-layer BiLSTM:

  python run_ner.py ... --approach=feature_based --features=concat_last_four --lstm_units=768

--do_eval writes eval_results.txt (conlleval's precision, recall and F1 as fractions, overall
and per type) and eval_predictions.txt; --do_predict writes test_predictions.txt: `word gold
predicted` lines in the data's own tag scheme, which the official conlleval script reads.
See docs/ner.md.
"""

import math
import os
import time

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)
from absl import flags, logging
import numpy as np

from bert_tf import (checkpoints, checks, cli, head_labels, names, run_folder, runner,
                     runner_flags, tokenization, training)
from bert_tf.errors import UserInputError
from bert_tf.modeling import BertModel
from bert_tf.tasks import ner
from bert_tf.tasks.ner import feature_based as fb
from bert_tf.tasks.ner import feature_cache
from bert_tf.tasks.ner import labels as ner_labels

FLAGS = flags.FLAGS

APPROACHES = ("fine_tuning", "feature_based")

flags.DEFINE_string("data_dir", None,
                    "Folder of the CoNLL files: train.txt, dev.txt (or valid.txt), test.txt, or "
                    "the original eng.train, eng.testa, eng.testb.")
flags.DEFINE_enum("tag_scheme", "auto", ["auto"] + list(ner.SCHEMES),
                  "The files' tag scheme (predictions are written in it): auto = detected from "
                  "the training file (else the one stored by training, else the dev/test file).")
flags.DEFINE_list("labels", None,
                  "Comma-separated IOB2 labels (O, B-PER, I-PER, ...). Default: those of the "
                  "training file; runs without --do_train read them from --output_dir.")
flags.DEFINE_integer("doc_stride", 128,
                     "When splitting up a long document into windows, how much stride to take "
                     "between windows.")
flags.DEFINE_enum("approach", "fine_tuning", APPROACHES,
                  "fine_tuning: BERT and the token classifier trained end to end; "
                  "feature_based: BERT frozen, a BiLSTM over its cached features (Table 7).")
flags.DEFINE_enum("features", None, list(fb.REPRESENTATIONS),
                  "The BERT representation of --approach=feature_based (default "
                  "concat_last_four, the paper's best).")
flags.DEFINE_integer("lstm_units", 768, "Units of each direction of the feature-based BiLSTM.")
runner_flags.define_finetuning_flags(
    do_predict_help="Whether to tag the test file.",
    export_help="If set, write a SavedModel here: `serving_default` takes raw text and "
                "returns the entities; `serve_ids` returns per-position logits.")
runner_flags.define_eval_flags()

SPLIT_OF = {"train": "train", "eval": "dev", "predict": "test"}


class NerHooks(runner.TaskHooks):
  """CoNLL NER: documents as examples, windows as features, words tagged by first pieces."""

  one_record_per_example = False  # a long document gives several windows
  eval_with_predictions = True  # conlleval needs each word's prediction

  def __init__(self):
    self.files = {}  # split -> data file
    self.features = {}  # split -> [NerFeature], kept for the word predictions
    self.flag_labels = None
    self._labels = None
    self._scheme = None  # the training file's, or the one stored with the trained model

  # ------------------------------------------------------------------ checks and data

  def check(self, options):
    checks.check_positive("doc_stride", FLAGS.doc_stride)
    checks.check_positive("lstm_units", FLAGS.lstm_units)
    if FLAGS.features and FLAGS.approach != "feature_based":
      raise UserInputError("--features=%s is for --approach=feature_based; drop it or add "
                           "--approach=feature_based." % FLAGS.features)
    if FLAGS.approach == "feature_based":
      if options.export_dir:
        raise UserInputError("--export_dir exports the fine-tuned model; drop it with "
                             "--approach=feature_based.")
      if not options.init_checkpoint:
        raise UserInputError("--approach=feature_based needs --init_checkpoint (the frozen "
                             "BERT whose features the BiLSTM reads).")
    self.flag_labels = ner_labels.from_flag(FLAGS.labels)
    for split, action in runner.SPLITS:
      if getattr(options, action):
        self.files[split] = ner.split_file(FLAGS.data_dir, SPLIT_OF[split])
    if not options.do_train and FLAGS.approach == "fine_tuning":
      self.use_trained_labels(options)  # fails now when there are no labels to predict with

  def use_trained_labels(self, options):
    """Labels (and scheme) of the fine-tuned model a run without training uses: the one in
    --output_dir, else the head of --init_checkpoint, else --labels."""
    stored = ner_labels.read_stored(options.output_dir)
    if stored:
      where = os.path.join(options.output_dir, ner_labels.LABELS_FILE)
      self.use_labels(ner_labels.reconcile(self.flag_labels, stored["labels"], where),
                      stored.get("tag_scheme"))
      return
    if options.init_checkpoint:
      source = checkpoints.open_source(options.init_checkpoint)
      recorded, where = head_labels.recorded_labels(source)
      if recorded and any(n.google in source.shapes for n in names.head_names("ner")):
        self.use_labels(ner_labels.reconcile(self.flag_labels, recorded, where), None)
        return
    if self.flag_labels is None:
      raise UserInputError("No --labels and no %s in --output_dir=%s (a training run writes "
                           "it): pass --labels=O,B-PER,I-PER,... or train first." %
                           (ner_labels.LABELS_FILE, options.output_dir))
    self.use_labels(self.flag_labels, None)

  def use_labels(self, labels, scheme):
    self._labels, self._scheme = list(labels), self._scheme or scheme

  def read_examples(self, run, split):
    path = self.files[split]
    documents = ner.read_conll(path)
    untagged = [s for d in documents for s in d.sentences if s.tags is None]
    if untagged and split in ("train", "eval"):
      raise UserInputError("%s line %d has no tag column; %s needs `word ... tag` lines (tag "
                           "an untagged file with --do_predict)." % (
                               path, untagged[0].line,
                               "training" if split == "train" else "--do_eval"))
    if split == "train":
      self._scheme = (FLAGS.tag_scheme if FLAGS.tag_scheme != "auto" else
                      ner.detect_scheme(documents))
      labels = self.flag_labels or ner.label_list(documents)
      stored = ner_labels.read_stored(run.options.output_dir)
      if stored and sorted(stored["labels"]) == sorted(labels):
        labels = stored["labels"]  # a resumed run keeps its head's order
      self._labels = labels
      logging.info("Training file %s: %s tags, labels %s", path, self._scheme,
                   ",".join(self._labels))
    known = set(self.labels(run))
    for document in documents:
      for sentence in document.sentences:
        for i, tag in enumerate(ner.to_iob2(sentence.tags or [])):
          if tag not in known:
            raise UserInputError("%s line %d: tag %s (IOB2 %s) is not among the labels %s; "
                                 "add it to --labels (or to the training file)." %
                                 (path, sentence.line + i, sentence.tags[i], tag,
                                  ",".join(self.labels(run))))
    return documents

  def labels(self, run):
    if self._labels is None:
      self.use_trained_labels(run.options)
    return self._labels

  def scheme(self, run, documents):
    """The tag scheme predictions of `documents` are written in."""
    if FLAGS.tag_scheme != "auto":
      return FLAGS.tag_scheme
    return self._scheme or ner.detect_scheme(documents)

  def write_labels(self, run):
    ner_labels.write_json(run.output_path(ner_labels.LABELS_FILE),
                          {"labels": self.labels(run), "tag_scheme": self._scheme})

  # -------------------------------------------------------------------- features

  def label_ids(self, run, document):
    index = {label: i for i, label in enumerate(self.labels(run))}
    if any(s.tags is None for s in document.sentences):
      return None
    return [index[t] for s in document.sentences for t in ner.to_iob2(s.tags)]

  def windows(self, run, split, examples):
    """The NerFeatures of `examples` (made once per split, kept for the predictions)."""
    if split not in self.features:
      features = []
      for doc_index, document in enumerate(examples):
        features.extend(ner.convert_document(
            doc_index, document.words, self.label_ids(run, document), run.tokenizer,
            run.options.max_seq_length, FLAGS.doc_stride))
      self.features[split] = features
    return self.features[split]

  def encode(self, run, split, examples):
    for feature in self.windows(run, split, examples):
      yield ner.encode_feature(feature)

  def train_steps(self, run, examples):
    """Steps over windows (a batch is windows, not documents)."""
    return run.options.train_steps(len(self.windows(run, "train", examples)))

  def describe(self, split, examples):
    return "%d documents, %d windows" % (len(examples), len(self.features[split]))

  def feature_spec(self, run, split):
    return ner.feature_spec(run.options.max_seq_length)

  def settings(self, run):
    """The labels shape the head; the training file's scheme and the stride its data."""
    return {"labels": self.labels(run), "tag_scheme": self._scheme,
            "doc_stride": FLAGS.doc_stride}

  def head_labels(self, run):
    return "ner", self.labels(run), "--labels"

  def make_task(self, run):
    return ner.NerTask(run.config, len(self.labels(run)), **run.options.task_options())

  def on_start(self, run):
    if run.options.do_train and run.trainer.chief:
      self.write_labels(run)

  # ---------------------------------------------------------------- outputs

  def sentences(self, run, split, examples, probabilities):
    """[(words, gold, predicted)] of `examples` from per-window probabilities."""
    rows = ner.word_predictions(self.features[split], probabilities,
                                {i: len(d.words) for i, d in enumerate(examples)})
    return ner.sentence_predictions(examples, rows, self.labels(run),
                                    self.scheme(run, examples))

  def postprocess_eval(self, run, examples, result, outputs):
    sentences = self.sentences(run, "eval", examples, outputs["probabilities"])
    return write_outputs(run, "eval_predictions.txt", sentences, result)

  def postprocess_predict(self, run, examples, outputs):
    sentences = self.sentences(run, "predict", examples, outputs["probabilities"])
    write_outputs(run, "test_predictions.txt", sentences)

  def export(self, run):
    from bert_tf.tasks.ner.export import export_ner
    options = run.options
    export_ner(options.export_dir, run.serving_model(), options.vocab_file, options.do_lower_case,
               options.max_seq_length, self.labels(run), stride=FLAGS.doc_stride,
               strip_accents=options.strip_accents)


def write_outputs(run, name, sentences, result=None):
  """Writes a prediction file; with `result` (evaluation), adds conlleval's scores to it."""
  path = run.output_path(name)
  ner.write_conll(path, sentences)
  logging.info("Wrote %d sentences to %s", len(sentences), path)
  scores = ner.scores_of(sentences)
  if result is None:
    if scores:
      logging.info("  test f1 = %.4f (precision %.4f, recall %.4f)", scores["f1"],
                   scores["precision"], scores["recall"])
    return None
  return {**result, **(scores or {})}


# ------------------------------------------------------------ the feature-based approach

def run_feature_based(options, hooks):
  """Checks, cached BERT features, then the BiLSTM trained, evaluated and applied."""
  run = runner.prepare(options, hooks)
  representation = FLAGS.features or "concat_last_four"
  num_layers = run.config.num_hidden_layers
  fb.check_representation(representation, num_layers)
  layers = fb.layers_of(representation, num_layers)
  checkpoint_sha1 = feature_cache.checkpoint_digest(options.init_checkpoint)
  weights = run.output_path("feature_based_%s.weights.h5" % representation)
  if not options.do_train:
    if not os.path.isfile(weights):
      raise UserInputError("No %s in --output_dir=%s: train with --do_train and "
                           "--features=%s first." % (os.path.basename(weights),
                                                      options.output_dir, representation))
    record = fb.check_record(weights, {"lstm_units": FLAGS.lstm_units}, options.init_checkpoint,
                             checkpoint_sha1)
    hooks.use_labels(ner_labels.reconcile(hooks.flag_labels, record["labels"],
                                          fb.record_path(weights)), record.get("tag_scheme"))
  inputs = {split: hooks.read_examples(run, split)
            for split, action in runner.SPLITS if getattr(options, action)}
  labels = hooks.labels(run)
  label_index = {label: i for i, label in enumerate(labels)}
  encoder = []  # built on the first cache miss only

  def compute(documents):
    def missing(wanted):
      if not encoder:
        with run.strategy.scope():
          model = BertModel(run.config)
        checkpoints.load_checkpoint(options.init_checkpoint, model)
        encoder.append(model)
      return feature_cache.compute_word_features(
          encoder[0], documents, run.tokenizer, options.max_seq_length, FLAGS.doc_stride,
          wanted, options.predict_batch_size)
    return missing

  def batches(split, batch_size):
    documents, data_file = inputs[split], hooks.files[split]
    fb.warn_long_sentences(documents, data_file)
    key = feature_cache.cache_key(
        checkpoint_sha1, options.vocab_file, data_file, options.do_lower_case,
        tokenization.resolve_strip_accents(options.do_lower_case, options.strip_accents),
        options.max_seq_length, FLAGS.doc_stride)
    cache = feature_cache.FeatureCache(
        run.output_path(os.path.join("bert_features", key)), split,
        run_folder.file_digest(data_file), sum(len(d.words) for d in documents))
    per_layer = cache.load(layers, compute(documents))
    words = np.stack([per_layer[k] for k in layers], axis=1)  # [words, n, H]
    return fb.SentenceBatches(words, fb.sentence_lengths(documents),
                              fb.sentence_label_ids(documents, label_index), batch_size)

  model = fb.build_tagger(representation, len(layers), run.config.hidden_size, len(labels),
                          FLAGS.lstm_units)
  if options.do_train:
    train = batches("train", options.train_batch_size)
    epochs = max(1, int(math.ceil(options.num_train_epochs)))
    logging.info("***** Training the BiLSTM on %s: %d sentences in %d batches of similar "
                 "length, %d epochs *****", representation, len(train.lengths),
                 len(train.batches), epochs)
    started = time.time()
    fb.train_tagger(model, train, options.learning_rate, epochs, options.shuffle_seed)
    logging.info("Trained in %.1f s", time.time() - started)
    model.save_weights(weights)
    fb.write_record(weights, {"labels": labels, "tag_scheme": hooks.scheme(run, inputs["train"]),
                              "features": representation, "lstm_units": FLAGS.lstm_units,
                              "checkpoint": options.init_checkpoint,
                              "checkpoint_sha1": checkpoint_sha1})
  else:
    model.load_weights(weights)
  for split, name in (("eval", "eval_predictions.txt"), ("predict", "test_predictions.txt")):
    if split not in inputs:
      continue
    data = batches(split, options.predict_batch_size)
    probabilities = fb.predict_tagger(model, data)  # [words, labels]
    documents, start, per_doc = inputs[split], 0, {}
    for index, document in enumerate(documents):
      per_doc[index] = probabilities[start:start + len(document.words)]
      start += len(document.words)
    sentences = ner.sentence_predictions(documents, per_doc, labels,
                                         hooks.scheme(run, documents))
    if split == "eval":
      result = write_outputs(run, name, sentences,
                             fb.token_metrics(probabilities, data.label_ids))
      path = run.output_path("eval_results.txt")
      training.write_results(path, result)
      for key in sorted(result):
        logging.info("  %s = %s", key, result[key])
    else:
      write_outputs(run, name, sentences)


def main(_):
  cli.require_flags(FLAGS, "data_dir", "bert_config_file", "vocab_file", "output_dir")
  options = runner.RunOptions.from_flags(FLAGS)
  if FLAGS.approach == "feature_based":
    run_feature_based(options, NerHooks())
  else:
    runner.run_task(options, NerHooks())


if __name__ == "__main__":
  cli.run(main)
