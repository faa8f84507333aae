"""The runner template: the run's options, typed (RunOptions), and the one sequence every
runner follows (run_task), filled with its task's hooks (TaskHooks):

  checks -> strategy -> tokenizer -> read every data file -> train (or restore)
  -> evaluate -> predict -> export

Every check runs before any feature file is written or any step trained (flag values,
sequence length and vocab vs the config, casing vs the checkpoint name, batch sizes vs
replicas, the export folder, the checkpoint, the output folder), and every data file is
read before training, so a typo in the dev file is reported before hours of training.
A runner script is its flags and a TaskHooks subclass.
"""

import dataclasses
import hashlib
import os
from typing import Optional
import uuid

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from bert_tf import (checks, cpu, distribution, example_codec, head_labels, input_pipeline,
                     precision, run_folder, run_lock, tokenization, training)
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError, io_reason

# Each data split and the action flag that asks for it.
SPLITS = (("train", "do_train"), ("eval", "do_eval"), ("predict", "do_predict"))


@dataclasses.dataclass(frozen=True)
class RunOptions:
  """What the template reads from the flags of bert_tf.runner_flags, typed.

  `actions` names the action flags the runner offers (for the "nothing to do" message);
  a field of a flag group the runner did not define keeps its default.
  """
  bert_config_file: Optional[str] = None
  output_dir: Optional[str] = None
  init_checkpoint: Optional[str] = None
  max_seq_length: int = 128
  # The tokenizer (fine-tuning runners).
  vocab_file: Optional[str] = None
  do_lower_case: bool = True
  strip_accents: Optional[bool] = None
  # What to do.
  do_train: bool = False
  do_eval: bool = False
  do_predict: bool = False
  export_dir: Optional[str] = None
  inference_precision: str = "float32"  # what the export computes in (bert_tf.precision)
  actions: tuple = ("do_train", "do_eval", "do_predict", "export_dir")
  # Training, evaluation, prediction.
  train_batch_size: int = 32
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  learning_rate: float = 5e-5
  num_train_epochs: Optional[float] = 3.0  # None: the runner counts steps itself (pretraining)
  warmup_proportion: Optional[float] = 0.1
  save_checkpoints_steps: int = 1000
  iterations_per_loop: int = 1000
  # Hardware: a strategy of distribution.STRATEGIES and how to use it.
  strategy: str = "one_device"
  cpu_devices: int = 1
  tpu_name: Optional[str] = None
  tpu_zone: Optional[str] = None
  gcp_project: Optional[str] = None
  master: Optional[str] = None
  mixed_precision: Optional[str] = None  # "float16" or "bfloat16"
  jit_compile: bool = False
  gradient_accumulation_steps: int = 1
  optimizer: str = "adamw"
  pad_to_max_seq_length: bool = False
  shuffle_seed: int = 12345

  @classmethod
  def from_flags(cls, values, eval_flags=True, finetuning_flags=True):
    """The options of parsed flags: those of runner_flags.define_training_flags, plus
    define_eval_flags' with `eval_flags` and define_finetuning_flags' with
    `finetuning_flags` (say False for a group the runner did not define)."""
    v = lambda name: values[name].value
    fields = dict(
        bert_config_file=v("bert_config_file"), output_dir=v("output_dir"),
        init_checkpoint=v("init_checkpoint"), max_seq_length=v("max_seq_length"),
        do_train=v("do_train"), train_batch_size=v("train_batch_size"),
        learning_rate=v("learning_rate"), save_checkpoints_steps=v("save_checkpoints_steps"),
        iterations_per_loop=v("iterations_per_loop"),
        strategy=v("distribution_strategy") or ("tpu" if v("use_tpu") else "one_device"),
        cpu_devices=v("cpu_devices"), tpu_name=v("tpu_name"), tpu_zone=v("tpu_zone"),
        gcp_project=v("gcp_project"), master=v("master"),
        mixed_precision=v("mixed_precision"), jit_compile=v("jit_compile"),
        gradient_accumulation_steps=v("gradient_accumulation_steps"),
        optimizer=v("optimizer"), pad_to_max_seq_length=v("pad_to_max_seq_length"),
        shuffle_seed=v("shuffle_seed"),
        num_train_epochs=None, warmup_proportion=None)
    actions = ["do_train"]
    if eval_flags:
      fields.update(do_eval=v("do_eval"), eval_batch_size=v("eval_batch_size"))
      actions.append("do_eval")
    if finetuning_flags:
      fields.update(vocab_file=v("vocab_file"), do_lower_case=v("do_lower_case"),
                    strip_accents=v("strip_accents"), do_predict=v("do_predict"),
                    predict_batch_size=v("predict_batch_size"),
                    num_train_epochs=v("num_train_epochs"),
                    warmup_proportion=v("warmup_proportion"), export_dir=v("export_dir"),
                    inference_precision=v("inference_precision"))
      actions += ["do_predict", "export_dir"]
    return cls(actions=tuple(actions), **fields)

  def check(self):
    """The checks that need no file: something to do, and numbers in range."""
    if not any(getattr(self, action) for action in self.actions):
      raise UserInputError("At least one of %s must be set." %
                           ", ".join("--" + a for a in self.actions))
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size",
                 "save_checkpoints_steps", "iterations_per_loop", "gradient_accumulation_steps"):
      checks.check_positive(name, getattr(self, name))
    if self.do_train and self.num_train_epochs is not None and not self.num_train_epochs > 0:
      raise UserInputError("--num_train_epochs must be positive, got %s." % self.num_train_epochs)
    if self.warmup_proportion is not None and not 0 <= self.warmup_proportion <= 1:
      raise UserInputError("--warmup_proportion must be between 0 and 1, got %s." %
                           self.warmup_proportion)
    if self.learning_rate < 0:
      raise UserInputError("--learning_rate must not be negative, got %s." % self.learning_rate)

  def check_batch_sizes(self, replicas, whole_eval_batches=False):
    """Train batches split evenly over micro-batches and replicas (and eval batches over
    replicas when evaluation reads whole batches only)."""
    micro = self.gradient_accumulation_steps
    if self.train_batch_size % (micro * replicas):
      raise UserInputError("--train_batch_size=%d must be divisible by "
                           "--gradient_accumulation_steps (%d) times the number of replicas (%d)."
                           % (self.train_batch_size, micro, replicas))
    if whole_eval_batches and self.eval_batch_size % replicas:
      raise UserInputError("--eval_batch_size=%d must be divisible by the number of replicas "
                           "(%d)." % (self.eval_batch_size, replicas))

  def batch_size(self, split):
    return {"train": self.train_batch_size, "eval": self.eval_batch_size,
            "predict": self.predict_batch_size}[split]

  def train_steps(self, num_examples):
    """The original's int(examples / batch * epochs) (at least 1) and its warmup steps."""
    steps = max(1, int(num_examples / self.train_batch_size * self.num_train_epochs))
    return steps, int(steps * self.warmup_proportion)

  def task_options(self):
    """The keyword arguments every Task takes from the hardware flags."""
    return {"use_one_hot_embeddings": self.strategy == "tpu",  # as the original on TPUs
            "dtype": "mixed_" + self.mixed_precision if self.mixed_precision else None,
            "dynamic_length": not self.pad_to_max_seq_length,
            "length_bucket": precision.XLA_LENGTH_BUCKET if self.jit_compile else 1}


