"""Named entity recognition on CoNLL-2003 (paper section 5.3), both approaches of the paper:
fine-tuning (the default; windows over whole documents, "the maximal document context") and
feature-based (Table 7: a BiLSTM over frozen BERT features, --approach=feature_based).
Outputs, flags and the conlleval scores: docs/ner.md.

  python run_ner.py --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --do_lower_case=false --data_dir=$CONLL_DIR \
    --do_train=true --do_eval=true --do_predict=true --output_dir=/tmp/ner
"""

import sys

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)
from absl import flags

from bert_tf import checks, cli, runner, runner_flags, tokenization
from bert_tf.errors import UserInputError
from bert_tf.tasks import ner
from bert_tf.tasks.ner import feature_based_trainer as fbt
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
flags.DEFINE_enum("features", None, list(ner.REPRESENTATIONS),
                  "The BERT representation of --approach=feature_based (default "
                  "concat_last_four, the paper's best).")
flags.DEFINE_integer("lstm_units", 768, "Units of each direction of the feature-based BiLSTM.")
runner_flags.define_finetuning_flags(
    do_predict_help="Whether to tag the test file.",
    export_help="If set, write a SavedModel here: `serving_default` takes raw text and "
                "returns the entities; `serve_ids` returns per-position logits.")
runner_flags.define_eval_flags()

SPLIT_OF = {"train": "train", "eval": "dev", "predict": "test"}
PREDICTION_FILES = {"eval": "eval_predictions.txt", "predict": "test_predictions.txt"}


class NerHooks(runner.TaskHooks):
  """Fine-tuning: documents as examples, windows as features, words tagged by first pieces."""

  one_record_per_example = False  # a long document gives several windows
  eval_with_predictions = True  # conlleval needs each word's prediction

  def __init__(self, task_flags):
    self.flags = task_flags
    self.labels = ner_labels.RunLabels(task_flags.labels, task_flags.tag_scheme)
    self.files = {}  # split -> data file
    self.windows_of = {}  # split -> [NerFeature], kept for the word predictions

  def check(self, options):
    checks.check_positive("doc_stride", self.flags.doc_stride)
    checks.check_positive("lstm_units", self.flags.lstm_units)
    if self.flags.features and self.flags.approach != "feature_based":
      raise UserInputError("--features=%s is for --approach=feature_based; drop it or add "
                           "--approach=feature_based." % self.flags.features)
    for split, action in runner.SPLITS:
      if getattr(options, action):
        self.files[split] = ner.split_file(self.flags.data_dir, SPLIT_OF[split])
    if not options.do_train:  # fails now when there are no labels to predict with
      self.use_trained_labels(options)

  def use_trained_labels(self, options):
    self.labels.use_trained(options.output_dir, options.init_checkpoint)

  def read_examples(self, run, split):
    path = self.files[split]
    documents = ner.read_conll(path)
    if split == "train":
      self.labels.use_training_file(path, documents, run.options.output_dir)
    self.labels.check_tags(path, documents, {"train": "training", "eval": "--do_eval"}.get(split))
    return documents

  def windows(self, run, split, documents):
    """The NerFeatures of `documents` (made once per split, kept for the predictions)."""
    if split not in self.windows_of:
      self.windows_of[split] = ner.document_windows(documents, self.labels.ids, run.tokenizer,
                                                    run.options.max_seq_length,
                                                    self.flags.doc_stride)
    return self.windows_of[split]

  def encode(self, run, split, examples):
    return map(ner.encode_feature, self.windows(run, split, examples))

  def train_steps(self, run, examples):
    """Steps over windows (a batch is windows, not documents)."""
    return run.options.train_steps(len(self.windows(run, "train", examples)))

  def describe(self, run, split, examples):
    return "%d documents, %d windows" % (len(examples), len(self.windows(run, split, examples)))

  def feature_spec(self, run, split):
    return ner.feature_spec(run.options.max_seq_length)

  def settings(self, run):
    """The labels shape the head; the training file's scheme and the stride its data."""
    return {"labels": self.labels.labels, "tag_scheme": self.labels.trained_scheme,
            "doc_stride": self.flags.doc_stride}

  def head_labels(self, run):
    return "ner", self.labels.labels, "--labels"

  def make_task(self, run):
    return ner.NerTask(run.config, len(self.labels.labels), **run.options.task_options())

  def on_start(self, run):
    if run.options.do_train and run.trainer.chief:
      ner_labels.write_json(run.output_path(ner_labels.LABELS_FILE), {
          "labels": self.labels.labels, "tag_scheme": self.labels.trained_scheme})

  def word_probabilities(self, run, split, examples, outputs):
    """{doc_index: each word's label probabilities} (from its max-context window)."""
    return ner.word_predictions(self.windows(run, split, examples), outputs["probabilities"],
                                {i: len(d.words) for i, d in enumerate(examples)})

  def write_predictions(self, run, split, examples, outputs, result=None):
    sentences = ner.sentence_predictions(
        examples, self.word_probabilities(run, split, examples, outputs), self.labels.labels,
        self.labels.scheme_for(examples))
    return ner.write_predictions(run.output_path(PREDICTION_FILES[split]), sentences, result)

  def postprocess_eval(self, run, examples, result, outputs):
    return self.write_predictions(run, "eval", examples, outputs, result)

  def postprocess_predict(self, run, examples, outputs):
    self.write_predictions(run, "predict", examples, outputs)

  def export(self, run):
    from bert_tf.tasks.ner.export import export_ner
    options = run.options
    export_ner(options.export_dir, run.serving_model(), options.vocab_file, options.do_lower_case,
               options.max_seq_length, self.labels.labels, stride=self.flags.doc_stride,
               strip_accents=options.strip_accents)


