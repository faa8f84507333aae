"""Fine-tune BERT on SWAG multiple choice (paper section 4.4).

Flags in the style of run_classifier.py; --data_dir holds SWAG's train.csv, val.csv
and test.csv (test without labels):

  python run_swag.py --data_dir=$SWAG_DIR --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
    --do_train=True --do_eval=True --max_seq_length=128 --train_batch_size=16 \
    --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=/tmp/swag_output/

eval_results.txt has eval_accuracy and eval_loss; --do_predict writes test_results.tsv
with the four choice probabilities per example. The head's one vector is stored in
Google-layout checkpoints as cls/swag/output_weights [1, hidden_size].
"""

import os

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)
from absl import flags, logging
import keras
import numpy as np
import tensorflow as tf

from bert_tf import (cli, example_codec, input_pipeline, runner_flags, tokenization,
                     training)
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError
from bert_tf.tasks import swag

FLAGS = flags.FLAGS

flags.DEFINE_string("data_dir", None, "Folder with SWAG's train.csv, val.csv and test.csv.")
flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_string("output_dir", None, "Where checkpoints, features and results are written.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint (usually from a pre-trained BERT model).")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. True for uncased models.")
flags.DEFINE_integer("max_seq_length", 128,
                     "Maximum length of each `[CLS] context [SEP] ending [SEP]` sequence.")
flags.DEFINE_bool("do_train", False, "Whether to train on train.csv.")
flags.DEFINE_bool("do_eval", False, "Whether to evaluate on val.csv.")
flags.DEFINE_bool("do_predict", False, "Whether to predict test.csv.")
flags.DEFINE_integer("train_batch_size", 16, "Examples (each with 4 sequences) per train step.")
flags.DEFINE_integer("eval_batch_size", 8, "Examples per eval batch.")
flags.DEFINE_integer("predict_batch_size", 8, "Examples per predict batch.")
flags.DEFINE_float("learning_rate", 2e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training for linear warmup.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 1000, "How often to log and write summaries.")
flags.DEFINE_string("export_dir", None,
                    "If set, write a SavedModel: `serving_default` takes `context` and four "
                    "`ending0..3` strings; `serve_ids` takes word ids.")
runner_flags.define_hardware_flags()


def write_feature_file(examples, tokenizer, path, description):
  records = (swag.encode_features(swag.convert_example(e, FLAGS.max_seq_length, tokenizer))
             for e in examples)
  return example_codec.write_records(path, records, len(examples), description)


def main(_):
  cli.require_flags(FLAGS, "data_dir", "vocab_file", "bert_config_file", "output_dir")
  if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
    raise UserInputError("At least one of `do_train`, `do_eval`, `do_predict` or `export_dir` "
                         "must be set.")
  try:
    tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
  except ValueError as e:
    raise UserInputError(str(e)) from None
  config = BertConfig.from_json_file(FLAGS.bert_config_file)
  if FLAGS.max_seq_length > config.max_position_embeddings:
    raise UserInputError("--max_seq_length=%d exceeds max_position_embeddings=%d of %s." %
                         (FLAGS.max_seq_length, config.max_position_embeddings,
                          FLAGS.bert_config_file))
  strategy = runner_flags.make_strategy(FLAGS)
  runner_flags.check_batch_sizes(FLAGS, strategy, FLAGS.train_batch_size, FLAGS.eval_batch_size,
                                 FLAGS.predict_batch_size)
  keras.utils.set_random_seed(FLAGS.shuffle_seed)
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  tf.io.gfile.makedirs(FLAGS.output_dir)
  spec = swag.feature_spec(FLAGS.max_seq_length)
  path = lambda name: os.path.join(FLAGS.data_dir, name)

  train_examples = swag.read_swag_examples(path("train.csv"), True) if FLAGS.do_train else []
  num_train_steps = max(1, int(len(train_examples) / FLAGS.train_batch_size *
                               FLAGS.num_train_epochs))
  task = swag.MultipleChoiceTask(config,
                                 use_one_hot_embeddings=runner_flags.use_one_hot_embeddings(FLAGS),
                                 dtype=runner_flags.dtype_policy(FLAGS))
  trainer = runner_flags.make_trainer(FLAGS, strategy, task, num_train_steps,
                                       int(num_train_steps * FLAGS.warmup_proportion))

  if FLAGS.do_train:
    train_file = os.path.join(FLAGS.output_dir, "train.tf_record")
    write_feature_file(train_examples, tokenizer, train_file, "train features")
    logging.info("***** Running training: %d examples, batch %d, %d steps *****",
                 len(train_examples), FLAGS.train_batch_size, num_train_steps)
    runner_flags.train_on_records(FLAGS, trainer, [train_file], spec, num_train_steps)
  else:
    trainer.restore_or_initialize()

  if FLAGS.do_eval:
    examples = swag.read_swag_examples(path("val.csv"), True)
    eval_file = os.path.join(FLAGS.output_dir, "eval.tf_record")
    write_feature_file(examples, tokenizer, eval_file, "eval features")
    result = trainer.evaluate(input_pipeline.record_dataset([eval_file], spec,
                                                            FLAGS.eval_batch_size, False))
    if trainer.chief:
      training.write_results(os.path.join(FLAGS.output_dir, "eval_results.txt"), result)
      for key in sorted(result):
        logging.info("  %s = %s", key, result[key])

  if FLAGS.do_predict:
    examples = swag.read_swag_examples(path("test.csv"), False)
    predict_file = os.path.join(FLAGS.output_dir, "predict.tf_record")
    write_feature_file(examples, tokenizer, predict_file, "predict features")
    outputs = trainer.predict(input_pipeline.record_dataset([predict_file], spec,
                                                            FLAGS.predict_batch_size, False))
    if trainer.chief:
      out = os.path.join(FLAGS.output_dir, "test_results.tsv")
      with tf.io.gfile.GFile(out, "w") as writer:
        for row in outputs["probabilities"]:
          writer.write("\t".join(str(np.float32(p)) for p in row) + "\n")
      logging.info("Wrote %d predictions to %s", len(outputs["probabilities"]), out)

  if FLAGS.export_dir and trainer.chief:
    from bert_tf import export
    export.export_swag(FLAGS.export_dir, trainer.model.encoder, trainer.model.choice,
                       FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length)
    logging.info("Exported a SavedModel to %s", FLAGS.export_dir)


if __name__ == "__main__":
  cli.run(main)
