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

import sys

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)
from absl import flags, logging
import numpy as np
import tensorflow as tf

from bert_tf import cli, runner, runner_flags
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


class ClassifierHooks(runner.TaskHooks):
  """A GLUE / XNLI task: the original's processors, features and metrics."""

  eval_with_predictions = True  # the GLUE metrics need each example's prediction

  def __init__(self, task_flags):
    self.flags = task_flags
    self.task_name = self.flags.task_name.lower()
    self.processor = glue.get_processor(self.flags.task_name)
    if isinstance(self.processor, glue.XnliProcessor):
      self.processor = glue.XnliProcessor(self.flags.xnli_language)
    self.label_list = self.processor.get_labels()
    self.regression = self.label_list is None

  def read_examples(self, run, split):
    if split == "train":
      examples = self.processor.get_train_examples(self.flags.data_dir)
      if not examples:
        raise UserInputError("No training examples in %s." % self.flags.data_dir)
    elif split == "eval":
      examples = self.processor.get_dev_examples(self.flags.data_dir)
      if not examples:
        raise UserInputError("No dev examples in %s." % self.flags.data_dir)
    else:
      examples = self.processor.get_test_examples(self.flags.data_dir)
    return examples

  def record_files(self, run, split, examples):
    """On TPUs the original padded eval/predict sets to whole batches with fake examples."""
    if split != "train" and run.options.strategy == "tpu":
      padding = -len(examples) % run.options.batch_size(split)
      examples = examples + [glue.PaddingInputExample()] * padding
    return super().record_files(run, split, examples)

  def encode(self, run, split, examples):
    """The original's file_based_convert_examples_to_features."""
    for index, example in enumerate(examples):
      yield glue.encode_features(glue.convert_single_example(
          index, example, self.label_list, run.options.max_seq_length, run.tokenizer))

  def feature_spec(self, run, split):
    return glue.feature_spec(run.options.max_seq_length, self.regression)

  def make_task(self, run):
    return glue.ClassificationTask(run.config, len(self.label_list) if self.label_list else 1,
                                   self.regression, **run.options.task_options())

  def settings(self, run):
    return {"task_name": self.task_name, "labels": self.label_list}

  def head_labels(self, run):
    return None if self.regression else ("classifier", self.label_list, None)

  def postprocess_eval(self, run, examples, result, outputs):
    if self.regression:
      labels = np.array([e.label for e in examples])
      predictions = outputs["predictions"][:len(examples)]
    else:
      labels = np.array([self.label_list.index(e.label) for e in examples])
      predictions = np.argmax(outputs["probabilities"][:len(examples)], axis=-1)
    result.update(glue.glue_metrics(self.task_name, predictions, labels))
    return result

  def postprocess_predict(self, run, examples, outputs):
    values = outputs["predictions"][:, None] if self.regression else outputs["probabilities"]
    values = values[:len(examples)]
    runner.write_test_results(run.output_path("test_results.tsv"), values)
    if self.flags.write_glue_submission:
      self.write_glue_submission(run, values)

  def write_glue_submission(self, run, values):
    name = _SUBMISSION_NAMES.get(self.task_name, self.task_name.upper())
    path = run.output_path(name + ".tsv")
    with tf.io.gfile.GFile(path, "w") as writer:
      writer.write("index\tprediction\n")
      for index, row in enumerate(values):
        prediction = ("%.3f" % row[0] if self.regression
                      else self.label_list[int(np.argmax(row))])
        writer.write("%d\t%s\n" % (index, prediction))
    logging.info("Wrote the GLUE submission file %s", path)

  def export(self, run):
    from bert_tf.tasks.glue.export import export_classifier
    options = run.options
    export_classifier(options.export_dir, run.serving_model(), options.vocab_file,
                      options.do_lower_case, options.max_seq_length, self.label_list,
                      self.processor.is_pair, strip_accents=options.strip_accents)


def main(_):
  cli.require_flags(FLAGS, "data_dir", "task_name", "vocab_file", "bert_config_file",
                    "output_dir")
  runner.run_task(runner.RunOptions.from_flags(FLAGS),
                  ClassifierHooks(runner_flags.task_flags(sys.modules[__name__])))


if __name__ == "__main__":
  cli.run(main)
