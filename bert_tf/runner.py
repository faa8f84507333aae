"""What every runner does between its flags and the Trainer: checks, strategy, tokenizer, results.

`prepare` runs every up-front check before any feature file is written or any
step trained (required flags, numbers, sequence length vs the config, vocab vs
the config, case vs the checkpoint name, batch sizes vs replicas, the export
folder), each with one message naming the flag and the fix.
"""

import dataclasses
import os
import uuid

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from bert_tf import cli, distribution, run_lock, tokenization, training
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError, io_reason

_ACTIONS = ("do_train", "do_eval", "do_predict", "export_dir")


def _value(values, name, default=None):
  """A flag's value, or `default` for a flag this runner does not define."""
  return values[name].value if name in values else default


def strategy_name(values):
  return values.distribution_strategy or ("tpu" if values.use_tpu else "one_device")


def make_strategy(values):
  """The strategy from the flags; call before anything else touches TensorFlow devices."""
  return distribution.get_strategy(strategy_name(values), values.cpu_devices, values.tpu_name,
                                   values.tpu_zone, values.gcp_project, values.master)


def dtype_policy(values):
  return "mixed_" + values.mixed_precision if values.mixed_precision else None


def use_one_hot_embeddings(values):
  """The original used one-hot embedding lookups exactly when running on TPUs."""
  return strategy_name(values) == "tpu"


# Under XLA each sequence length is a compilation: cut lengths to multiples of this.
XLA_LENGTH_BUCKET = 16


def task_options(values):
  """The keyword arguments every task takes from the hardware flags."""
  return {"use_one_hot_embeddings": use_one_hot_embeddings(values),
          "dtype": dtype_policy(values),
          "dynamic_length": not values.pad_to_max_seq_length,
          "length_bucket": XLA_LENGTH_BUCKET if values.jit_compile else 1}


@dataclasses.dataclass
class Run:
  """What `prepare` built: the model config, the strategy and (fine-tuning) the tokenizer."""
  config: BertConfig
  strategy: tf.distribute.Strategy
  tokenizer: tokenization.FullTokenizer = None


def _check_numbers(values, config, min_seq_length):
  seq = values.max_seq_length
  if seq > config.max_position_embeddings:
    raise UserInputError(
        "--max_seq_length=%d exceeds max_position_embeddings=%d of %s; lower --max_seq_length."
        % (seq, config.max_position_embeddings, values.bert_config_file))
  if seq < min_seq_length:
    raise UserInputError("--max_seq_length=%d is too small: [CLS] and [SEP] tokens alone need "
                         "%d positions." % (seq, min_seq_length))
  for name in ("train_batch_size", "eval_batch_size", "predict_batch_size",
               "save_checkpoints_steps", "iterations_per_loop", "gradient_accumulation_steps"):
    value = _value(values, name)
    if value is not None and value < 1:
      raise UserInputError("--%s must be a positive integer, got %d." % (name, value))
  epochs = _value(values, "num_train_epochs")
  if values.do_train and epochs is not None and not epochs > 0:
    raise UserInputError("--num_train_epochs must be positive, got %s." % epochs)
  warmup = _value(values, "warmup_proportion")
  if warmup is not None and not 0 <= warmup <= 1:
    raise UserInputError("--warmup_proportion must be between 0 and 1, got %s." % warmup)
  if values.learning_rate < 0:
    raise UserInputError("--learning_rate must not be negative, got %s." % values.learning_rate)


def check_batch_sizes(values, strategy):
  """Train batches split evenly over micro-batches and replicas."""
  replicas = strategy.num_replicas_in_sync
  micro = values.gradient_accumulation_steps
  if values.train_batch_size % (micro * replicas):
    raise UserInputError("--train_batch_size=%d must be divisible by --gradient_accumulation_steps"
                         " (%d) times the number of replicas (%d)." %
                         (values.train_batch_size, micro, replicas))


def make_tokenizer(values, config):
  """The FullTokenizer of --vocab_file, checked against the config's vocab_size."""
  tokenizer = tokenization.FullTokenizer(values.vocab_file, values.do_lower_case,
                                         strip_accents=values.strip_accents)
  if max(tokenizer.vocab.values()) >= config.vocab_size:
    raise UserInputError("Vocab file %s has %d tokens but vocab_size=%d in %s; use the vocab "
                         "file that belongs to the checkpoint." %
                         (values.vocab_file, max(tokenizer.vocab.values()) + 1, config.vocab_size,
                          values.bert_config_file))
  return tokenizer


