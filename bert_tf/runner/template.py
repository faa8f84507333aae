"""The runner template: the one sequence every runner follows (run_task), filled with its
task's hooks (TaskHooks), on the options read from its flags (shared_flags.RunOptions):

  checks -> strategy -> tokenizer -> read every data file -> train (or restore)
  -> evaluate -> predict -> export

Every check runs before any feature file is written or any step trained (flag values,
sequence length and vocab vs the config, casing vs the checkpoint name, batch sizes vs
replicas, the export folder, the checkpoint, the output folder, the settings of the training
state a re-run resumes from), and every data file is read before training, so a typo in the
dev file is reported before hours of training.
A runner script is its flags; its task's TaskHooks (bert_tf/tasks/<task>/hooks.py) are built
from those flags and the options, and are read-only from then on: what one stage produces for
a later one is returned to the template, kept on the Run and passed on as an argument.
"""

import dataclasses
import functools
import hashlib
import json
import os
import signal
from typing import Any, NamedTuple, Optional

from absl import flags, logging
import keras
import numpy as np
import tensorflow as tf

from bert_tf import tokenization, training
from bert_tf.checkpoints import checks, head_labels, run_folder
from bert_tf.config import BertConfig
from bert_tf.data import example_codec, input_pipeline
from bert_tf.errors import Preempted, UserInputError
import bert_tf.runner.run_lock as run_lock
import bert_tf.runner.shared_flags as shared_flags
from bert_tf.runner.shared_flags import RunOptions
from bert_tf.training import checkpoint_keeper, distribution
from bert_tf.utils import cli, cpu, precision

# Each data split and the action flag that asks for it.
SPLITS = (("train", "do_train"), ("eval", "do_eval"), ("predict", "do_predict"))


@dataclasses.dataclass
class Run:
  """What the template built from the options, for the hooks."""
  options: RunOptions
  config: BertConfig
  strategy: tf.distribute.Strategy
  tokenizer: Optional[tokenization.FullTokenizer] = None
  trainer: Optional[training.Trainer] = None
  # split -> the Records its record_files returned (set by the template only).
  records: dict = dataclasses.field(default_factory=dict)
  lock: Optional[str] = None  # the lock file on --output_dir, released when the run ends

  def output_path(self, name):
    return os.path.join(self.options.output_dir, name)

  def serving_model(self):
    """The trained model computing in --inference_precision, for the export."""
    return precision.for_inference(self.trainer.model, self.options.inference_precision)


class Records(NamedTuple):
  """What record_files wrote for a split: the files the trainer reads, how many records they
  hold (None: not counted) and what the task keeps of its encoding for the later stages
  (SQuAD's features, NER's windows, ...). The template keeps it on run.records and passes it
  to describe, dataset and the postprocessing."""
  files: list
  count: Optional[int] = None
  kept: Any = None


class ReadOnlyOnceBuilt(type):
  """The metaclass of TaskHooks: an instance refuses attribute assignment once its
  constructor has returned, so the hooks hold no state a stage leaves for another."""

  def __call__(cls, *args, **kwargs):
    hooks = super().__call__(*args, **kwargs)
    object.__setattr__(hooks, "_built", True)
    return hooks


