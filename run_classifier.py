"""Fine-tune BERT on GLUE / XNLI sentence(-pair) classification (paper section 4.1).

Same flags as Google's run_classifier.py, plus distribution, precision, XLA,
gradient accumulation, --export_dir (a SavedModel that takes raw text) and GLUE
submission files:

  python run_classifier.py --task_name=MRPC --do_train=true --do_eval=true \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
    --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/mrpc_output/

Tasks: cola, mnli, mnli-mm, mrpc, xnli, sst-2, qqp, qnli, rte, wnli, sts-b.
Re-running the same command resumes training from --output_dir.
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
from bert_tf.tasks import glue

FLAGS = flags.FLAGS

flags.DEFINE_string("data_dir", None,
                    "The input data dir. Should contain the .tsv files (or other data files) for "
                    "the task.")
flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model. "
                    "This specifies the model architecture.")
flags.DEFINE_string("task_name", None, "The name of the task to train.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_string("output_dir", None,
                    "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint (usually from a pre-trained BERT model).")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. Should be True for uncased models and "
                  "False for cased models.")
flags.DEFINE_integer("max_seq_length", 128,
                     "The maximum total input sequence length after WordPiece tokenization. "
                     "Sequences longer than this will be truncated, and sequences shorter than "
                     "this will be padded.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to run the model in inference mode on the test set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1,
                   "Proportion of training to perform linear learning rate warmup for. "
                   "E.g., 0.1 = 10% of training.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 1000,
                     "How often to log and write summaries (the original's TPU loop size).")
flags.DEFINE_string("export_dir", None,
                    "If set, write a SavedModel here: `serving_default` takes raw text, "
                    "`serve_ids` takes word ids.")
flags.DEFINE_bool("write_glue_submission", False,
                  "With --do_predict, also write <TASK>.tsv in the GLUE submission format.")
flags.DEFINE_string("xnli_language", "zh", "Language of the xnli task (the original used zh).")
runner_flags.define_hardware_flags()

_SUBMISSION_NAMES = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC", "sts-b": "STS-B",
                     "qqp": "QQP", "mnli": "MNLI-m", "mnli-mm": "MNLI-mm", "qnli": "QNLI",
                     "rte": "RTE", "wnli": "WNLI", "xnli": "XNLI"}


def write_feature_file(examples, label_list, tokenizer, path, description):
  """The original's file_based_convert_examples_to_features, with progress."""
  records = (glue.encode_features(glue.convert_single_example(
      index, example, label_list, FLAGS.max_seq_length, tokenizer))
             for index, example in enumerate(examples))
  return example_codec.write_records(path, records, len(examples), description)


def pad_for_tpu(examples, batch_size):
  """On TPUs the original padded eval/predict sets to whole batches with fake examples."""
  if runner_flags.strategy_name(FLAGS) != "tpu":
    return examples
  return examples + [glue.PaddingInputExample()] * (-len(examples) % batch_size)


def check_flags(config, strategy):
  if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
    raise UserInputError("At least one of `do_train`, `do_eval`, `do_predict` or `export_dir` "
                         "must be set.")
  if FLAGS.max_seq_length > config.max_position_embeddings:
    raise UserInputError("Cannot use sequence length %d because the BERT model was only trained "
                         "up to sequence length %d (%s)." %
                         (FLAGS.max_seq_length, config.max_position_embeddings,
                          FLAGS.bert_config_file))
  runner_flags.check_batch_sizes(FLAGS, strategy, FLAGS.train_batch_size, FLAGS.eval_batch_size,
                                 FLAGS.predict_batch_size)