@dataclasses.dataclass
class Run:
  """What the template built from the options, for the hooks."""
  options: RunOptions
  config: BertConfig
  strategy: tf.distribute.Strategy
  tokenizer: Optional[tokenization.FullTokenizer] = None
  trainer: Optional[training.Trainer] = None

  def output_path(self, name):
    return os.path.join(self.options.output_dir, name)

  def serving_model(self):
    """The trained model computing in --inference_precision, for the export."""
    return precision.for_inference(self.trainer.model, self.options.inference_precision)


class TaskHooks:
  """A task as the template asks for it. A runner subclasses this and overrides what its
  task needs; the defaults fit fine-tuning on examples read from text files."""

  uses_tokenizer = True  # False: the task reads existing record files and has no vocab
  min_seq_length = 3  # the smallest --max_seq_length the task's packing can use
  # Feature files written under --output_dir, per split (the original's names).
  record_names = {"train": "train.tf_record", "eval": "eval.tf_record",
                  "predict": "predict.tf_record"}
  one_record_per_example = True  # False: the count is unknown until written (SQuAD windows)
  eval_with_predictions = False  # postprocess_eval needs the per-example outputs
  # Evaluation of max_eval_steps whole batches of repeated input (run_pretraining's).
  eval_repeats = False
  max_eval_steps = None

  def check(self, options):
    """The runner's own flag checks (the shared ones are the template's)."""

  def read_examples(self, run, split):
    """The inputs of `split` ("train", "eval", "predict"), all read before any training."""
    raise NotImplementedError

  def encode(self, run, split, examples):
    """Serialized tf.train.Examples of the features of `examples` (an iterable)."""
    raise NotImplementedError

  def record_files(self, run, split, examples):
    """The record files `split` reads: its examples' features, written to --output_dir."""
    path = run.output_path(self.record_names[split])
    total = len(examples) if self.one_record_per_example else None
    example_codec.write_records(path, self.encode(run, split, examples), total,
                                split + " features")
    return [path]

  def describe(self, split, examples):
    """What `split` holds, for the log."""
    return "%d examples" % len(examples)

  def feature_spec(self, run, split):
    """The features of the record files: name -> (length, dtype)."""
    raise NotImplementedError

  def make_task(self, run):
    """The bert_tf.tasks Task to train (its constructor takes run.options.task_options())."""
    raise NotImplementedError

  def train_steps(self, run, examples):
    """(training steps, warmup steps) for the training examples."""
    return run.options.train_steps(len(examples))

  def on_start(self, run):
    """Called once the Trainer exists, before training or restoring."""

  def model_config(self, options, config):
    """The BertConfig the task's model is built with (default: --bert_config_file's)."""
    return config

  def head_labels(self, run):
    """(head kind, labels, flag naming them or None) of a head whose rows are labels: their
    order is checked against the one recorded with --init_checkpoint. None: no such head."""
    return None

  def settings(self, run):
    """The task's own settings that shape the saved training state or its data (labels,
    objective, ...), stored with the state and compared on resume (see training_settings)."""
    return {}

  def data_identity(self, run, examples):
    """What identifies the training data, compared on resume: a digest of the examples."""
    digest = hashlib.sha1()
    for example in examples:
      digest.update(repr(example).encode("utf-8"))
    return {"examples": len(examples), "sha1": digest.hexdigest()}

  def postprocess_eval(self, run, examples, result, outputs):
    """The eval_results.txt entries: Trainer metrics `result`, with the task's own added from
    `outputs` (per-example arrays, with eval_with_predictions). Chief only."""
    return result

  def postprocess_predict(self, run, examples, outputs):
    """Writes the prediction files from `outputs` (per-example arrays). Chief only."""

  def export(self, run):
    """Writes the task's SavedModel of run.trainer.model to --export_dir. Chief only."""
    raise NotImplementedError