class TaskHooks(metaclass=ReadOnlyOnceBuilt):
  """A task as the template asks for it. A task subclasses this (in bert_tf/tasks/<task>/
  hooks.py) and overrides what it needs; the defaults fit fine-tuning on examples read from
  text files.

  Built once per run from the script's own flags and the RunOptions; everything derived from
  them is computed in the constructor. Once built the hooks are read-only (an assignment
  raises AttributeError): `check` only checks, and what a stage produces for a later one
  (the records written and what their encoding kept) is returned to the template, which
  passes it on.
  """

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

  def __init__(self, task_flags, options):
    """`task_flags`: the script's own flags (shared_flags.task_flags); `options`: the
    RunOptions. A subclass derives its configuration from both here."""
    del options  # a subclass derives what it needs of them
    self.flags = task_flags

  def __setattr__(self, name, value):
    self._refuse_once_built(name)
    object.__setattr__(self, name, value)

  def __delattr__(self, name):
    self._refuse_once_built(name)
    object.__delattr__(self, name)

  def _refuse_once_built(self, name):
    if getattr(self, "_built", False):
      raise AttributeError(
          "%s is read-only once built: cannot set %r. Compute it in __init__, or return it "
          "from the stage that produces it (the template keeps it on the Run)." %
          (type(self).__name__, name))

  def check(self, options):
    """The runner's own flag checks (the shared ones are the template's): raises
    UserInputError, changes nothing."""

  def read_examples(self, run, split):
    """The inputs of `split` ("train", "eval", "predict"), all read before any training."""
    raise NotImplementedError

  def encode(self, run, split, examples):
    """Serialized tf.train.Examples of the features of `examples` (an iterable)."""
    raise NotImplementedError

  def record_files(self, run, split, examples):
    """The Records `split` reads: its examples' features, written to --output_dir."""
    path = run.output_path(self.record_names[split])
    total = len(examples) if self.one_record_per_example else None
    count = example_codec.write_records(path, self.encode(run, split, examples), total,
                                        split + " features")
    return Records([path], count)

  def dataset(self, run, split, examples, records):
    """What the trainer reads for `split`: its record files (`records`, from record_files),
    batched (repeated and shuffled for training)."""
    options = run.options
    batch = options.batch_size(split)
    if split == "train":
      batch //= options.gradient_accumulation_steps
    # run_pretraining's evaluation: max_eval_steps whole batches of the repeated input.
    repeats = {"repeat": True, "drop_remainder": True} if (
        self.eval_repeats and split == "eval") else {}
    return input_pipeline.record_dataset(
        records.files, self.feature_spec(run, split), batch,
        is_training=split == "train", seed=options.shuffle_seed, **repeats)

  def describe(self, run, split, examples, records):
    """What `split` holds, for the log (`records`: what record_files wrote of it)."""
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

  def make_trainer(self, run, num_train_steps, num_warmup_steps, settings, init_checkpoint):
    """What trains, evaluates and predicts: a training.Trainer of make_task's model."""
    return make_trainer(run.options, run.strategy, self.make_task(run), num_train_steps,
                        num_warmup_steps, settings, init_checkpoint=init_checkpoint)

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

  def best_metric(self, run):
    """The --best_metric default: the eval_results.txt entry that ranks checkpoints."""
    return "eval_loss"

  def postprocess_eval(self, run, examples, result, outputs, records):
    """The eval_results.txt entries: Trainer metrics `result`, with the task's own added from
    `outputs` (per-record arrays, with eval_with_predictions; `records`: the eval split's
    Records). Chief only."""
    return result

  def postprocess_predict(self, run, examples, outputs, records):
    """Writes the prediction files from `outputs` (per-record arrays of `records`). Chief
    only."""

  def export_settings(self, run):
    """The task's settings that `export` builds into the SavedModel (labels, windows, answer
    selection, ...): a re-run whose values differ replaces the export instead of keeping it.
    The weights, config, sequence length, tokenizer and precision are the template's."""
    return {}

  def export(self, run):
    """Writes the task's SavedModel of run.trainer.model to --export_dir. Chief only."""
    raise NotImplementedError


def main(hooks_class, script, required_flags):
  """A runner script's main: its required flags checked, then run_task on the options of the
  shared flags, with the hooks built by `hooks_class(task_flags, options)` from the flags
  `script` (its module) defines itself and the options (checked first: the hooks may derive
  their configuration from them)."""
  cli.require_flags(flags.FLAGS, *required_flags)
  options = RunOptions.from_flags(flags.FLAGS)
  options.check()
  run_task(options, hooks_class(shared_flags.task_flags(script), options))


def run_task(options, hooks):
  """The run of a runner: every check, then train, evaluate, predict and export as asked. The
  lock on --output_dir is released when the run ends, however it ends (a process that runs
  several, such as a notebook or a test, leaves no lock behind a refused one)."""
  run = prepare(options, hooks)
  try:
    _run_steps(run, options, hooks)
  finally:
    run_lock.release(run.lock)


