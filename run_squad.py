"""Fine-tune BERT on SQuAD v1.1 / v2.0 and predict answers (paper sections 4.2 and 4.3).

Same flags as Google's run_squad.py, plus distribution, precision, XLA, gradient
accumulation and --export_dir (a SavedModel answering raw question/context pairs):

  python run_squad.py --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
    --do_train=True --train_file=$SQUAD_DIR/train-v1.1.json \
    --do_predict=True --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 \
    --learning_rate=3e-5 --num_train_epochs=2.0 --max_seq_length=384 --doc_stride=128 \
    --output_dir=/tmp/squad_base/

After --do_predict, when the predict file has answers, the official v1.1 (or, with
--version_2_with_negative, v2.0) metrics are computed and written to
eval_results.json; for v2 its best_f1_thresh can be fed back as
--null_score_diff_threshold.
"""

import json
import random
import sys

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags, logging
import tensorflow as tf

from bert_tf import runner
from bert_tf.checkpoints import checks
from bert_tf.errors import UserInputError
from bert_tf.runner import shared_flags
from bert_tf.tasks import squad
from bert_tf.tasks.squad import metrics as squad_metrics
from bert_tf.utils import cli

flags.DEFINE_string("train_file", None, "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string("predict_file", None,
                    "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
flags.DEFINE_integer("doc_stride", 128,
                     "When splitting up a long document into chunks, how much stride to take "
                     "between chunks.")
flags.DEFINE_integer("max_query_length", 64,
                     "The maximum number of tokens for the question. Questions longer than this "
                     "will be truncated to this length.")
flags.DEFINE_integer("n_best_size", 20,
                     "The total number of n-best predictions to generate in the "
                     "nbest_predictions.json output file.")
flags.DEFINE_integer("max_answer_length", 30,
                     "The maximum length of an answer that can be generated. This is needed "
                     "because the start and end predictions are not conditioned on one another.")
flags.DEFINE_bool("verbose_logging", False,
                  "If true, all of the warnings related to data processing will be printed.")
flags.DEFINE_bool("version_2_with_negative", False,
                  "If true, the SQuAD examples contain some that do not have an answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   "If null_score - best_non_null is greater than the threshold predict null.")
shared_flags.define_finetuning_flags(
    max_seq_length=384, do_predict_help="Whether to run eval on the dev set.",
    export_help="If set, write a SavedModel here: `serving_default` takes question and "
                "context strings and returns the answer; `serve_ids` returns logits.")


class SquadHooks(runner.TaskHooks):
  """SQuAD: document windows as features, answers from the start/end logits."""

  # The original wrote the predict file's features to eval.tf_record.
  record_names = dict(runner.TaskHooks.record_names, predict="eval.tf_record")
  one_record_per_example = False  # a long context gives several windows

  def __init__(self, task_flags, options=None):
    self.flags = task_flags
    self.counts = {}  # split -> the number of features written
    self.predict_features = []  # kept for write_predictions

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

  def encode(self, run, split, examples):
    """The original FeatureWriter over convert_examples_to_features."""
    is_training = split == "train"
    features = []
    squad.convert_examples_to_features(examples, run.tokenizer, run.options.max_seq_length,
                                       self.flags.doc_stride, self.flags.max_query_length,
                                       is_training, features.append)
    for feature in features:
      yield squad.encode_feature(feature, is_training)
    self.counts[split] = len(features)
    if not is_training:
      self.predict_features = features

  def describe(self, run, split, examples):
    return "%d examples, %d features" % (len(examples), self.counts[split])

  def feature_spec(self, run, split):
    return squad.feature_spec(run.options.max_seq_length, split == "train")

  def settings(self, run):
    return {"version_2_with_negative": self.flags.version_2_with_negative,
            "doc_stride": self.flags.doc_stride, "max_query_length": self.flags.max_query_length}

  def make_task(self, run):
    return squad.SquadTask(run.config, **run.options.task_options())

  def postprocess_predict(self, run, examples, outputs):
    results = [squad.RawResult(int(uid), [float(x) for x in start], [float(x) for x in end])
               for uid, start, end in zip(outputs["unique_ids"], outputs["start_logits"],
                                          outputs["end_logits"])]
    out, f = run.output_path, self.flags
    predictions, _, null_odds = squad.write_predictions(
        examples, self.predict_features, results, f.n_best_size, f.max_answer_length,
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


def main(_):
  runner.main(SquadHooks, sys.modules[__name__], ["bert_config_file", "vocab_file", "output_dir"])


if __name__ == "__main__":
  cli.run(main)