def run_task(options, hooks):
  """The run of a runner: every check, then train, evaluate, predict and export as asked."""
  run = prepare(options, hooks)
  # Every data file is read before training, so a missing dev or test file is reported
  # before hours of training, not after.
  inputs = {split: hooks.read_examples(run, split)
            for split, action in SPLITS if getattr(options, action)}
  num_train_steps, num_warmup_steps = hooks.train_steps(run, inputs.get("train", []))
  run.trainer = make_trainer(options, run.strategy, hooks.make_task(run), num_train_steps,
                             num_warmup_steps, training_settings(run, hooks, inputs),
                             init_checkpoint=_init_source(run, hooks))
  if options.do_train and run.trainer.chief:
    run_folder.keep_model_files(options.output_dir, options.bert_config_file,
                                options.vocab_file if hooks.uses_tokenizer else None)
  hooks.on_start(run)
  if options.do_train:
    _train(run, hooks, inputs["train"], num_train_steps)
  else:  # the latest state in --output_dir, or --init_checkpoint, for the steps below
    run.trainer.restore_or_initialize()
  if options.do_eval:
    _evaluate(run, hooks, inputs["eval"])
  if options.do_predict:
    _predict(run, hooks, inputs["predict"])
  if options.export_dir and run.trainer.chief:
    hooks.export(run)
    logging.info("Exported a SavedModel to %s", options.export_dir)


