"""run_pretraining.py's task as the runner template asks for it: masked LM and next sentence
prediction (or a Table 5 ablation) on create_pretraining_data's record files."""

import os

from absl import logging
import tensorflow as tf

from bert_tf import runner
from bert_tf.checkpoints import checks
from bert_tf.config import BertConfig
from bert_tf.data import input_pipeline
from bert_tf.errors import UserInputError
from bert_tf.tasks.pretraining.model import PretrainingTask


class PretrainingHooks(runner.TaskHooks):
  """Training and evaluation read the same --input_file records; nothing is written."""

  uses_tokenizer = False
  eval_repeats = True  # max_eval_steps whole batches of the repeated input, as the original

  def __init__(self, task_flags, options):
    super().__init__(task_flags, options)
    self.max_eval_steps = task_flags.max_eval_steps
    self.input_files = input_pipeline.expand_files(task_flags.input_file)

  def check(self, options):
    for name in ("num_train_steps", "max_eval_steps", "max_predictions_per_seq"):
      checks.check_positive(name, getattr(self.flags, name))
    if self.flags.num_warmup_steps < 0:
      raise UserInputError("--num_warmup_steps must not be negative.")

  def read_examples(self, run, split):
    """The --input_file records, checked (once: both splits read them)."""
    if split == "train" or not run.options.do_train:
      input_pipeline.check_record_files(self.input_files, self.feature_spec(run, split))
      logging.info("Input files: %s", ", ".join(self.input_files))
    return self.input_files

  def record_files(self, run, split, examples):
    return runner.Records(examples)  # the input files themselves

  def describe(self, run, split, examples, records):
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