def main(_):
  cli.require_flags(FLAGS, "data_dir", "task_name", "vocab_file", "bert_config_file", "output_dir")
  try:
    tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
  except ValueError as e:
    raise UserInputError(str(e)) from None
  config = BertConfig.from_json_file(FLAGS.bert_config_file)
  processor = glue.get_processor(FLAGS.task_name)
  if isinstance(processor, glue.XnliProcessor):
    processor = glue.XnliProcessor(FLAGS.xnli_language)
  task_name = FLAGS.task_name.lower()
  label_list = processor.get_labels()
  regression = label_list is None
  strategy = runner_flags.make_strategy(FLAGS)
  check_flags(config, strategy)
  keras.utils.set_random_seed(FLAGS.shuffle_seed)
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  if max(tokenizer.vocab.values()) >= config.vocab_size:
    raise UserInputError("Vocab file %s has more tokens than vocab_size=%d in %s." %
                         (FLAGS.vocab_file, config.vocab_size, FLAGS.bert_config_file))
  tf.io.gfile.makedirs(FLAGS.output_dir)
  spec = glue.feature_spec(FLAGS.max_seq_length, regression)

  train_examples = processor.get_train_examples(FLAGS.data_dir) if FLAGS.do_train else []
  if FLAGS.do_train and not train_examples:
    raise UserInputError("No training examples in %s." % FLAGS.data_dir)
  num_train_steps = max(1, int(len(train_examples) / FLAGS.train_batch_size *
                               FLAGS.num_train_epochs)) if FLAGS.do_train else 1
  num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)

  task = glue.ClassificationTask(config, len(label_list) if label_list else 1, regression,
                                 use_one_hot_embeddings=runner_flags.use_one_hot_embeddings(FLAGS),
                                 dtype=runner_flags.dtype_policy(FLAGS))
  trainer = runner_flags.make_trainer(FLAGS, strategy, task, num_train_steps, num_warmup_steps)

  if FLAGS.do_train:
    train_file = os.path.join(FLAGS.output_dir, "train.tf_record")
    write_feature_file(train_examples, label_list, tokenizer, train_file, "train features")
    logging.info("***** Running training: %d examples, batch %d, %d steps *****",
                 len(train_examples), FLAGS.train_batch_size, num_train_steps)
    runner_flags.train_on_records(FLAGS, trainer, [train_file], spec, num_train_steps)
  else:
    trainer.restore_or_initialize()

  if FLAGS.do_eval:
    examples = processor.get_dev_examples(FLAGS.data_dir)
    if not examples:
      raise UserInputError("No dev examples in %s." % FLAGS.data_dir)
    eval_file = os.path.join(FLAGS.output_dir, "eval.tf_record")
    write_feature_file(pad_for_tpu(examples, FLAGS.eval_batch_size), label_list, tokenizer,
                       eval_file, "eval features")
    dataset = input_pipeline.record_dataset([eval_file], spec, FLAGS.eval_batch_size,
                                            is_training=False)
    logging.info("***** Running evaluation: %d examples, batch %d *****", len(examples),
                 FLAGS.eval_batch_size)
    result = trainer.evaluate(dataset)
    outputs = trainer.predict(dataset)
    labels = np.array([e.label if regression else label_list.index(e.label) for e in examples])
    if regression:
      result.update(glue.glue_metrics(task_name, outputs["predictions"][:len(examples)], labels))
    else:
      predictions = np.argmax(outputs["probabilities"][:len(examples)], axis=-1)
      result.update(glue.glue_metrics(task_name, predictions, labels))
    if trainer.chief:
      path = os.path.join(FLAGS.output_dir, "eval_results.txt")
      training.write_results(path, result)
      for key in sorted(result):
        logging.info("  %s = %s", key, result[key])

  if FLAGS.do_predict:
    examples = processor.get_test_examples(FLAGS.data_dir)
    predict_file = os.path.join(FLAGS.output_dir, "predict.tf_record")
    write_feature_file(pad_for_tpu(examples, FLAGS.predict_batch_size), label_list, tokenizer,
                       predict_file, "predict features")
    dataset = input_pipeline.record_dataset([predict_file], spec, FLAGS.predict_batch_size,
                                            is_training=False)
    outputs = trainer.predict(dataset)
    values = outputs["predictions"][:, None] if regression else outputs["probabilities"]
    values = values[:len(examples)]
    if trainer.chief:
      write_test_results(os.path.join(FLAGS.output_dir, "test_results.tsv"), values)
      if FLAGS.write_glue_submission:
        write_glue_submission(task_name, label_list, values)

  if FLAGS.export_dir and trainer.chief:
    from bert_tf import export
    export.export_classifier(FLAGS.export_dir, trainer.model.encoder, trainer.model.classifier,
                             FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length,
                             label_list, processor.is_pair)
    logging.info("Exported a SavedModel to %s", FLAGS.export_dir)


def write_test_results(path, values):
  """The original's test_results.tsv: one line of tab-separated probabilities per example."""
  with tf.io.gfile.GFile(path, "w") as writer:
    for row in values:
      writer.write("\t".join(str(np.float32(v)) for v in row) + "\n")
  logging.info("Wrote %d predictions to %s", len(values), path)


def write_glue_submission(task_name, label_list, values):
  name = _SUBMISSION_NAMES.get(task_name, task_name.upper())
  path = os.path.join(FLAGS.output_dir, name + ".tsv")
  with tf.io.gfile.GFile(path, "w") as writer:
    writer.write("index\tprediction\n")
    for index, row in enumerate(values):
      prediction = "%.3f" % row[0] if label_list is None else label_list[int(np.argmax(row))]
      writer.write("%d\t%s\n" % (index, prediction))
  logging.info("Wrote the GLUE submission file %s", path)


if __name__ == "__main__":
  cli.run(main)