def _init_source(run, hooks):
  """--init_checkpoint, its labeled head (if any) read in this run's label order. Nothing is
  checked when the run resumes from --output_dir instead."""
  options, labeled = run.options, hooks.head_labels(run)
  if not options.init_checkpoint or labeled is None or run_folder.has_training_state(
      options.output_dir):
    return options.init_checkpoint
  kind, labels, flag = labeled
  return head_labels.in_label_order(options.init_checkpoint, kind, labels, options.do_train, flag)


def prepare(options, hooks):
  """Everything checked that can be before any work; returns the Run (no trainer yet)."""
  options.check()
  hooks.check(options)
  if hooks.uses_tokenizer:
    checks.check_case(options.do_lower_case, options.init_checkpoint)
  config = hooks.model_config(options, BertConfig.from_json_file(options.bert_config_file))
  checks.check_seq_length(options.max_seq_length, config, hooks.min_seq_length)
  if options.export_dir:
    from bert_tf import export
    export.check_export_dir(options.export_dir)
  tokenizer = None
  if hooks.uses_tokenizer:
    tokenizer = checks.checked_tokenizer(options.vocab_file, options.do_lower_case,
                                         options.strip_accents, config)
  strategy = make_strategy(options)
  logging.info("Strategy: %s with %d replica(s)", options.strategy,
               strategy.num_replicas_in_sync)
  _warn_if_slow_precision(options)
  options.check_batch_sizes(strategy.num_replicas_in_sync, hooks.eval_repeats)
  if options.init_checkpoint:
    check_init_checkpoint(options.init_checkpoint)
    checks.check_causal_attention(options.init_checkpoint, config, options.bert_config_file)
  make_output_dir(options.output_dir)
  run_lock.acquire(options.output_dir, distribution.worker_name(strategy))
  keras.utils.set_random_seed(options.shuffle_seed)  # weight init and dropout; after device setup
  return Run(options, config, strategy, tokenizer)


def _warn_if_slow_precision(options):
  """bfloat16 on a CPU whose TensorFlow kernels emulate it is slower than float32."""
  if options.mixed_precision == "bfloat16" and options.strategy in ("one_device", "mirrored"):
    warn_if_slow_bfloat16("--mixed_precision=bfloat16", "Leave --mixed_precision unset here.")


def warn_if_slow_bfloat16(what, advice):
  """Logs that `what` (bfloat16 compute, here) runs on TensorFlow's slow CPU fallback, if
  this machine has no GPU and no AVX-512."""
  if not tf.config.list_physical_devices("GPU") and not cpu.fast_bfloat16():
    logging.warning("%s on this CPU (%s) runs on TensorFlow's slow bfloat16 fallback (it needs "
                    "AVX-512, best with AMX or AVX512-BF16): expect it to be slower "
                    "than float32. %s", what, cpu.describe(), advice)


def _train(run, hooks, examples, num_train_steps):
  options = run.options
  files = hooks.record_files(run, "train", examples)
  logging.info("***** Running training: %s, batch %d, %d steps *****",
               hooks.describe("train", examples), options.train_batch_size, num_train_steps)
  dataset = input_pipeline.record_dataset(
      files, hooks.feature_spec(run, "train"),
      options.train_batch_size // options.gradient_accumulation_steps, is_training=True,
      seed=options.shuffle_seed)
  run.trainer.train(dataset, num_train_steps, options.save_checkpoints_steps,
                    log_steps=options.iterations_per_loop)