class FeatureBasedHooks(NerHooks):
  """Table 7: BERT frozen, a BiLSTM over its cached word features, trained, restored and
  applied by feature_based_trainer in place of the Trainer."""

  def check(self, options):
    if options.export_dir:
      raise UserInputError("--export_dir exports the fine-tuned model; drop it with "
                           "--approach=feature_based.")
    if not options.init_checkpoint:
      raise UserInputError("--approach=feature_based needs --init_checkpoint (the frozen "
                           "BERT whose features the BiLSTM reads).")
    self.tagger = fbt.SavedTagger(options.output_dir, self.flags.features,
                                  options.init_checkpoint)
    super().check(options)

  def use_trained_labels(self, options):
    self.labels.use_record(*self.tagger.trained_record(self.flags.lstm_units))

  def train_steps(self, run, examples):
    return fbt.train_steps(examples, run.options.num_train_epochs, run.options.train_batch_size)

  def make_trainer(self, run, num_train_steps, num_warmup_steps, settings, init_checkpoint):
    o = run.options
    cache_key = dict(vocab_file=o.vocab_file, do_lower_case=o.do_lower_case,
                     strip_accents=tokenization.resolve_strip_accents(o.do_lower_case,
                                                                      o.strip_accents),
                     max_seq_length=o.max_seq_length, doc_stride=self.flags.doc_stride)
    return self.tagger.trainer(run.config, run.strategy, run.tokenizer, self.labels,
                               self.flags.lstm_units, cache_key, dict(
                                   learning_rate=o.learning_rate, seed=o.shuffle_seed,
                                   compute_batch_size=o.predict_batch_size))

  def dataset(self, run, split, examples):
    return run.trainer.batches(split, examples, self.files[split],
                               self.labels.word_ids(examples), run.options.batch_size(split))

  def describe(self, run, split, examples):
    return "%d documents, %d sentences" % (len(examples), sum(len(d.sentences) for d in examples))

  def head_labels(self, run):
    return None  # the encoder is frozen; the tagger has no head in any checkpoint

  def on_start(self, run):
    pass  # the labels are kept in the tagger's record

  def word_probabilities(self, run, split, examples, outputs):
    return ner.per_document(outputs["word_probabilities"], examples)


def main(_):
  runner.main({"fine_tuning": NerHooks, "feature_based": FeatureBasedHooks}[FLAGS.approach],
              sys.modules[__name__], ["data_dir", "bert_config_file", "vocab_file", "output_dir"])


if __name__ == "__main__":
  cli.run(main)