def prepare(values, required, min_seq_length=3):
  """Checks everything that can be checked before any work; returns a Run.

  Args:
    values: the runner's FLAGS.
    required: names of flags that must be set.
    min_seq_length: the smallest --max_seq_length the runner's packing can use.
  """
  cli.require_flags(values, *required)
  actions = [a for a in _ACTIONS if a in values]
  if not any(values[a].value for a in actions):
    raise UserInputError("At least one of %s must be set." %
                         ", ".join("--" + a for a in actions))
  if "do_lower_case" in values:
    try:
      tokenization.validate_case_matches_checkpoint(values.do_lower_case, values.init_checkpoint)
    except ValueError as e:
      raise UserInputError(str(e)) from None
  config = BertConfig.from_json_file(values.bert_config_file)
  _check_numbers(values, config, min_seq_length)
  if _value(values, "export_dir"):
    from bert_tf import export
    export.check_export_dir(values.export_dir)
  tokenizer = make_tokenizer(values, config) if "vocab_file" in values else None
  strategy = make_strategy(values)
  check_batch_sizes(values, strategy)
  if _value(values, "init_checkpoint"):
    _check_init_checkpoint(values.init_checkpoint)
  make_output_dir(values.output_dir)
  run_lock.acquire(values.output_dir, distribution.worker_name(strategy))
  keras.utils.set_random_seed(values.shuffle_seed)  # weight init and dropout; after device setup
  return Run(config, strategy, tokenizer)


def _check_init_checkpoint(path):
  """A missing or damaged --init_checkpoint stops here, not after the feature files are
  written."""
  from bert_tf import checkpoints
  checkpoints.check_source(path)


def make_output_dir(path, flag="--output_dir"):
  """Creates the output folder and proves it writable, so a read-only disk or a file in the
  way stops before any work rather than at the first checkpoint."""
  if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
    raise UserInputError("%s=%s is a file; pass a folder." % (flag, path))
  # One probe name per process: workers of a multi-worker run share the folder.
  probe = os.path.join(path, ".bert_tf_write_test.%d.%s" % (os.getpid(), uuid.uuid4().hex[:8]))
  try:
    tf.io.gfile.makedirs(path)
    with tf.io.gfile.GFile(probe, "w") as f:
      f.write("")
    tf.io.gfile.remove(probe)
  except (tf.errors.OpError, OSError) as e:
    raise UserInputError("%s=%s is not writable: %s. Pick a folder you can write to." %
                         (flag, path, io_reason(e))) from None


def num_train_steps(values, num_examples):
  """The original's int(examples / batch * epochs) (at least 1) and its warmup steps."""
  steps = max(1, int(num_examples / values.train_batch_size * values.num_train_epochs))
  return steps, int(steps * values.warmup_proportion)


def make_trainer(values, strategy, task, num_train_steps, num_warmup_steps):
  """The Trainer every runner uses, configured from the shared flags."""
  from bert_tf import optimization
  return training.Trainer(
      strategy, task, values.output_dir,
      lambda names: optimization.create_optimizer(values.learning_rate, num_train_steps,
                                                  num_warmup_steps, names, values.optimizer),
      init_checkpoint=values.init_checkpoint,
      accumulation_steps=values.gradient_accumulation_steps,
      loss_scale=values.mixed_precision == "float16", jit_compile=values.jit_compile,
      worker=distribution.worker_name(strategy))


def train_or_restore(values, trainer, spec, num_train_steps, write_train_file):
  """--do_train: writes output_dir/train.tf_record with `write_train_file(path)` (which returns
  what it wrote, e.g. "12 examples", for the log) and trains on it; otherwise restores the
  latest state or --init_checkpoint for evaluation and prediction."""
  if not values.do_train:
    trainer.restore_or_initialize()
    return
  train_file = os.path.join(values.output_dir, "train.tf_record")
  written = write_train_file(train_file)
  logging.info("***** Running training: %s, batch %d, %d steps *****", written,
               values.train_batch_size, num_train_steps)
  train_on_records(values, trainer, [train_file], spec, num_train_steps)


def train_on_records(values, trainer, files, spec, num_train_steps):
  """Trains on TFRecord files of `spec` features with the shared batch/seed/save flags."""
  from bert_tf import input_pipeline
  dataset = input_pipeline.record_dataset(
      files, spec, values.train_batch_size // values.gradient_accumulation_steps,
      is_training=True, seed=values.shuffle_seed)
  return trainer.train(dataset, num_train_steps, values.save_checkpoints_steps,
                       log_steps=values.iterations_per_loop)


def write_eval_results(trainer, output_dir, result, name="eval_results.txt"):
  """The original's eval_results.txt (`key = value`, sorted), written by the chief only."""
  if not trainer.chief:
    return
  path = os.path.join(output_dir, name)
  training.write_results(path, result)
  for key in sorted(result):
    logging.info("  %s = %s", key, result[key])
  logging.info("Wrote %s", path)


def write_test_results(trainer, path, rows):
  """The original's test_results.tsv: one line of tab-separated float32 values per example."""
  if not trainer.chief:
    return
  with tf.io.gfile.GFile(path, "w") as writer:
    for row in rows:
      writer.write("\t".join(str(np.float32(v)) for v in row) + "\n")
  logging.info("Wrote %d predictions to %s", len(rows), path)
