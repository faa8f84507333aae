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
import keras
import tensorflow as tf

from bert_tf import (cli, example_codec, input_pipeline, runner_flags, squad_metrics,
                     tokenization)
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError
from bert_tf.tasks import squad

FLAGS = flags.FLAGS

flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model. "
                    "This specifies the model architecture.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_string("output_dir", None,
                    "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("train_file", None, "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string("predict_file", None,
                    "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint (usually from a pre-trained BERT model).")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. Should be True for uncased models and "
                  "False for cased models.")
flags.DEFINE_integer("max_seq_length", 384,
                     "The maximum total input sequence length after WordPiece tokenization. "
                     "Sequences longer than this will be truncated, and sequences shorter than "
                     "this will be padded.")
flags.DEFINE_integer("doc_stride", 128,
                     "When splitting up a long document into chunks, how much stride to take "
                     "between chunks.")
flags.DEFINE_integer("max_query_length", 64,
                     "The maximum number of tokens for the question. Questions longer than this "
                     "will be truncated to this length.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_predict", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predictions.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1,
                   "Proportion of training to perform linear learning rate warmup for. "
                   "E.g., 0.1 = 10% of training.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 1000,
                     "How often to log and write summaries (the original's TPU loop size).")
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
flags.DEFINE_string("export_dir", None,
                    "If set, write a SavedModel here: `serving_default` takes question and "
                    "context strings and returns the answer; `serve_ids` returns logits.")
runner_flags.define_hardware_flags()


def validate_flags(config, strategy):
  if not FLAGS.do_train and not FLAGS.do_predict and not FLAGS.export_dir:
    raise UserInputError("At least one of `do_train`, `do_predict` or `export_dir` must be set.")
  if FLAGS.do_train and not FLAGS.train_file:
    raise UserInputError("If `do_train` is True, then `train_file` must be specified.")
  if FLAGS.do_predict and not FLAGS.predict_file:
    raise UserInputError("If `do_predict` is True, then `predict_file` must be specified.")
  if FLAGS.max_seq_length > config.max_position_embeddings:
    raise UserInputError("Cannot use sequence length %d because the BERT model was only trained "
                         "up to sequence length %d." % (FLAGS.max_seq_length,
                                                        config.max_position_embeddings))
  if FLAGS.max_seq_length <= FLAGS.max_query_length + 3:
    raise UserInputError("The max_seq_length (%d) must be greater than max_query_length (%d) + 3" %
                         (FLAGS.max_seq_length, FLAGS.max_query_length))
  if FLAGS.doc_stride < 1:
    raise UserInputError("--doc_stride must be positive.")
  runner_flags.check_batch_sizes(FLAGS, strategy, FLAGS.train_batch_size, FLAGS.predict_batch_size)


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


def has_answers(predict_file):
  return any(qa.get("answers") for article in squad.load_squad_json(predict_file)
             for paragraph in article.get("paragraphs", []) for qa in paragraph.get("qas", []))


def main(_):
  cli.require_flags(FLAGS, "bert_config_file", "vocab_file", "output_dir")
  try:
    tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
  except ValueError as e:
    raise UserInputError(str(e)) from None
  config = BertConfig.from_json_file(FLAGS.bert_config_file)
  strategy = runner_flags.make_strategy(FLAGS)
  validate_flags(config, strategy)
  keras.utils.set_random_seed(FLAGS.shuffle_seed)
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  tf.io.gfile.makedirs(FLAGS.output_dir)

  train_examples = []
  num_train_steps = 1
  if FLAGS.do_train:
    train_examples = squad.read_squad_examples(FLAGS.train_file, True,
                                               FLAGS.version_2_with_negative)
    num_train_steps = max(1, int(len(train_examples) / FLAGS.train_batch_size *
                                 FLAGS.num_train_epochs))
    random.Random(12345).shuffle(train_examples)  # as the original, before making features
  num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)

  task = squad.SquadTask(config, use_one_hot_embeddings=runner_flags.use_one_hot_embeddings(FLAGS),
                         dtype=runner_flags.dtype_policy(FLAGS))
  trainer = runner_flags.make_trainer(FLAGS, strategy, task, num_train_steps, num_warmup_steps)

  if FLAGS.do_train:
    train_file = os.path.join(FLAGS.output_dir, "train.tf_record")
    count, _ = write_features(train_examples, tokenizer, train_file, is_training=True)
    logging.info("***** Running training: %d examples, %d features, batch %d, %d steps *****",
                 len(train_examples), count, FLAGS.train_batch_size, num_train_steps)
    runner_flags.train_on_records(FLAGS, trainer, [train_file],
                                  squad.feature_spec(FLAGS.max_seq_length, True), num_train_steps)
  else:
    trainer.restore_or_initialize()

  if FLAGS.do_predict:
    examples = squad.read_squad_examples(FLAGS.predict_file, False)
    predict_file = os.path.join(FLAGS.output_dir, "eval.tf_record")
    _, features = write_features(examples, tokenizer, predict_file, is_training=False)
    logging.info("***** Running predictions: %d examples, %d features, batch %d *****",
                 len(examples), len(features), FLAGS.predict_batch_size)
    dataset = input_pipeline.record_dataset(
        [predict_file], squad.feature_spec(FLAGS.max_seq_length, False),
        FLAGS.predict_batch_size, is_training=False)
    outputs = trainer.predict(dataset)
    results = [squad.RawResult(int(uid), [float(x) for x in start], [float(x) for x in end])
               for uid, start, end in zip(outputs["unique_ids"], outputs["start_logits"],
                                          outputs["end_logits"])]
    if trainer.chief:
      out = lambda name: os.path.join(FLAGS.output_dir, name)
      predictions, _, null_odds = squad.write_predictions(
          examples, features, results, FLAGS.n_best_size, FLAGS.max_answer_length,
          FLAGS.do_lower_case, out("predictions.json"), out("nbest_predictions.json"),
          out("null_odds.json"), FLAGS.version_2_with_negative, FLAGS.null_score_diff_threshold,
          FLAGS.verbose_logging)
      logging.info("Wrote predictions for %d questions to %s", len(predictions),
                   out("predictions.json"))
      if has_answers(FLAGS.predict_file):
        dataset_json = squad.load_squad_json(FLAGS.predict_file)
        if FLAGS.version_2_with_negative:
          result = squad_metrics.evaluate_v2(dataset_json, predictions, null_odds)
        else:
          result = squad_metrics.evaluate_v1(dataset_json, predictions)
        with tf.io.gfile.GFile(out("eval_results.json"), "w") as f:
          f.write(json.dumps(result, indent=2) + "\n")
        for key, value in result.items():
          logging.info("  %s = %s", key, value)

  if FLAGS.export_dir and trainer.chief:
    from bert_tf import export
    export.export_squad(FLAGS.export_dir, trainer.model.encoder, trainer.model.span,
                        FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length,
                        FLAGS.doc_stride, FLAGS.max_query_length, FLAGS.max_answer_length,
                        FLAGS.n_best_size, FLAGS.version_2_with_negative)
    logging.info("Exported a SavedModel to %s", FLAGS.export_dir)


if __name__ == "__main__":
  cli.run(main)
