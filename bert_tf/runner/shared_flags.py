"""The runners' shared flags (the original scripts' names, defaults and help) and RunOptions,
the typed values the runner template reads from them.

Each runner defines its own flags (task, data files, task options) and calls these:
define_training_flags (every runner, hardware included), define_eval_flags (--do_eval) and
define_finetuning_flags (training + tokenizer + --do_predict, epochs and --export_dir);
run_classifier also define_best_checkpoint_flags (--eval_every_steps and its options).
A shared flag's default is RunOptions' field default, so it is stated once. `flag_values`
lets tests define them on a fresh FlagValues.
"""

import collections
import dataclasses
from typing import Optional

from absl import flags

from bert_tf.checkpoints import checks
from bert_tf.errors import UserInputError
from bert_tf.training import distribution
from bert_tf.utils import cli, precision

# The action flags, in the order the "nothing to do" message names them.
ACTIONS = ("do_train", "do_eval", "do_predict", "export_dir")


@dataclasses.dataclass(frozen=True)
class RunOptions:
  """What the template reads from the flags below, typed; a field's default is its flag's.

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
  overwrite_export: bool = False  # replace a non-empty --export_dir this run did not write
  inference_precision: str = "float32"  # what the export computes in (bert_tf.utils.precision)
  actions: tuple = ACTIONS
  # Training, evaluation, prediction.
  train_batch_size: int = 32
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  learning_rate: float = 5e-5
  # None: the runner counts its steps itself (run_pretraining has no such flags).
  num_train_epochs: Optional[float] = None
  warmup_proportion: Optional[float] = None
  save_checkpoints_steps: int = 1000
  iterations_per_loop: int = 1000
  keep_checkpoint_max: int = 3  # of training_state/ckpt-N and of model.ckpt-N each
  # The best checkpoint (run_classifier only): None/0 = off, the original's train-then-evaluate.
  eval_every_steps: Optional[int] = None
  best_metric: Optional[str] = None  # None: the task's main metric (TaskHooks.best_metric)
  early_stopping_patience: int = 0  # 0: no early stopping
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
  adam_bias_correction: bool = False  # the original's AdamWeightDecay has none
  pad_to_max_seq_length: bool = False
  shuffle_seed: int = 12345

  @classmethod
  def from_flags(cls, values):
    """The options of parsed flags: each field from the flag of its name where the runner
    defined one (the hardware choice from --distribution_strategy / --use_tpu), the field's
    default where it did not."""
    defined = {name: values[name].value for name in values}
    fields = {f.name: defined[f.name] for f in dataclasses.fields(cls)
              if f.name in defined and f.name not in ("strategy", "actions")}
    fields["strategy"] = defined["distribution_strategy"] or (
        "tpu" if defined["use_tpu"] else "one_device")
    fields["actions"] = tuple(a for a in ACTIONS if a in defined)
    return cls(**fields)

  def check(self):
    """The checks that need no file: something to do, and numbers in range."""
    if not any(getattr(self, action) for action in self.actions):
      raise UserInputError("At least one of %s must be set." %
                           ", ".join("--" + a for a in self.actions))
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size",
                 "save_checkpoints_steps", "iterations_per_loop", "gradient_accumulation_steps",
                 "keep_checkpoint_max"):
      checks.check_positive(name, getattr(self, name))
    self.check_best_checkpoint()
    if self.do_train and self.num_train_epochs is not None and not self.num_train_epochs > 0:
      raise UserInputError("--num_train_epochs must be positive, got %s." % self.num_train_epochs)
    if self.warmup_proportion is not None and not 0 <= self.warmup_proportion <= 1:
      raise UserInputError("--warmup_proportion must be between 0 and 1, got %s." %
                           self.warmup_proportion)
    if self.learning_rate < 0:
      raise UserInputError("--learning_rate must not be negative, got %s." % self.learning_rate)
    if self.adam_bias_correction and self.optimizer != "adamw":
      raise UserInputError("--adam_bias_correction is for --optimizer=adamw; LAMB always "
                           "corrects its moments. Drop one of them.")

  def check_best_checkpoint(self):
    """--eval_every_steps evaluates the eval file (so it needs --do_eval) on one worker;
    --best_metric and --early_stopping_patience are its options."""
    if self.eval_every_steps is None or self.eval_every_steps == 0:
      for name in ("best_metric", "early_stopping_patience"):
        if getattr(self, name):
          raise UserInputError("--%s=%s ranks the evaluations of --eval_every_steps; add "
                               "--eval_every_steps=N or drop it." % (name, getattr(self, name)))
      return
    checks.check_positive("eval_every_steps", self.eval_every_steps)
    if not self.do_eval:
      raise UserInputError("--eval_every_steps=%d evaluates the eval file during training; add "
                           "--do_eval (and the eval file)." % self.eval_every_steps)
    if self.early_stopping_patience < 0:
      raise UserInputError("--early_stopping_patience must be 0 (off) or positive, got %d." %
                           self.early_stopping_patience)
    if self.strategy == "multi_worker_mirrored":
      raise UserInputError("--eval_every_steps is not supported with "
                           "--distribution_strategy=multi_worker_mirrored; drop it, or train on "
                           "one machine.")
    if self.best_metric is not None and not self.best_metric.startswith("eval_"):
      raise UserInputError("--best_metric=%s must name an eval_results.txt entry (eval_...), "
                           "e.g. eval_loss." % self.best_metric)

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


_DEFAULT = {f.name: f.default for f in dataclasses.fields(RunOptions)}


def define_hardware_flags(flag_values=flags.FLAGS):
  """The original TPU flags plus how bert_tf uses GPUs, CPUs, precision and memory."""
  f = flag_values
  flags.DEFINE_bool("use_tpu", False, "Whether to use TPU (same as --distribution_strategy=tpu).",
                    flag_values=f)
  flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use for training.", flag_values=f)
  flags.DEFINE_string("tpu_zone", None, "[Optional] GCE zone where the Cloud TPU is located in.",
                      flag_values=f)
  flags.DEFINE_string("gcp_project", None,
                      "[Optional] Project name for the Cloud TPU-enabled project.", flag_values=f)
  flags.DEFINE_string("master", None, "[Optional] TensorFlow master URL.", flag_values=f)
  flags.DEFINE_integer("num_tpu_cores", 8,
                       "Only used if `use_tpu` is True. Total number of TPU cores to use.",
                       flag_values=f)
  flags.DEFINE_enum("distribution_strategy", None, distribution.STRATEGIES,
                    "How to use the hardware (default: one_device, or tpu with --use_tpu).",
                    flag_values=f)
  flags.DEFINE_integer("cpu_devices", _DEFAULT["cpu_devices"],
                       "With --distribution_strategy=mirrored and no GPU: split the CPU into this "
                       "many logical devices (for testing multi-device code paths).",
                       flag_values=f)
  flags.DEFINE_enum("mixed_precision", None, ["float16", "bfloat16"],
                    "Run matmuls in this type (LayerNorm, softmax and variables stay float32).",
                    flag_values=f)
  flags.DEFINE_bool("jit_compile", _DEFAULT["jit_compile"],
                    "Compile the training forward/backward pass with XLA.", flag_values=f)
  flags.DEFINE_integer("gradient_accumulation_steps", _DEFAULT["gradient_accumulation_steps"],
                       "Split each train batch into this many micro-batches; the update equals "
                       "that of the whole batch.", flag_values=f)
  flags.DEFINE_enum("optimizer", _DEFAULT["optimizer"], ["adamw", "lamb"],
                    "adamw: the original AdamWeightDecay. lamb: LAMB with the same schedule.",
                    flag_values=f)
  flags.DEFINE_bool("adam_bias_correction", _DEFAULT["adam_bias_correction"],
                    "With --optimizer=adamw: correct Adam's moments for their zero start, as "
                    "torch's AdamW and Kingma & Ba's Adam do. The original does not, so its "
                    "first few hundred updates are up to 6x larger: short fine-tuning runs at "
                    "high learning rates can collapse to one class.", flag_values=f)
  flags.DEFINE_bool("pad_to_max_seq_length", _DEFAULT["pad_to_max_seq_length"],
                    "Run every batch at --max_seq_length, as the original's fixed TPU shapes. By "
                    "default each batch is cut to its longest real sequence (a multiple of 16 "
                    "with --jit_compile), which gives the same numbers faster; SQuAD always "
                    "runs at full length.", flag_values=f)
  flags.DEFINE_integer("shuffle_seed", _DEFAULT["shuffle_seed"],
                       "Seed of weight initialization, dropout and training input shuffles.",
                       flag_values=f)


def define_training_flags(max_seq_length, max_seq_length_help,
                          train_batch_size=_DEFAULT["train_batch_size"],
                          learning_rate=_DEFAULT["learning_rate"], flag_values=flags.FLAGS):
  """Flags of every training runner, pretraining included."""
  f = flag_values
  flags.DEFINE_string("bert_config_file", None,
                      "The config json file corresponding to the pre-trained BERT model. "
                      "This specifies the model architecture.", flag_values=f)
  flags.DEFINE_string("output_dir", None,
                      "The output directory where the model checkpoints will be written.",
                      flag_values=f)
  flags.DEFINE_string("init_checkpoint", None,
                      "Initial checkpoint (usually from a pre-trained BERT model).", flag_values=f)
  flags.DEFINE_integer("max_seq_length", max_seq_length, max_seq_length_help, flag_values=f)
  flags.DEFINE_bool("do_train", _DEFAULT["do_train"], "Whether to run training.", flag_values=f)
  flags.DEFINE_integer("train_batch_size", train_batch_size, "Total batch size for training.",
                       flag_values=f)
  flags.DEFINE_float("learning_rate", learning_rate, "The initial learning rate for Adam.",
                     flag_values=f)
  flags.DEFINE_integer("save_checkpoints_steps", _DEFAULT["save_checkpoints_steps"],
                       "How often to save the model checkpoint.", flag_values=f)
  flags.DEFINE_integer("iterations_per_loop", _DEFAULT["iterations_per_loop"],
                       "How often to log and write summaries (the original's TPU loop size).",
                       flag_values=f)
  flags.DEFINE_integer("keep_checkpoint_max", _DEFAULT["keep_checkpoint_max"],
                       "How many of the latest checkpoints to keep, of the training state and of "
                       "model.ckpt-N each (at least 1; the original's Estimator kept 5). The best "
                       "one of --eval_every_steps is kept besides.", flag_values=f)
  define_hardware_flags(f)


def define_eval_flags(do_eval_help="Whether to run eval on the dev set.", flag_values=flags.FLAGS):
  flags.DEFINE_bool("do_eval", _DEFAULT["do_eval"], do_eval_help, flag_values=flag_values)
  flags.DEFINE_integer("eval_batch_size", _DEFAULT["eval_batch_size"], "Total batch size for eval.",
                       flag_values=flag_values)


def define_finetuning_flags(max_seq_length=_DEFAULT["max_seq_length"],
                            train_batch_size=_DEFAULT["train_batch_size"],
                            learning_rate=_DEFAULT["learning_rate"],
                            do_predict_help="Whether to run the model in inference mode on the "
                                            "test set.",
                            export_help="If set, write a SavedModel here.",
                            flag_values=flags.FLAGS):
  """The flags run_classifier, run_squad and run_swag share."""
  f = flag_values
  define_training_flags(
      max_seq_length,
      "The maximum total input sequence length after WordPiece tokenization. Sequences longer "
      "than this will be truncated, and sequences shorter than this will be padded.",
      train_batch_size, learning_rate, flag_values=f)
  cli.define_tokenizer_flags(f)
  flags.DEFINE_bool("do_predict", _DEFAULT["do_predict"], do_predict_help, flag_values=f)
  flags.DEFINE_integer("predict_batch_size", _DEFAULT["predict_batch_size"],
                       "Total batch size for predict.", flag_values=f)
  flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.",
                     flag_values=f)
  flags.DEFINE_float("warmup_proportion", 0.1,
                     "Proportion of training to perform linear learning rate warmup for. "
                     "E.g., 0.1 = 10% of training.", flag_values=f)
  flags.DEFINE_string("export_dir", None, export_help, flag_values=f)
  flags.DEFINE_bool("overwrite_export", _DEFAULT["overwrite_export"],
                    "Replace a non-empty --export_dir that this --output_dir did not export "
                    "(a re-run replaces or keeps its own export without it).", flag_values=f)
  precision.define_flag("the --export_dir SavedModel", flag_values=f)


def define_best_checkpoint_flags(flag_values=flags.FLAGS):
  """Evaluation during training and the best checkpoint (run_classifier.py: its own data and
  the GLUE tasks; the other runners evaluate otherwise and do not define them)."""
  f = flag_values
  flags.DEFINE_integer("eval_every_steps", None,
                       "With --do_train and --do_eval: save and evaluate the eval file every N "
                       "steps (and at the last), keep the best checkpoint by --best_metric, and "
                       "evaluate, predict and export with it. Off by default: the last step's "
                       "weights, as the original.", flag_values=f)
  flags.DEFINE_string("best_metric", None,
                      "With --eval_every_steps: the eval_results.txt entry that picks the best "
                      "checkpoint. A name holding 'loss' or 'mse' is lower-is-better, any other "
                      "higher-is-better. Default: the task's main metric: eval_accuracy for a "
                      "single-label file (the GLUE tasks' metric; pass eval_macro_f1 for "
                      "imbalanced labels), eval_micro_f1 multi-label, eval_pearson regression; "
                      "GLUE: eval_f1 (MRPC, QQP), eval_mcc (CoLA), eval_pearson (STS-B), else "
                      "eval_accuracy.", flag_values=f)
  flags.DEFINE_integer("early_stopping_patience", _DEFAULT["early_stopping_patience"],
                       "With --eval_every_steps: stop training after this many evaluations "
                       "without improvement on the best (0: never).", flag_values=f)


def task_flags(module, values=flags.FLAGS):
  """The parsed values of the flags `module` defines itself, as one read-only record, so a
  runner's hooks are given their settings instead of reading the global FLAGS."""
  names = sorted(flag.name for flag in values.get_flags_for_module(module))
  return collections.namedtuple("TaskFlags", names)(*(values[name].value for name in names))