def _evaluate(run, hooks, examples):
  files = hooks.record_files(run, "eval", examples)
  batch = run.options.eval_batch_size
  dataset = input_pipeline.record_dataset(
      files, hooks.feature_spec(run, "eval"), batch, is_training=False,
      repeat=hooks.eval_repeats, drop_remainder=hooks.eval_repeats)
  logging.info("***** Running evaluation: %s, batch %d%s *****", hooks.describe("eval", examples),
               batch, ", %d steps" % hooks.max_eval_steps if hooks.max_eval_steps else "")
  if hooks.eval_with_predictions:
    result, outputs = run.trainer.evaluate(dataset, hooks.max_eval_steps, with_predictions=True)
  else:
    result, outputs = run.trainer.evaluate(dataset, hooks.max_eval_steps), None
  if not run.trainer.chief:
    return
  result = hooks.postprocess_eval(run, examples, result, outputs)
  path = run.output_path("eval_results.txt")
  training.write_results(path, result)  # the original's `key = value` lines, sorted
  for key in sorted(result):
    logging.info("  %s = %s", key, result[key])
  logging.info("Wrote %s", path)


def _predict(run, hooks, examples):
  files = hooks.record_files(run, "predict", examples)
  batch = run.options.predict_batch_size
  dataset = input_pipeline.record_dataset(files, hooks.feature_spec(run, "predict"), batch,
                                          is_training=False)
  logging.info("***** Running prediction: %s, batch %d *****",
               hooks.describe("predict", examples), batch)
  outputs = run.trainer.predict(dataset)
  if run.trainer.chief:
    hooks.postprocess_predict(run, examples, outputs)


def make_strategy(options):
  """The strategy of the options; call before anything else touches TensorFlow devices."""
  return distribution.get_strategy(options.strategy, options.cpu_devices, options.tpu_name,
                                   options.tpu_zone, options.gcp_project, options.master)


def check_init_checkpoint(path):
  """A missing or unreadable --init_checkpoint stops here, not after the feature files are
  written. The one place this is checked (runners, extract_features, export_tfhub)."""
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


def training_settings(run, hooks, inputs):
  """The settings stored with the training state and compared when a run resumes from it.

  Those that shape the weights and optimizer state (config, labels, vocab, casing) always;
  those of the data and its order (sequence length, batch sizes, the training data) only
  when this run trains: evaluating or predicting from a saved state may use other values.
  Epochs and step counts may change on resume (checkpoint_keeper.CHANGEABLE_SETTINGS).
  """
  options = run.options
  settings = {"bert_config": run.config.to_dict(), "optimizer": options.optimizer,
              "loss_scale": options.mixed_precision == "float16"}
  if hooks.uses_tokenizer:
    settings.update(vocab_sha1=run_folder.file_digest(options.vocab_file),
                    do_lower_case=options.do_lower_case, strip_accents=options.strip_accents)
  settings.update(hooks.settings(run))
  if options.do_train:
    settings.update(max_seq_length=options.max_seq_length,
                    train_batch_size=options.train_batch_size,
                    gradient_accumulation_steps=options.gradient_accumulation_steps,
                    num_train_epochs=options.num_train_epochs,
                    train_data=hooks.data_identity(run, inputs["train"]))
  return settings


def make_trainer(options, strategy, task, num_train_steps, num_warmup_steps, settings=None,
                 init_checkpoint=None):
  """The Trainer of every runner, configured from the options (`init_checkpoint`: a source
  to load instead of --init_checkpoint's path)."""
  from bert_tf import optimization
  return training.Trainer(
      strategy, task, options.output_dir,
      lambda names: optimization.create_optimizer(options.learning_rate, num_train_steps,
                                                  num_warmup_steps, names, options.optimizer),
      init_checkpoint=init_checkpoint or options.init_checkpoint,
      accumulation_steps=options.gradient_accumulation_steps,
      loss_scale=options.mixed_precision == "float16", jit_compile=options.jit_compile,
      worker=distribution.worker_name(strategy), settings=settings)


def write_test_results(path, rows):
  """The original's test_results.tsv: one line of tab-separated float32 values per example."""
  with tf.io.gfile.GFile(path, "w") as writer:
    for row in rows:
      writer.write("\t".join(str(np.float32(v)) for v in row) + "\n")
  logging.info("Wrote %d predictions to %s", len(rows), path)
