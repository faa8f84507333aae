"""run_ner.py's task as the runner template asks for it, for both approaches of the paper:
fine-tuning (documents as examples, windows as features) and feature-based (Table 7: a BiLSTM
over frozen BERT features, trained by feature_based_trainer in place of the Trainer). What
they share (the CoNLL files, the labels, the checks and the prediction files) is NerHooks."""

from bert_tf import runner
from bert_tf.checkpoints import checks
from bert_tf.data import example_codec
from bert_tf.errors import UserInputError
from bert_tf.tasks import ner
from bert_tf.tasks.ner import feature_based_trainer as fbt
from bert_tf.tasks.ner.labels import NEEDS_TAGS


class NerHooks(runner.TaskHooks):
  """CoNLL documents and their labels, checked and written back as the predicted files. An
  approach says where a non-training run's labels come from (`trained_labels`) and how each
  word's label probabilities come out of the model's outputs (`word_probabilities`)."""

  eval_with_predictions = True  # conlleval needs each word's prediction

  def __init__(self, task_flags, options):
    """The run's labels are decided here, from the training file (whose documents are kept
    for read_examples) or the trained model: a run without labels to predict with stops now."""
    super().__init__(task_flags, options)
    self.labels = ner.RunLabels(task_flags.labels, task_flags.tag_scheme)
    self.files = {split: ner.split_file(task_flags.data_dir, ner.RUN_SPLITS[split])
                  for split, action in runner.SPLITS if getattr(options, action)}
    self._training_documents = None
    if options.do_train:
      path = self.files["train"]
      self._training_documents = ner.read_conll(path)
      self.labels.use_training_file(path, self._training_documents, options.output_dir)
    else:
      self.trained_labels(options)

  def trained_labels(self, options):
    """self.labels set to the trained model's (a run that does not train)."""
    raise NotImplementedError

  def word_probabilities(self, run, split, examples, outputs, records):
    """{doc_index: each word's label probabilities} of `outputs`."""
    raise NotImplementedError

  def check(self, options):
    checks.check_positive("doc_stride", self.flags.doc_stride)
    checks.check_positive("lstm_units", self.flags.lstm_units)
    if self.flags.features and self.flags.approach != "feature_based":
      raise UserInputError("--features=%s is for --approach=feature_based; drop it or add "
                           "--approach=feature_based." % self.flags.features)

  def read_examples(self, run, split):
    """The documents of `split`'s file, their tags checked against the labels."""
    path = self.files[split]
    documents = (self._training_documents if split == "train" and self._training_documents
                 is not None else ner.read_conll(path))
    self.labels.check_tags(path, documents, NEEDS_TAGS.get(split))
    return documents

  def settings(self, run):
    """The labels shape the head; the training file's scheme and the stride its data."""
    return {**self.labels.record(), "doc_stride": self.flags.doc_stride}

  def write_predictions(self, run, split, examples, outputs, records, result=None):
    return ner.write_predictions(
        run.output_path(ner.PREDICTION_FILES[split]), examples,
        self.word_probabilities(run, split, examples, outputs, records), self.labels.labels,
        self.labels.scheme_for(examples), result)

  def postprocess_eval(self, run, examples, result, outputs, records):
    return self.write_predictions(run, "eval", examples, outputs, records, result)

  def postprocess_predict(self, run, examples, outputs, records):
    self.write_predictions(run, "predict", examples, outputs, records)


class FineTuningHooks(NerHooks):
  """Fine-tuning: documents as examples, windows as features, words tagged by first pieces;
  the labels are recorded beside the model (ner_labels.json) and checked against the head of
  --init_checkpoint."""

  def trained_labels(self, options):
    self.labels.use_trained(options.output_dir, options.init_checkpoint)

  def windows(self, run, examples):
    """The NerFeatures of `examples`' documents, cut into windows."""
    return ner.document_windows(examples, self.labels.ids, run.tokenizer,
                                run.options.max_seq_length, self.flags.doc_stride)

  def record_files(self, run, split, examples):
    """The windows' records; the windows are kept to read each word's prediction back."""
    windows = self.windows(run, examples)
    path = run.output_path(self.record_names[split])
    example_codec.write_records(path, map(ner.encode_feature, windows), len(windows),
                                split + " features")
    return runner.Records([path], len(windows), windows)

  def train_steps(self, run, examples):
    """Steps over windows (a batch is windows, not documents)."""
    return run.options.train_steps(len(self.windows(run, examples)))

  def describe(self, run, split, examples, records):
    return "%d documents, %d windows" % (len(examples), records.count)

  def feature_spec(self, run, split):
    return ner.feature_spec(run.options.max_seq_length)

  def head_labels(self, run):
    return "ner", self.labels.labels, "--labels"

  def make_task(self, run):
    return ner.NerTask(run.config, len(self.labels.labels), **run.options.task_options())

  def on_start(self, run):
    if run.options.do_train and run.trainer.chief:
      self.labels.write(run.options.output_dir)

  def word_probabilities(self, run, split, examples, outputs, records):
    """Each word's from its max-context window."""
    return ner.word_predictions(records.kept, outputs["probabilities"],
                                {i: len(d.words) for i, d in enumerate(examples)})

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
  applied by feature_based_trainer in place of the Trainer. The tagger's record keeps the
  labels, and the frozen encoder has no head to check them against."""

  def __init__(self, task_flags, options):
    self.tagger = fbt.SavedTagger(options.output_dir, task_flags.features,
                                  task_flags.lstm_units, options.init_checkpoint)
    super().__init__(task_flags, options)

  def trained_labels(self, options):
    self.labels.use_record(*self.tagger.trained_record())

  def check(self, options):
    if options.export_dir:
      raise UserInputError("--export_dir exports the fine-tuned model; drop it with "
                           "--approach=feature_based.")
    super().check(options)

  def train_steps(self, run, examples):
    return fbt.train_steps(examples, run.options.num_train_epochs, run.options.train_batch_size)

  def make_trainer(self, run, num_train_steps, num_warmup_steps, settings, init_checkpoint):
    o = run.options
    return self.tagger.trainer(run.config, run.strategy, run.tokenizer, self.labels, o.vocab_file,
                               o.max_seq_length, self.flags.doc_stride, o.learning_rate,
                               seed=o.shuffle_seed, compute_batch_size=o.predict_batch_size)

  def record_files(self, run, split, examples):
    return runner.Records([])  # none: the tagger reads its cached features of the CoNLL file

  def dataset(self, run, split, examples, records):
    return run.trainer.batches(split, examples, self.files[split],
                               self.labels.word_ids(examples), run.options.batch_size(split))

  def describe(self, run, split, examples, records):
    return "%d documents, %d sentences" % (len(examples), sum(len(d.sentences) for d in examples))

  def word_probabilities(self, run, split, examples, outputs, records):
    return ner.per_document(outputs["word_probabilities"], examples)


# --approach -> its hooks.
APPROACHES = {"fine_tuning": FineTuningHooks, "feature_based": FeatureBasedHooks}