def _run_steps(run, options, hooks):
  _check_best_record(options)
  if options.do_train:
    check_no_stale_checkpoints(options.output_dir, distribution.worker_name(run.strategy))
  # Every data file is read before training, so a missing dev or test file is reported
  # before hours of training, not after.
  inputs = {split: hooks.read_examples(run, split)
            for split, action in SPLITS if getattr(options, action)}
  num_train_steps, num_warmup_steps = hooks.train_steps(run, inputs.get("train", []))
  # make_trainer's Trainer first compares --output_dir's saved state's settings with this
  # run's: a refused resume stops here, before any feature file or model file is written.
  run.trainer = hooks.make_trainer(run, num_train_steps, num_warmup_steps,
                                   training_settings(run, hooks, inputs), _init_source(run, hooks))
  if options.do_train and run.trainer.chief:
    run_folder.keep_model_files(options.output_dir, options.bert_config_file,
                                options.vocab_file if hooks.uses_tokenizer else None)
  hooks.on_start(run)
  if options.do_train:
    best, eval_dataset = _train(run, hooks, inputs["train"], num_train_steps,
                                inputs.get("eval"))
  else:  # the latest state in --output_dir, or --init_checkpoint, for the steps below
    run.trainer.restore_or_initialize()
    best, eval_dataset = _recorded_best(run), None
  if best is not None:
    run.trainer.restore_best(best)
  if options.do_eval:
    _evaluate(run, hooks, inputs["eval"], eval_dataset)
  if options.do_predict:
    _predict(run, hooks, inputs["predict"])
  if options.export_dir and run.trainer.chief:
    _export(run, hooks)


class ExportInterrupted(Preempted):
  """Ctrl-C (or SIGINT) during the export: the folder holds what it held before, the
  checkpoints are kept, and the same command exports again. Exits 130, as the shell's."""

  def __init__(self, export_dir, output_dir):
    Exception.__init__(
        self, "interrupted during the export to %s; it holds what it held before, and "
        "--output_dir=%s is kept: run the same command again to export." %
        (export_dir, output_dir))
    self.exit_code = 128 + signal.SIGINT


def export_source(run, hooks):
  """Everything the export is built from, as it reads back from exports.json: the weights
  (their step, --init_checkpoint and a digest of their values: a run retrained to the same
  step, or a checkpoint replaced at the same path, is other weights), the model, tokenizer
  and precision, and the task's export_settings."""
  options = run.options
  source = {"step": run.trainer.step, "weights_sha1": weights_digest(run.trainer.model),
            "init_checkpoint": options.init_checkpoint,
            "bert_config": run.config.to_dict(), "max_seq_length": options.max_seq_length,
            "inference_precision": options.inference_precision}
  if hooks.uses_tokenizer:
    source.update(vocab_sha1=run_folder.file_digest(options.vocab_file),
                  do_lower_case=options.do_lower_case, strip_accents=options.strip_accents)
  source.update(hooks.export_settings(run))
  return json.loads(json.dumps(source))


def weights_digest(model):
  """sha1 of a model's weights: each one's path, dtype, shape and values, in model order."""
  digest = hashlib.sha1()
  for weight in model.weights:
    value = np.ascontiguousarray(keras.ops.convert_to_numpy(weight))
    digest.update(("%s %s %s\n" % (weight.path, value.dtype, value.shape)).encode("utf-8"))
    digest.update(value.tobytes())
  return digest.hexdigest()


def _export(run, hooks):
  """The export, unless --export_dir already holds this run's export of the same weights and
  settings, every file as written (a re-run of a finished command keeps it, and says so).
  Decided and written under the folder's lock, so two runs cannot both think they wrote it."""
  from bert_tf import export
  options = run.options
  source = export_source(run, hooks)
  try:
    with export.locked(options.export_dir):
      _export_locked(run, hooks, source)
  except KeyboardInterrupt:
    raise ExportInterrupted(options.export_dir, options.output_dir) from None


