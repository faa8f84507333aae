"""Pretrain BERT with masked LM and next sentence prediction (paper section 3.1, appendix A),
or with one of the paper's Table 5 ablations (--pretraining_objective).

Same flags as Google's run_pretraining.py, plus distribution, precision, XLA,
gradient accumulation and optimizer choice:

  python run_pretraining.py --input_file=/tmp/tf_examples.tfrecord --output_dir=/tmp/pretraining \
    --do_train=True --do_eval=True --bert_config_file=$BERT_DIR/bert_config.json \
    --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
    --num_train_steps=20 --num_warmup_steps=10 --learning_rate=2e-5

Re-running the same command resumes from the last checkpoint in --output_dir.

--pretraining_objective=mlm trains the masked LM alone ("No NSP"); =ltr a left-to-right
LM ("LTR & No NSP"): the encoder gets a causal attention mask, recorded as
causal_attention in the bert_config.json written to --output_dir, so every fine-tuning
runner given that config keeps the left-to-right mask, as the paper's LTR model did.
"""

import os
import sys

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags, logging
import tensorflow as tf

from bert_tf import runner
from bert_tf.checkpoints import checks
from bert_tf.config import BertConfig
from bert_tf.data import input_pipeline
from bert_tf.errors import UserInputError
from bert_tf.runner import shared_flags
from bert_tf.tasks.pretraining import OBJECTIVES, PretrainingTask
from bert_tf.utils import cli

flags.DEFINE_string("input_file", None,
                    "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence. Must match the data.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
flags.DEFINE_enum("pretraining_objective", "mlm_nsp", list(OBJECTIVES),
                  "mlm_nsp: masked LM + next sentence prediction (the original). The paper's "
                  "Table 5 ablations: mlm, the masked LM alone (No NSP); ltr, a left-to-right "
                  "LM on a causal encoder, each position predicting the next token (LTR & No "
                  "NSP). Both read the same create_pretraining_data records.")
shared_flags.define_training_flags(
    128, "The maximum total input sequence length after WordPiece tokenization. "
         "Must match the data.")
shared_flags.define_eval_flags()


class PretrainingHooks(runner.TaskHooks):
  """Masked LM and next sentence prediction on create_pretraining_data's record files:
  training and evaluation read the same --input_file records, nothing is written."""

  uses_tokenizer = False
  eval_repeats = True  # max_eval_steps whole batches of the repeated input, as the original

  def __init__(self, task_flags, options=None):
    self.flags = task_flags
    self.max_eval_steps = self.flags.max_eval_steps
    self.input_files = None

  def check(self, options):
    for name in ("num_train_steps", "max_eval_steps", "max_predictions_per_seq"):
      checks.check_positive(name, getattr(self.flags, name))
    if self.flags.num_warmup_steps < 0:
      raise UserInputError("--num_warmup_steps must not be negative.")

  def read_examples(self, run, split):
    """The --input_file records (checked once: both splits read them)."""
    if self.input_files is None:
      self.input_files = input_pipeline.expand_files(self.flags.input_file)
      input_pipeline.check_record_files(self.input_files, self.feature_spec(run, split))
      logging.info("Input files: %s", ", ".join(self.input_files))
    return self.input_files

  def record_files(self, run, split, examples):
    return examples  # the input files themselves

  def describe(self, run, split, examples):
    return "%d input file(s)" % len(examples)

  def feature_spec(self, run, split):
    return input_pipeline.pretraining_features(run.options.max_seq_length,
                                               self.flags.max_predictions_per_seq)

  def model_config(self, options, config):
    """A left-to-right objective trains (and its checkpoints fine-tune) a causal encoder."""
    if self.flags.pretraining_objective == "ltr" and not config.causal_attention:
      causal = BertConfig.from_dict(dict(config.to_dict(), causal_attention=True))
      causal.source_file, config = config.source_file, causal
      logging.info("--pretraining_objective=ltr: the encoder is causal (causal_attention).")
    return config

  def make_task(self, run):
    return PretrainingTask(run.config, objective=self.flags.pretraining_objective,
                           **run.options.task_options())

  def settings(self, run):
    return {"pretraining_objective": self.flags.pretraining_objective,
            "max_predictions_per_seq": self.flags.max_predictions_per_seq,
            "num_train_steps": self.flags.num_train_steps}

  def data_identity(self, run, examples):
    """The record files by name and size (a corpus is too large to digest on every start)."""
    return [[os.path.basename(path), tf.io.gfile.stat(path).length] for path in examples]

  def train_steps(self, run, examples):
    return self.flags.num_train_steps, self.flags.num_warmup_steps

  def on_start(self, run):
    """The model's config beside its checkpoints (the fine-tuning runners read it)."""
    with tf.io.gfile.GFile(run.output_path("bert_config.json"), "w") as f:
      f.write(run.config.to_json_string())


def main(_):
  runner.main(PretrainingHooks, sys.modules[__name__],
              ["bert_config_file", "input_file", "output_dir"])


if __name__ == "__main__":
  cli.run(main)
