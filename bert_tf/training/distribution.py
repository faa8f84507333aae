"""The tf.distribute strategy named by --distribution_strategy.

  one_device              the first GPU, else the CPU
  mirrored                all local GPUs (or `cpu_devices` logical CPUs, for testing)
  multi_worker_mirrored   several machines, from the TF_CONFIG environment variable
  tpu                     a Cloud TPU from --tpu_name/--tpu_zone/--gcp_project
                          (or --master); not testable without a TPU
"""

import json
import os

import tensorflow as tf

from bert_tf.errors import UserInputError

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def _cpu_devices(count):
  """Splits the CPU into `count` logical devices (must run before TF initializes devices)."""
  cpus = tf.config.list_physical_devices("CPU")
  try:
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
  except RuntimeError:
    pass  # already configured in this process
  available = len(tf.config.list_logical_devices("CPU"))
  if available < count:
    raise RuntimeError("Could not split the CPU into %d devices: TensorFlow's devices were "
                       "initialized before the strategy was built." % count)
  return ["/cpu:%d" % i for i in range(count)]


def get_strategy(name, cpu_devices=1, tpu_name=None, tpu_zone=None, gcp_project=None,
                 master=None):
  """Builds the strategy; errors name the flag and the fix."""
  if name not in STRATEGIES:
    raise UserInputError("--distribution_strategy must be one of %s, got %r." %
                         (", ".join(STRATEGIES), name))
  if name == "tpu":
    tpu = tpu_name or master
    if not tpu:
      raise UserInputError("--distribution_strategy=tpu needs --tpu_name (or --master).")
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu, zone=tpu_zone,
                                                                 project=gcp_project)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  if name == "multi_worker_mirrored":
    if "TF_CONFIG" not in os.environ:
      raise UserInputError("--distribution_strategy=multi_worker_mirrored needs the TF_CONFIG "
                           "environment variable (cluster and task of this worker).")
    try:
      json.loads(os.environ["TF_CONFIG"])
    except ValueError:
      raise UserInputError("TF_CONFIG is not valid JSON.") from None
    return tf.distribute.MultiWorkerMirroredStrategy()
  # Physical (not logical) devices: listing logical ones would initialize the
  # runtime and forbid splitting the CPU.
  gpus = tf.config.list_physical_devices("GPU")
  if name == "mirrored":
    if gpus:
      return tf.distribute.MirroredStrategy()
    return tf.distribute.MirroredStrategy(_cpu_devices(max(1, cpu_devices)))
  return tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")


def worker_name(strategy):
  """'' for a single worker or the chief, else e.g. 'worker_1' (its own state folder)."""
  if is_chief(strategy):
    return ""
  resolver = strategy.cluster_resolver
  return "%s_%d" % (resolver.task_type, resolver.task_id)


def is_chief(strategy):
  """Whether this worker writes checkpoints, summaries and results."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not resolver.task_type:
    return True
  return resolver.task_type == "chief" or (resolver.task_type == "worker" and
                                           resolver.task_id == 0 and
                                           "chief" not in resolver.cluster_spec().as_dict())
