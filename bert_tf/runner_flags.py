"""Flags every training runner shares beyond the original's, and what they build.

The original TPU flags (use_tpu, tpu_name, tpu_zone, gcp_project, master,
num_tpu_cores) are defined here too, with the original's names and help.
"""

from absl import flags

from bert_tf import distribution
from bert_tf.errors import UserInputError


def define_hardware_flags():
  flags.DEFINE_bool("use_tpu", False, "Whether to use TPU (same as --distribution_strategy=tpu).")
  flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use for training.")
  flags.DEFINE_string("tpu_zone", None, "[Optional] GCE zone where the Cloud TPU is located in.")
  flags.DEFINE_string("gcp_project", None,
                      "[Optional] Project name for the Cloud TPU-enabled project.")
  flags.DEFINE_string("master", None, "[Optional] TensorFlow master URL.")
  flags.DEFINE_integer("num_tpu_cores", 8,
                       "Only used if `use_tpu` is True. Total number of TPU cores to use.")
  flags.DEFINE_enum("distribution_strategy", None, distribution.STRATEGIES,
                    "How to use the hardware (default: one_device, or tpu with --use_tpu).")
  flags.DEFINE_integer("cpu_devices", 1,
                       "With --distribution_strategy=mirrored and no GPU: split the CPU into this "
                       "many logical devices (for testing multi-device code paths).")
  flags.DEFINE_enum("mixed_precision", None, ["float16", "bfloat16"],
                    "Run matmuls in this type (LayerNorm, softmax and variables stay float32).")
  flags.DEFINE_bool("jit_compile", False, "Compile the training forward/backward pass with XLA.")
  flags.DEFINE_integer("gradient_accumulation_steps", 1,
                       "Split each train batch into this many micro-batches; the update equals "
                       "that of the whole batch.")
  flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"],
                    "adamw: the original AdamWeightDecay. lamb: LAMB with the same schedule.")
  flags.DEFINE_integer("shuffle_seed", 12345,
                       "Seed of weight initialization, dropout and training input shuffles.")


def strategy_name(values):
  return values.distribution_strategy or ("tpu" if values.use_tpu else "one_device")


def make_strategy(values):
  """The strategy from the flags; call before anything else touches TensorFlow devices."""
  return distribution.get_strategy(strategy_name(values), values.cpu_devices, values.tpu_name,
                                   values.tpu_zone, values.gcp_project, values.master)


def dtype_policy(values):
  return "mixed_" + values.mixed_precision if values.mixed_precision else None


def check_batch_sizes(values, strategy, train_batch_size, *other_batch_sizes):
  """Train batches split evenly over micro-batches and replicas; others over replicas."""
  replicas = strategy.num_replicas_in_sync
  micro = values.gradient_accumulation_steps
  if micro < 1:
    raise UserInputError("--gradient_accumulation_steps must be at least 1.")
  if train_batch_size % (micro * replicas):
    raise UserInputError("--train_batch_size=%d must be divisible by --gradient_accumulation_steps"
                         " (%d) times the number of replicas (%d)." %
                         (train_batch_size, micro, replicas))
  for size in other_batch_sizes:
    if size < 1:
      raise UserInputError("Batch sizes must be positive, got %d." % size)


def make_trainer(values, strategy, task, num_train_steps, num_warmup_steps):
  """The Trainer every runner uses, configured from the shared flags."""
  from bert_tf import optimization, training
  return training.Trainer(
      strategy, task, values.output_dir,
      lambda names: optimization.create_optimizer(values.learning_rate, num_train_steps,
                                                  num_warmup_steps, names, values.optimizer),
      init_checkpoint=values.init_checkpoint,
      accumulation_steps=values.gradient_accumulation_steps,
      loss_scale=values.mixed_precision == "float16", jit_compile=values.jit_compile,
      worker=distribution.worker_name(strategy))


def train_on_records(values, trainer, files, spec, num_train_steps):
  """Trains on TFRecord files of `spec` features with the shared batch/seed/save flags."""
  from bert_tf import input_pipeline
  dataset = input_pipeline.record_dataset(
      files, spec, values.train_batch_size // values.gradient_accumulation_steps,
      is_training=True, seed=values.shuffle_seed)
  return trainer.train(dataset, num_train_steps, values.save_checkpoints_steps,
                       log_steps=values.iterations_per_loop)


def use_one_hot_embeddings(values):
  """The original used one-hot embedding lookups exactly when running on TPUs."""
  return strategy_name(values) == "tpu"
