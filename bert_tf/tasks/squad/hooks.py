"""run_squad.py's task as the runner template asks for it: SQuAD v1.1 / v2.0 questions over
document windows, answers from the start/end logits, the official metrics when the predict
file has answers."""

import json
import random

from absl import logging
import tensorflow as tf

from bert_tf import runner
from bert_tf.checkpoints import checks
from bert_tf.data import example_codec
from bert_tf.errors import UserInputError
from bert_tf.tasks import squad
from bert_tf.tasks.squad import metrics as squad_metrics


class SquadHooks(runner.TaskHooks):
  """SQuAD: document windows as features, answers from the start/end logits."""

  # The original wrote the predict file's features to eval.tf_record.
  record_names = dict(runner.TaskHooks.record_names, predict="eval.tf_record")

  def check(self, options):
    if options.do_train and not self.flags.train_file:
      raise UserInputError("If `do_train` is True, then `train_file` must be specified.")
    if options.do_predict and not self.flags.predict_file:
      raise UserInputError("If `do_predict` is True, then `predict_file` must be specified.")
    if options.max_seq_length <= self.flags.max_query_length + 3:
      raise UserInputError("The max_seq_length (%d) must be greater than max_query_length (%d) + 3"
                           % (options.max_seq_length, self.flags.max_query_length))
    for name in ("doc_stride", "n_best_size", "max_answer_length"):
      checks.check_positive(name, getattr(self.flags, name))
    if self.flags.max_query_length < 0:
      raise UserInputError("--max_query_length must not be negative.")

  def read_examples(self, run, split):
    if split == "train":
      examples = squad.read_squad_examples(self.flags.train_file, True,
                                           self.flags.version_2_with_negative)
      random.Random(12345).shuffle(examples)  # as the original, before making features
      return examples
    return squad.read_squad_examples(self.flags.predict_file, False)

  def record_files(self, run, split, examples):
    """The original FeatureWriter over convert_examples_to_features; the predict split's
    features are kept (Records.kept) for write_predictions."""
    is_training = split == "train"
    features = []
    squad.convert_examples_to_features(examples, run.tokenizer, run.options.max_seq_length,
                                       self.flags.doc_stride, self.flags.max_query_length,
                                       is_training, features.append)
    path = run.output_path(self.record_names[split])
    example_codec.write_records(path, (squad.encode_feature(f, is_training) for f in features),
                                len(features), split + " features")
    return runner.Records([path], len(features), None if is_training else features)

  def describe(self, run, split, examples, records):
    return "%d examples, %d features" % (len(examples), records.count)

  def feature_spec(self, run, split):
    return squad.feature_spec(run.options.max_seq_length, split == "train")

  def settings(self, run):
    return {"version_2_with_negative": self.flags.version_2_with_negative,
            "doc_stride": self.flags.doc_stride, "max_query_length": self.flags.max_query_length}

  def make_task(self, run):
    return squad.SquadTask(run.config, **run.options.task_options())

  def postprocess_predict(self, run, examples, outputs, records):
    results = [squad.RawResult(int(uid), [float(x) for x in start], [float(x) for x in end])
               for uid, start, end in zip(outputs["unique_ids"], outputs["start_logits"],
                                          outputs["end_logits"])]
    out, f = run.output_path, self.flags
    predictions, _, null_odds = squad.write_predictions(
        examples, records.kept, results, f.n_best_size, f.max_answer_length,
        run.options.do_lower_case, out("predictions.json"), out("nbest_predictions.json"),
        out("null_odds.json"), f.version_2_with_negative, f.null_score_diff_threshold,
        f.verbose_logging, run.options.strip_accents)
    logging.info("Wrote predictions for %d questions to %s", len(predictions),
                 out("predictions.json"))
    self.evaluate(run, predictions, null_odds)

  def export_settings(self, run):
    """The windowing and answer selection serving_default runs in its graph (the null answer
    with v2; --null_score_diff_threshold is not in the graph: the caller compares scores)."""
    f = self.flags
    return {"version_2_with_negative": f.version_2_with_negative, "doc_stride": f.doc_stride,
            "max_query_length": f.max_query_length, "max_answer_length": f.max_answer_length,
            "n_best_size": f.n_best_size}

  def export(self, run):
    from bert_tf.tasks.squad.export import export_squad
    options, f = run.options, self.flags
    export_squad(options.export_dir, run.serving_model(), options.vocab_file, options.do_lower_case,
                 options.max_seq_length, f.doc_stride, f.max_query_length, f.max_answer_length,
                 f.n_best_size, f.version_2_with_negative, strip_accents=options.strip_accents)

  def evaluate(self, run, predictions, null_odds):
    """The official metrics into eval_results.json, when the predict file has answers."""
    dataset_json = squad.load_squad_json(self.flags.predict_file)
    if not has_answers(dataset_json):
      return
    if self.flags.version_2_with_negative:
      result = squad_metrics.evaluate_v2(dataset_json, predictions, null_odds)
    else:
      result = squad_metrics.evaluate_v1(dataset_json, predictions)
      if result.get("skipped_without_answers"):
        logging.warning("%s: %d questions have no answers and are left out of the v1.1 "
                        "evaluation (for SQuAD 2.0 data use --version_2_with_negative=true)",
                        self.flags.predict_file, result["skipped_without_answers"])
    with tf.io.gfile.GFile(run.output_path("eval_results.json"), "w") as f:
      f.write(json.dumps(result, indent=2) + "\n")
    for key, value in result.items():
      logging.info("  %s = %s", key, value)


def has_answers(dataset_json):
  return any(qa.get("answers") for article in dataset_json
             for paragraph in article.get("paragraphs", []) for qa in paragraph.get("qas", []))
