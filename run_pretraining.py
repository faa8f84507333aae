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
import tensorflow as tf

from bert_tf import cli, input_pipeline, runner, runner_flags
from bert_tf.errors import UserInputError
from bert_tf.tasks.pretraining import PretrainingTask

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None,
                    "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence. Must match the data.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
runner_flags.define_training_flags(
    128, "The maximum total input sequence length after WordPiece tokenization. "
         "Must match the data.")
runner_flags.define_eval_flags()


def check_flags(strategy):
  """run_pretraining's own checks (the shared ones are in runner.prepare)."""
  if FLAGS.eval_batch_size % strategy.num_replicas_in_sync:
    raise UserInputError("--eval_batch_size=%d must be divisible by the number of replicas (%d)." %
                         (FLAGS.eval_batch_size, strategy.num_replicas_in_sync))
  for name in ("num_train_steps", "max_eval_steps", "max_predictions_per_seq"):
    if FLAGS[name].value < 1:
      raise UserInputError("--%s must be a positive integer, got %d." % (name, FLAGS[name].value))
  if FLAGS.num_warmup_steps < 0:
    raise UserInputError("--num_warmup_steps must not be negative.")


def main(_):
  run = runner.prepare(FLAGS, ["bert_config_file", "input_file", "output_dir"])
  check_flags(run.strategy)
  input_files = input_pipeline.expand_files(FLAGS.input_file)
  features = input_pipeline.pretraining_features(FLAGS.max_seq_length,
                                                 FLAGS.max_predictions_per_seq)
  input_pipeline.check_record_files(input_files, features)
  logging.info("Input files: %s", ", ".join(input_files))
  logging.info("Strategy: %s with %d replica(s)", runner.strategy_name(FLAGS),
               run.strategy.num_replicas_in_sync)

  task = PretrainingTask(run.config, **runner.task_options(FLAGS))
  trainer = runner.make_trainer(FLAGS, run.strategy, task, FLAGS.num_train_steps,
                                FLAGS.num_warmup_steps)
  with tf.io.gfile.GFile(tf.io.gfile.join(FLAGS.output_dir, "bert_config.json"), "w") as f:
    f.write(run.config.to_json_string())

  if FLAGS.do_train:
    logging.info("***** Running training: batch %d, %d steps *****", FLAGS.train_batch_size,
                 FLAGS.num_train_steps)
    runner.train_on_records(FLAGS, trainer, input_files, features, FLAGS.num_train_steps)

  if FLAGS.do_eval:
    if not FLAGS.do_train:
      trainer.restore_or_initialize()
    dataset = input_pipeline.record_dataset(input_files, features, FLAGS.eval_batch_size,
                                            is_training=False, repeat=True, drop_remainder=True)
    logging.info("***** Running evaluation: batch %d, %d steps *****", FLAGS.eval_batch_size,
                 FLAGS.max_eval_steps)
    result = trainer.evaluate(dataset, FLAGS.max_eval_steps)
    runner.write_eval_results(trainer, FLAGS.output_dir, result)


if __name__ == "__main__":
  cli.run(main)
