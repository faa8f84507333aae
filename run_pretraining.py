"""Pretrain BERT with masked LM and next sentence prediction (paper section 3.1, appendix A).

Same flags as Google's run_pretraining.py, plus distribution, precision, XLA,
gradient accumulation and optimizer choice:

  python run_pretraining.py --input_file=/tmp/tf_examples.tfrecord --output_dir=/tmp/pretraining \
    --do_train=True --do_eval=True --bert_config_file=$BERT_DIR/bert_config.json \
    --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
    --num_train_steps=20 --num_warmup_steps=10 --learning_rate=2e-5

Re-running the same command resumes from the last checkpoint in --output_dir.
"""

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)
from absl import flags, logging
import keras
import tensorflow as tf

from bert_tf import cli, input_pipeline, runner_flags, training
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError
from bert_tf.tasks.pretraining import PretrainingTask

FLAGS = flags.FLAGS

flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model. "
                    "This specifies the model architecture.")
flags.DEFINE_string("input_file", None,
                    "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_string("output_dir", None,
                    "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint (usually from a pre-trained BERT model).")
flags.DEFINE_integer("max_seq_length", 128,
                     "The maximum total input sequence length after WordPiece tokenization. "
                     "Must match the data.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence. Must match the data.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training (per optimizer step).")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 1000,
                     "How often to log and write summaries (the original's TPU loop size).")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
runner_flags.define_hardware_flags()


def check_flags(strategy):
  if not FLAGS.do_train and not FLAGS.do_eval:
    raise UserInputError("At least one of `do_train` or `do_eval` must be True.")
  runner_flags.check_batch_sizes(FLAGS, strategy, FLAGS.train_batch_size)
  if FLAGS.eval_batch_size % strategy.num_replicas_in_sync:
    raise UserInputError("--eval_batch_size=%d must be divisible by the number of replicas (%d)." %
                         (FLAGS.eval_batch_size, strategy.num_replicas_in_sync))
  if FLAGS.save_checkpoints_steps < 1:
    raise UserInputError("--save_checkpoints_steps must be positive.")


def main(_):
  cli.require_flags(FLAGS, "bert_config_file", "input_file", "output_dir")
  config = BertConfig.from_json_file(FLAGS.bert_config_file)
  if FLAGS.max_seq_length > config.max_position_embeddings:
    raise UserInputError("--max_seq_length=%d exceeds max_position_embeddings=%d of %s." %
                         (FLAGS.max_seq_length, config.max_position_embeddings,
                          FLAGS.bert_config_file))
  strategy = runner_flags.make_strategy(FLAGS)
  check_flags(strategy)
  keras.utils.set_random_seed(FLAGS.shuffle_seed)  # weight init and dropout; after device setup
  input_files = input_pipeline.expand_files(FLAGS.input_file)
  features = input_pipeline.pretraining_features(FLAGS.max_seq_length,
                                                 FLAGS.max_predictions_per_seq)
  input_pipeline.check_record_files(input_files, features)
  logging.info("Input files: %s", ", ".join(input_files))
  logging.info("Strategy: %s with %d replica(s)", runner_flags.strategy_name(FLAGS),
               strategy.num_replicas_in_sync)

  task = PretrainingTask(config, use_one_hot_embeddings=runner_flags.use_one_hot_embeddings(FLAGS),
                         dtype=runner_flags.dtype_policy(FLAGS))
  trainer = runner_flags.make_trainer(FLAGS, strategy, task, FLAGS.num_train_steps,
                                       FLAGS.num_warmup_steps)
  with tf.io.gfile.GFile(tf.io.gfile.join(FLAGS.output_dir, "bert_config.json"), "w") as f:
    f.write(config.to_json_string())

  if FLAGS.do_train:
    logging.info("***** Running training: batch %d, %d steps *****", FLAGS.train_batch_size,
                 FLAGS.num_train_steps)
    runner_flags.train_on_records(FLAGS, trainer, input_files, features, FLAGS.num_train_steps)

  if FLAGS.do_eval:
    if not FLAGS.do_train:
      trainer.restore_or_initialize()
    dataset = input_pipeline.record_dataset(input_files, features, FLAGS.eval_batch_size,
                                            is_training=False, repeat=True, drop_remainder=True)
    logging.info("***** Running evaluation: batch %d, %d steps *****", FLAGS.eval_batch_size,
                 FLAGS.max_eval_steps)
    result = trainer.evaluate(dataset, FLAGS.max_eval_steps)
    if trainer.chief:
      path = tf.io.gfile.join(FLAGS.output_dir, "eval_results.txt")
      training.write_results(path, result)
      for key in sorted(result):
        logging.info("  %s = %s", key, result[key])
      logging.info("Wrote %s", path)


if __name__ == "__main__":
  cli.run(main)
