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
import numpy as np
import tensorflow as tf

from bert_tf import cli, example_codec, input_pipeline, runner, runner_flags
from bert_tf.errors import UserInputError
from bert_tf.tasks import glue

FLAGS = flags.FLAGS

flags.DEFINE_string("data_dir", None,
                    "The input data dir. Should contain the .tsv files (or other data files) for "
                    "the task.")
flags.DEFINE_string("task_name", None, "The name of the task to train.")
flags.DEFINE_bool("write_glue_submission", False,
                  "With --do_predict, also write <TASK>.tsv in the GLUE submission format.")
flags.DEFINE_string("xnli_language", "zh", "Language of the xnli task (the original used zh).")
runner_flags.define_finetuning_flags(
    export_help="If set, write a SavedModel here: `serving_default` takes raw text, "
                "`serve_ids` takes word ids.")
runner_flags.define_eval_flags()

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
  if runner.strategy_name(FLAGS) != "tpu":
    return examples
  return examples + [glue.PaddingInputExample()] * (-len(examples) % batch_size)


def main(_):
  run = runner.prepare(FLAGS, ["data_dir", "task_name", "vocab_file", "bert_config_file",
                               "output_dir"])
  processor = glue.get_processor(FLAGS.task_name)
  if isinstance(processor, glue.XnliProcessor):
    processor = glue.XnliProcessor(FLAGS.xnli_language)
  task_name = FLAGS.task_name.lower()
  label_list = processor.get_labels()
  regression = label_list is None
  spec = glue.feature_spec(FLAGS.max_seq_length, regression)
  feature_path = lambda name: os.path.join(FLAGS.output_dir, name)

  # Every data file is read before training, so a missing dev or test file is
  # reported before hours of training, not after.
  train_examples = processor.get_train_examples(FLAGS.data_dir) if FLAGS.do_train else []
  if FLAGS.do_train and not train_examples:
    raise UserInputError("No training examples in %s." % FLAGS.data_dir)
  dev_examples = processor.get_dev_examples(FLAGS.data_dir) if FLAGS.do_eval else []
  if FLAGS.do_eval and not dev_examples:
    raise UserInputError("No dev examples in %s." % FLAGS.data_dir)
  test_examples = processor.get_test_examples(FLAGS.data_dir) if FLAGS.do_predict else []
  num_train_steps, num_warmup_steps = runner.num_train_steps(FLAGS, len(train_examples))
  task = glue.ClassificationTask(run.config, len(label_list) if label_list else 1, regression,
                                 **runner.task_options(FLAGS))
  trainer = runner.make_trainer(FLAGS, run.strategy, task, num_train_steps, num_warmup_steps)

  def write_train_file(path):
    write_feature_file(train_examples, label_list, run.tokenizer, path, "train features")
    return "%d examples" % len(train_examples)

  runner.train_or_restore(FLAGS, trainer, spec, num_train_steps, write_train_file)

  if FLAGS.do_eval:
    examples = dev_examples
    eval_file = feature_path("eval.tf_record")
    write_feature_file(pad_for_tpu(examples, FLAGS.eval_batch_size), label_list, run.tokenizer,
                       eval_file, "eval features")
    dataset = input_pipeline.record_dataset([eval_file], spec, FLAGS.eval_batch_size,
                                            is_training=False)
    logging.info("***** Running evaluation: %d examples, batch %d *****", len(examples),
                 FLAGS.eval_batch_size)
    result, outputs = trainer.evaluate(dataset, with_predictions=True)
    labels = np.array([e.label if regression else label_list.index(e.label) for e in examples])
    if regression:
      predictions = outputs["predictions"][:len(examples)]
    else:
      predictions = np.argmax(outputs["probabilities"][:len(examples)], axis=-1)
    result.update(glue.glue_metrics(task_name, predictions, labels))
    runner.write_eval_results(trainer, FLAGS.output_dir, result)

  if FLAGS.do_predict:
    examples = test_examples
    predict_file = feature_path("predict.tf_record")
    write_feature_file(pad_for_tpu(examples, FLAGS.predict_batch_size), label_list,
                       run.tokenizer, predict_file, "predict features")
    dataset = input_pipeline.record_dataset([predict_file], spec, FLAGS.predict_batch_size,
                                            is_training=False)
    outputs = trainer.predict(dataset)
    values = outputs["predictions"][:, None] if regression else outputs["probabilities"]
    values = values[:len(examples)]
    runner.write_test_results(trainer, feature_path("test_results.tsv"), values)
    if FLAGS.write_glue_submission and trainer.chief:
      write_glue_submission(task_name, label_list, values)

  if FLAGS.export_dir and trainer.chief:
    from bert_tf.tasks.glue.export import export_classifier
    export_classifier(FLAGS.export_dir, trainer.model, FLAGS.vocab_file, FLAGS.do_lower_case,
                      FLAGS.max_seq_length, label_list, processor.is_pair,
                      strip_accents=FLAGS.strip_accents)
    logging.info("Exported a SavedModel to %s", FLAGS.export_dir)


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