def _export_locked(run, hooks, source):
  from bert_tf import export
  options = run.options
  out, export_dir = options.output_dir, options.export_dir
  recorded = run_folder.recorded_export(out, export_dir)
  if recorded is None and not options.overwrite_export and export.holds_files(export_dir):
    raise UserInputError(
        "--export_dir=%s now holds an export this run did not write (another run exported there "
        "while this one ran). The checkpoints in --output_dir=%s are kept: run the same command "
        "with another --export_dir, or with --overwrite_export to replace that export."
        % (export_dir, out))
  changes = None if recorded is None else run_folder.export_changes(recorded, source, export_dir)
  if recorded is not None and not changes:
    logging.info("Kept the SavedModel in %s: this run exported it from the same weights (step "
                 "%d) and settings, and its files are as written.", export_dir, source["step"])
    return
  replaced, previous = export.holds_files(export_dir), run_folder.export_record(out, export_dir)
  with export.replacing(export_dir):  # on any failure the folder and its record are put back
    try:
      hooks.export(run)
      run_folder.record_export(out, export_dir, source)
    except BaseException:
      run_folder.restore_export_record(out, export_dir, previous)
      raise
  if recorded is not None:
    logging.info("Replaced this run's earlier export in %s: %s.", export_dir, "; ".join(changes))
  elif replaced:
    logging.info("Exported a SavedModel to %s, replacing the export there (--overwrite_export).",
                 export_dir)
  else:
    logging.info("Exported a SavedModel to %s", export_dir)


def _init_source(run, hooks):
  """--init_checkpoint, its labeled head (if any) read in this run's label order. Nothing is
  checked when the run resumes from --output_dir instead."""
  options, labeled = run.options, hooks.head_labels(run)
  if not options.init_checkpoint or labeled is None or run_folder.has_training_state(
      options.output_dir):
    return options.init_checkpoint
  kind, labels, flag = labeled
  return head_labels.in_label_order(options.init_checkpoint, kind, labels, options.do_train, flag)


def check_export_apart(export_dir, output_dir):
  """An export replaces its whole folder: an --export_dir that is, or holds, --output_dir
  would delete the run's checkpoints with it (an --export_dir inside --output_dir is fine)."""
  resolve = (lambda p: p.rstrip("/")) if "://" in export_dir else os.path.realpath
  export_path, output_path = resolve(export_dir), resolve(output_dir)
  if output_path == export_path or output_path.startswith(export_path.rstrip("/") + "/"):
    raise UserInputError(
        "--export_dir=%s %s --output_dir=%s: replacing the export would delete the run's "
        "checkpoints; pass another --export_dir, e.g. %s." % (
            export_dir, "is" if output_path == export_path else "holds", output_dir,
            os.path.join(output_dir, "export")))


def check_weights_exist(options):
  """A run that does not train evaluates or predicts with trained weights: with no training
  state in --output_dir and no --init_checkpoint it would answer with a random model."""
  if options.do_train or options.init_checkpoint or run_folder.has_training_state(
      options.output_dir):
    return
  raise UserInputError(
      "Nothing to %s with: --output_dir=%s holds no training state and no --init_checkpoint "
      "is given (the model would be random). Pass --do_train, the --output_dir of a trained "
      "run, or --init_checkpoint=<its model.ckpt-N>." % (
          "evaluate" if options.do_eval else "predict" if options.do_predict else "export",
          options.output_dir))


def prepare(options, hooks):
  """Everything checked that can be before any work; returns the Run (no trainer yet)."""
  options.check()
  hooks.check(options)
  check_weights_exist(options)
  if hooks.uses_tokenizer:
    checks.check_case(options.do_lower_case, options.init_checkpoint)
  config = hooks.model_config(options, BertConfig.from_json_file(options.bert_config_file))
  checks.check_seq_length(options.max_seq_length, config, hooks.min_seq_length)
  if options.export_dir:
    from bert_tf import export
    check_export_apart(options.export_dir, options.output_dir)
    export.check_export_dir(
        options.export_dir, options.overwrite_export or run_folder.recorded_export(
            options.output_dir, options.export_dir) is not None,
        fix="choose another --export_dir, or pass --overwrite_export to replace it")
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
    checks.check_init_checkpoint(options.init_checkpoint)
    checks.check_causal_attention(options.init_checkpoint, config, options.bert_config_file)
  run_folder.make_output_dir(options.output_dir)
  lock = run_lock.acquire(options.output_dir, distribution.worker_name(strategy))
  keras.utils.set_random_seed(options.shuffle_seed)  # weight init and dropout; after device setup
  return Run(options, config, strategy, tokenizer, lock=lock)


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


