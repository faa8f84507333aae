"""Fine-tune BERT on SQuAD v1.1 / v2.0 and predict answers (paper sections 4.2 and 4.3).

Same flags as Google's run_squad.py, plus distribution, precision, XLA, gradient
accumulation and --export_dir (a SavedModel answering raw question/context pairs):

  python run_squad.py --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --do_train=True --train_file=$SQUAD_DIR/train-v1.1.json \
    --do_predict=True --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 \
    --learning_rate=3e-5 --num_train_epochs=2.0 --max_seq_length=384 --doc_stride=128 \
    --output_dir=/tmp/squad_base/

After --do_predict, when the predict file has answers, the official v1.1 (or, with
--version_2_with_negative, v2.0) metrics are computed and written to
eval_results.json; for v2 its best_f1_thresh can be fed back as
--null_score_diff_threshold.
"""

import json
import os
import random

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)
from absl import flags, logging
import tensorflow as tf

from bert_tf import cli, example_codec, input_pipeline, runner, runner_flags
from bert_tf.errors import UserInputError
from bert_tf.tasks import squad
from bert_tf.tasks.squad import metrics as squad_metrics

FLAGS = flags.FLAGS

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
runner_flags.define_finetuning_flags(
    max_seq_length=384, do_predict_help="Whether to run eval on the dev set.",
    export_help="If set, write a SavedModel here: `serving_default` takes question and "
                "context strings and returns the answer; `serve_ids` returns logits.")


def validate_flags():
  """run_squad's own checks, before anything runs (the shared ones are in runner.prepare)."""
  if FLAGS.do_train and not FLAGS.train_file:
    raise UserInputError("If `do_train` is True, then `train_file` must be specified.")
  if FLAGS.do_predict and not FLAGS.predict_file:
    raise UserInputError("If `do_predict` is True, then `predict_file` must be specified.")
  if FLAGS.max_seq_length <= FLAGS.max_query_length + 3:
    raise UserInputError("The max_seq_length (%d) must be greater than max_query_length (%d) + 3" %
                         (FLAGS.max_seq_length, FLAGS.max_query_length))
  for name in ("doc_stride", "n_best_size", "max_answer_length"):
    if FLAGS[name].value < 1:
      raise UserInputError("--%s must be positive, got %d." % (name, FLAGS[name].value))
  if FLAGS.max_query_length < 0:
    raise UserInputError("--max_query_length must not be negative.")


def write_features(examples, tokenizer, path, is_training):
  """The original FeatureWriter over convert_examples_to_features; returns
  (count, features kept in memory for write_predictions when predicting)."""
  kept = []

  def records():
    features = []
    squad.convert_examples_to_features(examples, tokenizer, FLAGS.max_seq_length,
                                       FLAGS.doc_stride, FLAGS.max_query_length, is_training,
                                       features.append)
    for feature in features:
      yield squad.encode_feature(feature, is_training)
      if not is_training:
        kept.append(feature)

  count = example_codec.write_records(
      path, records(), description="train features" if is_training else "predict features")
  return count, kept


def has_answers(dataset_json):
  return any(qa.get("answers") for article in dataset_json
             for paragraph in article.get("paragraphs", []) for qa in paragraph.get("qas", []))


def main(_):
  validate_flags()
  run = runner.prepare(FLAGS, ["bert_config_file", "vocab_file", "output_dir"])
  out = lambda name: os.path.join(FLAGS.output_dir, name)
  # Both files are read before training, so a bad predict file is reported up front.
  train_examples = []
  if FLAGS.do_train:
    train_examples = squad.read_squad_examples(FLAGS.train_file, True,
                                               FLAGS.version_2_with_negative)
    random.Random(12345).shuffle(train_examples)  # as the original, before making features
  predict_examples = (squad.read_squad_examples(FLAGS.predict_file, False)
                      if FLAGS.do_predict else [])
  num_train_steps, num_warmup_steps = runner.num_train_steps(FLAGS, len(train_examples))
  task = squad.SquadTask(run.config, **runner.task_options(FLAGS))
  trainer = runner.make_trainer(FLAGS, run.strategy, task, num_train_steps, num_warmup_steps)

  def write_train_file(path):
    count, _ = write_features(train_examples, run.tokenizer, path, is_training=True)
    return "%d examples, %d features" % (len(train_examples), count)

  runner.train_or_restore(FLAGS, trainer, squad.feature_spec(FLAGS.max_seq_length, True),
                          num_train_steps, write_train_file)

  if FLAGS.do_predict:
    predict_file = out("eval.tf_record")
    _, features = write_features(predict_examples, run.tokenizer, predict_file,
                                 is_training=False)
    logging.info("***** Running predictions: %d examples, %d features, batch %d *****",
                 len(predict_examples), len(features), FLAGS.predict_batch_size)
    dataset = input_pipeline.record_dataset(
        [predict_file], squad.feature_spec(FLAGS.max_seq_length, False),
        FLAGS.predict_batch_size, is_training=False)
    outputs = trainer.predict(dataset)
    results = [squad.RawResult(int(uid), [float(x) for x in start], [float(x) for x in end])
               for uid, start, end in zip(outputs["unique_ids"], outputs["start_logits"],
                                          outputs["end_logits"])]
    if trainer.chief:
      predictions, _, null_odds = squad.write_predictions(
          predict_examples, features, results, FLAGS.n_best_size, FLAGS.max_answer_length,
          FLAGS.do_lower_case, out("predictions.json"), out("nbest_predictions.json"),
          out("null_odds.json"), FLAGS.version_2_with_negative, FLAGS.null_score_diff_threshold,
          FLAGS.verbose_logging, FLAGS.strip_accents)
      logging.info("Wrote predictions for %d questions to %s", len(predictions),
                   out("predictions.json"))
      evaluate(predictions, null_odds)

  if FLAGS.export_dir and trainer.chief:
    from bert_tf.tasks.squad.export import export_squad
    export_squad(FLAGS.export_dir, trainer.model, FLAGS.vocab_file, FLAGS.do_lower_case,
                 FLAGS.max_seq_length, FLAGS.doc_stride, FLAGS.max_query_length,
                 FLAGS.max_answer_length, FLAGS.n_best_size, FLAGS.version_2_with_negative,
                 strip_accents=FLAGS.strip_accents)
    logging.info("Exported a SavedModel to %s", FLAGS.export_dir)


def evaluate(predictions, null_odds):
  """The official metrics into eval_results.json, when the predict file has answers."""
  dataset_json = squad.load_squad_json(FLAGS.predict_file)
  if not has_answers(dataset_json):
    return
  if FLAGS.version_2_with_negative:
    result = squad_metrics.evaluate_v2(dataset_json, predictions, null_odds)
  else:
    result = squad_metrics.evaluate_v1(dataset_json, predictions)
    if result.get("skipped_without_answers"):
      logging.warning("%s: %d questions have no answers and are left out of the v1.1 "
                      "evaluation (for SQuAD 2.0 data use --version_2_with_negative=true)",
                      FLAGS.predict_file, result["skipped_without_answers"])
  path = os.path.join(FLAGS.output_dir, "eval_results.json")
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(json.dumps(result, indent=2) + "\n")
  for key, value in result.items():
    logging.info("  %s = %s", key, value)


if __name__ == "__main__":
  cli.run(main)
