"""Named entity recognition on CoNLL-2003 (paper section 5.3), both approaches of the paper:
fine-tuning (the default; windows over whole documents, "the maximal document context") and
feature-based (Table 7: a BiLSTM over frozen BERT features, --approach=feature_based).
Outputs, flags and the conlleval scores: docs/ner.md.

  python run_ner.py --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --do_lower_case=false --data_dir=$CONLL_DIR \
    --do_train=true --do_eval=true --do_predict=true --output_dir=/tmp/ner
"""

import sys

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags

from bert_tf import runner
from bert_tf.checkpoints import checks
from bert_tf.errors import UserInputError
from bert_tf.runner import shared_flags
from bert_tf.tasks import ner
from bert_tf.tasks.ner import feature_based_trainer as fbt
from bert_tf.utils import cli

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
flags.DEFINE_enum("approach", "fine_tuning", ["fine_tuning", "feature_based"],
                  "fine_tuning: BERT and the token classifier trained end to end; "
                  "feature_based: BERT frozen, a BiLSTM over its cached features (Table 7).")
flags.DEFINE_enum("features", None, list(ner.REPRESENTATIONS),
                  "The BERT representation of --approach=feature_based (default "
                  "concat_last_four, the paper's best).")
flags.DEFINE_integer("lstm_units", 768, "Units of each direction of the feature-based BiLSTM.")
shared_flags.define_finetuning_flags(
    do_predict_help="Whether to tag the test file.",
    export_help="If set, write a SavedModel here: `serving_default` takes raw text and "
                "returns the entities; `serve_ids` returns per-position logits.")
shared_flags.define_eval_flags()


class NerHooks(runner.TaskHooks):
  """Fine-tuning: documents as examples, windows as features, words tagged by first pieces."""

  one_record_per_example = False  # a long document gives several windows
  eval_with_predictions = True  # conlleval needs each word's prediction

  def __init__(self, task_flags, options=None):
    self.flags = task_flags
    self.labels = ner.RunLabels(task_flags.labels, task_flags.tag_scheme)

  def check(self, options):
    checks.check_positive("doc_stride", self.flags.doc_stride)
    checks.check_positive("lstm_units", self.flags.lstm_units)
    if self.flags.features and self.flags.approach != "feature_based":
      raise UserInputError("--features=%s is for --approach=feature_based; drop it or add "
                           "--approach=feature_based." % self.flags.features)
    self.files = {split: ner.split_file(self.flags.data_dir, ner.RUN_SPLITS[split])
                  for split, action in runner.SPLITS if getattr(options, action)}
    self.windows = ner.RunWindows(self.labels.ids, options.max_seq_length, self.flags.doc_stride)
    if not options.do_train:  # fails now when there are no labels to predict with
      self.use_trained_labels(options)

  def use_trained_labels(self, options):
    self.labels.use_trained(options.output_dir, options.init_checkpoint)

  def read_examples(self, run, split):
    return self.labels.read(self.files[split], split, run.options.output_dir)

  def encode(self, run, split, examples):
    return map(ner.encode_feature, self.windows.of(split, examples, run.tokenizer))

  def train_steps(self, run, examples):
    """Steps over windows (a batch is windows, not documents)."""
    return run.options.train_steps(len(self.windows.of("train", examples, run.tokenizer)))

  def describe(self, run, split, examples):
    return "%d documents, %d windows" % (len(examples),
                                         len(self.windows.of(split, examples, run.tokenizer)))

  def feature_spec(self, run, split):
    return ner.feature_spec(run.options.max_seq_length)

  def settings(self, run):
    """The labels shape the head; the training file's scheme and the stride its data."""
    return {**self.labels.record(), "doc_stride": self.flags.doc_stride}

  def head_labels(self, run):
    return "ner", self.labels.labels, "--labels"

  def make_task(self, run):
    return ner.NerTask(run.config, len(self.labels.labels), **run.options.task_options())

  def on_start(self, run):
    if run.options.do_train and run.trainer.chief:
      self.labels.write(run.options.output_dir)

  def word_probabilities(self, run, split, examples, outputs):
    """{doc_index: each word's label probabilities} (from its max-context window)."""
    return self.windows.word_scores(split, examples, outputs["probabilities"])

  def write_predictions(self, run, split, examples, outputs, result=None):
    return ner.write_predictions(run.output_path(ner.PREDICTION_FILES[split]), examples,
                                 self.word_probabilities(run, split, examples, outputs),
                                 self.labels.labels, self.labels.scheme_for(examples), result)

  def postprocess_eval(self, run, examples, result, outputs):
    return self.write_predictions(run, "eval", examples, outputs, result)

  def postprocess_predict(self, run, examples, outputs):
    self.write_predictions(run, "predict", examples, outputs)

  def export_settings(self, run):
    """The labels the export tags with and the stride of its windows."""
    return {"labels": self.labels.labels, "doc_stride": self.flags.doc_stride}

  def export(self, run):
    from bert_tf.tasks.ner.export import export_ner
    o = run.options
    export_ner(o.export_dir, run.serving_model(), o.vocab_file, o.do_lower_case, o.max_seq_length,
               self.labels.labels, stride=self.flags.doc_stride, strip_accents=o.strip_accents)


class FeatureBasedHooks(NerHooks):
  """Table 7: BERT frozen, a BiLSTM over its cached word features, trained, restored and
  applied by feature_based_trainer in place of the Trainer."""

  def check(self, options):
    if options.export_dir:
      raise UserInputError("--export_dir exports the fine-tuned model; drop it with "
                           "--approach=feature_based.")
    self.tagger = fbt.SavedTagger(options.output_dir, self.flags.features, self.flags.lstm_units,
                                  options.init_checkpoint)
    super().check(options)

  def use_trained_labels(self, options):
    self.labels.use_record(*self.tagger.trained_record())

  def train_steps(self, run, examples):
    return fbt.train_steps(examples, run.options.num_train_epochs, run.options.train_batch_size)

  def make_trainer(self, run, num_train_steps, num_warmup_steps, settings, init_checkpoint):
    o = run.options
    return self.tagger.trainer(run.config, run.strategy, run.tokenizer, self.labels, o.vocab_file,
                               o.max_seq_length, self.flags.doc_stride, o.learning_rate,
                               seed=o.shuffle_seed, compute_batch_size=o.predict_batch_size)

  def dataset(self, run, split, examples):
    return run.trainer.batches(split, examples, self.files[split],
                               self.labels.word_ids(examples), run.options.batch_size(split))

  def describe(self, run, split, examples):
    return "%d documents, %d sentences" % (len(examples), sum(len(d.sentences) for d in examples))

  head_labels = runner.TaskHooks.head_labels  # None: the frozen encoder has no head to check
  on_start = runner.TaskHooks.on_start  # nothing: the tagger's record keeps the labels

  def word_probabilities(self, run, split, examples, outputs):
    return ner.per_document(outputs["word_probabilities"], examples)


def main(_):
  runner.main({"fine_tuning": NerHooks, "feature_based": FeatureBasedHooks}[flags.FLAGS.approach],
              sys.modules[__name__], ["data_dir", "bert_config_file", "vocab_file", "output_dir"])


if __name__ == "__main__":
  cli.run(main)