def _train(run, hooks, examples, num_train_steps, eval_examples=None):
  """Trains; with --eval_every_steps evaluates on the way. Returns the BestCheckpoint and
  the eval dataset it read (the final evaluation reads it again), or (None, None)."""
  options = run.options
  dataset = _dataset(run, hooks, "train", examples)
  logging.info("***** Running training: %s, batch %d, %d steps *****",
               _describe(run, hooks, "train", examples), options.train_batch_size,
               num_train_steps)
  best = evaluate = eval_dataset = None
  if options.eval_every_steps:
    best = checkpoint_keeper.BestCheckpoint(
        options.output_dir, options.best_metric or hooks.best_metric(run),
        options.eval_every_steps, options.early_stopping_patience)
    eval_dataset = _dataset(run, hooks, "eval", eval_examples)
    logging.info("Evaluating %s every %d steps, keeping the best checkpoint by %s (%s is "
                 "better)%s", _describe(run, hooks, "eval", eval_examples),
                 options.eval_every_steps, best.metric,
                 "lower" if checkpoint_keeper.lower_is_better(best.metric) else "higher",
                 "; early stopping after %d evaluations without improvement" %
                 options.early_stopping_patience if options.early_stopping_patience else "")
    evaluate = functools.partial(_eval_metrics, run, hooks, eval_examples, eval_dataset)
  extra = {} if best is None else {"evaluate": evaluate, "best": best}
  run.trainer.train(dataset, num_train_steps, options.save_checkpoints_steps,
                    log_steps=options.iterations_per_loop, **extra)
  return best, eval_dataset


def _recorded_best(run):
  """The best checkpoint of a folder trained with --eval_every_steps (its model is that one),
  up to the restored step; None for any other folder."""
  output_dir = run.options.output_dir
  if not tf.io.gfile.exists(os.path.join(output_dir, checkpoint_keeper.BestCheckpoint.NAME)):
    return None
  return checkpoint_keeper.BestCheckpoint.recorded(output_dir, run.trainer.step,
                                                  run.options.best_metric)


def _check_best_record(options):
  """A folder trained with --eval_every_steps continues only with it: without, its record
  would no longer say which checkpoint is best."""
  path = os.path.join(options.output_dir, checkpoint_keeper.BestCheckpoint.NAME)
  if options.do_train and not options.eval_every_steps and tf.io.gfile.exists(path):
    raise UserInputError(
        "--output_dir=%s was trained with --eval_every_steps (%s records its evaluations): pass "
        "--eval_every_steps to continue it, or use a new --output_dir." %
        (options.output_dir, path))


def check_no_stale_checkpoints(output_dir, worker=""):
  """A run that starts over in a folder whose training state was removed, but not its
  model.ckpt-N: the pruning keeps the last N by step, so the old run's higher steps would
  stay the latest (what `--init_checkpoint=<folder>` reads) and delete the new run's own
  checkpoints as soon as they are saved, its best too."""
  if run_folder.has_training_state(output_dir, worker):
    return
  stale = sorted(tf.io.gfile.glob(os.path.join(output_dir, "model.ckpt-*.index")))
  if not stale:
    return
  raise UserInputError(
      "--output_dir=%s holds %s of an earlier run but no training state to resume: a new run "
      "there would prune its own checkpoints in favour of those. Use a new --output_dir, or move "
      "the model.ckpt-* files (and %s, if any) out of it." %
      (output_dir, ", ".join(os.path.basename(p)[:-len(".index")] for p in stale[:3]) +
       (", ..." if len(stale) > 3 else ""), checkpoint_keeper.BestCheckpoint.NAME))


def _eval_metrics(run, hooks, examples, dataset):
  """The eval_results.txt entries of the model as it is (the task's, on the chief)."""
  if hooks.eval_with_predictions:
    result, outputs = run.trainer.evaluate(dataset, hooks.max_eval_steps, with_predictions=True)
  else:
    result, outputs = run.trainer.evaluate(dataset, hooks.max_eval_steps), None
  if not run.trainer.chief:
    return None
  return hooks.postprocess_eval(run, examples, result, outputs, run.records["eval"])


def _evaluate(run, hooks, examples, dataset=None):
  """The final evaluation, on `dataset` when training already made it (its records are
  written once)."""
  if dataset is None:
    dataset = _dataset(run, hooks, "eval", examples)
  logging.info("***** Running evaluation: %s, batch %d%s *****",
               _describe(run, hooks, "eval", examples), run.options.eval_batch_size,
               ", %d steps" % hooks.max_eval_steps if hooks.max_eval_steps else "")
  result = _eval_metrics(run, hooks, examples, dataset)
  if result is None:
    return
  path = run.output_path("eval_results.txt")
  training.write_results(path, result)  # the original's `key = value` lines, sorted
  for key in sorted(result):
    logging.info("  %s = %s", key, result[key])
  logging.info("Wrote %s", path)


def _predict(run, hooks, examples):
  dataset = _dataset(run, hooks, "predict", examples)
  logging.info("***** Running prediction: %s, batch %d *****",
               _describe(run, hooks, "predict", examples), run.options.predict_batch_size)
  outputs = run.trainer.predict(dataset)
  if run.trainer.chief:
    hooks.postprocess_predict(run, examples, outputs, run.records["predict"])


def _dataset(run, hooks, split, examples):
  """`split`'s records written (record_files' Records kept on run.records) and what the
  trainer reads of them."""
  run.records[split] = hooks.record_files(run, split, examples)
  return hooks.dataset(run, split, examples, run.records[split])


def _describe(run, hooks, split, examples):
  return hooks.describe(run, split, examples, run.records[split])


def make_strategy(options):
  """The strategy of the options; call before anything else touches TensorFlow devices."""
  return distribution.get_strategy(options.strategy, options.cpu_devices, options.tpu_name,
                                   options.tpu_zone, options.gcp_project, options.master)


def training_settings(run, hooks, inputs):
  """The settings stored with the training state and compared when a run resumes from it.

  Those that shape the weights and optimizer state (config, labels, vocab, casing) always;
  those of the data and its order (sequence length, batch sizes, the training data, and the
  task's own, such as how long documents are cut) only when this run trains: evaluating or
  predicting from a saved state may use other values. A run that trains compares them both
  ways (checkpoint_keeper.check_settings). Epochs and step counts may change on resume
  (checkpoint_keeper.CHANGEABLE_SETTINGS).
  """
  options = run.options
  settings = {"bert_config": run.config.to_dict(), "optimizer": options.optimizer,
              "loss_scale": options.mixed_precision == "float16"}
  if options.adam_bias_correction:  # recorded only when on, so older states read as off
    settings["adam_bias_correction"] = True
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
  to load instead of --init_checkpoint's path). It stops at once when --output_dir holds a
  training state saved with other `settings` (Trainer.check_resume): nothing is written yet."""
  from bert_tf import optimization
  trainer = training.Trainer(
      strategy, task, options.output_dir,
      lambda names: optimization.create_optimizer(options.learning_rate, num_train_steps,
                                                  num_warmup_steps, names, options.optimizer,
                                                  options.adam_bias_correction),
      init_checkpoint=init_checkpoint or options.init_checkpoint,
      accumulation_steps=options.gradient_accumulation_steps,
      loss_scale=options.mixed_precision == "float16", jit_compile=options.jit_compile,
      worker=distribution.worker_name(strategy), settings=settings,
      max_to_keep=options.keep_checkpoint_max)
  trainer.check_resume(options.do_train)
  return trainer


def write_test_results(path, rows):
  """The original's test_results.tsv: one line of tab-separated float32 values per example."""
  with tf.io.gfile.GFile(path, "w") as writer:
    for row in rows:
      writer.write("\t".join(str(np.float32(v)) for v in row) + "\n")
  logging.info("Wrote %d predictions to %s", len(rows), path)
