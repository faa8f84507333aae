"""THE training loop of bert_tf, shared by pretraining and every fine-tuning runner.

One optimizer step:
  1. take `accumulation_steps` micro-batches from the (distributed) iterator;
  2. sum each loss term's denominator over replicas and micro-batches;
  3. on every replica, for every micro-batch, the gradient of
     sum(numerator / (global denominator + eps)), summed across replicas;
  4. `tf.clip_by_global_norm(grads, 1.0)` on that sum (exactly the original's
     clipping, on the global batch), then the optimizer update.
So N devices, or N accumulated micro-batches, give the update of one batch N
times larger, not an average of N separately normalised losses.

Under float16 a dynamic loss scale is applied (doubling after 2000 finite steps,
halving and skipping the update on an overflow); bfloat16 and float32 need none.

`Trainer` adds the rest: checkpoints with exact resume (model, optimizer slots,
step, input position, dropout seed states), stopping cleanly on SIGTERM/SIGINT
(preemption), Google-layout exports, TensorBoard summaries, progress and eval.
"""

import contextlib
import math
import os
import signal
import threading
import time

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf.errors import Preempted, UserInputError, io_reason
from bert_tf.progress import Progress

_LOSS_SCALE_PERIOD = 2000


class DynamicLossScale(tf.Module):
  """Loss scale for float16 training, kept in checkpoints."""

  def __init__(self, initial=2.0 ** 15):
    super().__init__(name="loss_scale")
    self.scale = tf.Variable(initial, dtype=tf.float32, trainable=False,
                             aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    self.good_steps = tf.Variable(0, dtype=tf.int64, trainable=False,
                                  aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

  def update(self, finite):
    def grow():
      self.good_steps.assign_add(1)
      return tf.cond(self.good_steps >= _LOSS_SCALE_PERIOD,
                     lambda: tf.group(self.scale.assign(self.scale * 2.0),
                                      self.good_steps.assign(0)),
                     tf.no_op)

    def shrink():
      return tf.group(self.scale.assign(tf.maximum(self.scale / 2.0, 1.0)),
                      self.good_steps.assign(0))

    return tf.cond(finite, grow, shrink)


def _reduce_sum(strategy, per_replica):
  return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


def padded_batches(strategy, dataset):
  """(padded batch, real row count) for each batch, every one padded to the first batch's size:
  a shorter last batch would cost a second trace of the step, seconds for a BERT graph."""
  size = None
  for batch in dataset:
    batch, rows = pad_batch(strategy, batch, size)
    size = size or rows
    yield batch, rows


def distribute_batch(strategy, batch):
  """Splits this worker's batch evenly over its local replicas.

  The loop reads a plain tf.data iterator per worker (unlike a distributed
  iterator it can be checkpointed, so a resumed run continues at the same record)
  and hands each local replica its slice.
  """
  local_replicas = len(strategy.extended.worker_devices)
  if strategy.num_replicas_in_sync == 1:
    return batch

  def slice_for(context):
    index = context.replica_id_in_sync_group % local_replicas
    def take(t):
      size = tf.shape(t)[0] // local_replicas
      return t[index * size:(index + 1) * size]
    return tf.nest.map_structure(take, batch)

  return strategy.experimental_distribute_values_from_function(slice_for)


def pad_batch(strategy, batch, size=None):
  """Zero-pads an eval/predict batch to `size` rows and to a multiple of the local replicas.

  Returns (padded batch, real row count). Padded rows carry zero weights (e.g.
  is_real_example=0), as the original's PaddingInputExample did on TPUs.
  """
  local_replicas = len(strategy.extended.worker_devices)
  rows = int(tf.shape(tf.nest.flatten(batch)[0])[0])
  target = max(rows, size or 0)
  missing = target - rows + (-target % local_replicas)
  if missing:
    batch = tf.nest.map_structure(
        lambda t: tf.concat([t, tf.zeros([missing] + t.shape[1:].as_list(), t.dtype)], 0), batch)
  return batch, rows


class TrainStep:
  """Builds the compiled optimizer step for a task, model and optimizer under a strategy."""

  def __init__(self, strategy, task, model, optimizer, accumulation_steps=1, clip_norm=1.0,
               loss_scale=None, jit_compile=False):
    self.strategy = strategy
    self.task = task
    self.model = model
    self.optimizer = optimizer
    self.accumulation_steps = int(accumulation_steps)
    self.clip_norm = clip_norm
    self.loss_scale = loss_scale
    self.variables = model.trainable_variables
    with strategy.scope():
      optimizer.build(self.variables)  # slots must exist before the compiled step runs
    self._replica_gradients = tf.function(self._replica_gradients_fn, jit_compile=jit_compile)
    # The update is a dozen elementwise passes over every weight (the dense embedding gradient
    # included, as the original's); XLA fuses them into one: 112 -> 34 ms a step for MiniLM-L6
    # on 2 CPU cores. Single-device only: distributed variables stay on the plain path.
    fuse = isinstance(strategy, tf.distribute.OneDeviceStrategy)
    self._update = tf.function(self._update_fn, jit_compile=True) if fuse else self._update_fn
    self.step = tf.function(self._step)

  def _update_fn(self, grads):
    self.optimizer.apply(grads, self.variables)

  def _replica_gradients_fn(self, features, denominators, scale):
    with tf.GradientTape() as tape:
      numerators = self.task.loss_numerators(self.model, features, training=True)
      loss = tf.add_n([numerators[k] / (denominators[k] + self.task.loss_epsilons[k])
                       for k in sorted(numerators)])
      scaled = loss * scale
    grads = tape.gradient(scaled, self.variables)
    grads = [tf.convert_to_tensor(g) / scale if g is not None else tf.zeros_like(v)
             for g, v in zip(grads, self.variables)]
    return loss, grads

  def _step(self, iterator):
    strategy = self.strategy
    batches = [distribute_batch(strategy, next(iterator))
               for _ in range(self.accumulation_steps)]
    denominators = None
    for batch in batches:
      per_replica = strategy.run(self.task.loss_denominators, args=(batch,))
      summed = {k: _reduce_sum(strategy, v) for k, v in per_replica.items()}
      denominators = summed if denominators is None else {
          k: denominators[k] + summed[k] for k in summed}
    scale = self.loss_scale.scale if self.loss_scale is not None else tf.constant(1.0)
    total_loss, total_grads = 0.0, None
    for batch in batches:
      loss, grads = strategy.run(self._replica_gradients, args=(batch, denominators, scale))
      total_loss += _reduce_sum(strategy, loss)
      grads = [_reduce_sum(strategy, g) for g in grads]
      total_grads = grads if total_grads is None else [a + b for a, b in zip(total_grads, grads)]
    learning_rate = self.optimizer.learning_rate
    clipped, global_norm = tf.clip_by_global_norm(total_grads, self.clip_norm)
    if self.loss_scale is None:
      self._update(clipped)
    else:
      finite = tf.math.is_finite(global_norm)
      tf.cond(finite, lambda: self._apply(clipped), lambda: self._skip())
      self.loss_scale.update(finite)
    return {"loss": total_loss, "grad_norm": global_norm, "learning_rate": learning_rate}

  def _apply(self, grads):
    self._update(grads)
    return tf.constant(True)

  def _skip(self):
    self.optimizer.iterations.assign_add(1)  # a skipped step still advances the schedule
    return tf.constant(False)


class StopOnSignals:
  """Turns the first SIGTERM or SIGINT into a request to stop after the current step.

  Python runs signal handlers between TensorFlow calls, so the step in flight
  always finishes. A second signal restores the previous handler and re-sends
  itself: Ctrl-C twice stops at once.
  """

  SIGNALS = (signal.SIGTERM, signal.SIGINT)

  def __init__(self):
    self.received = None
    self._previous = {}

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      for signum in self.SIGNALS:
        self._previous[signum] = signal.signal(signum, self._handle)
    return self

  def __exit__(self, *unused):
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)
    self._previous = {}

  def _handle(self, signum, unused_frame):
    if self.received is not None:
      signal.signal(signum, self._previous.pop(signum))
      signal.raise_signal(signum)
      return
    self.received = signum
    logging.warning("Received %s: finishing this step, saving the training state, then "
                    "stopping (send it again to stop at once).", signal.Signals(signum).name)


class Trainer:
  """Runs a task's training and evaluation with checkpoints, resume, exports and summaries.

  Layout of `output_dir`:
    training_state/ckpt-N   everything needed to resume (weights, optimizer slots,
                            step, loss scale, input position); the last 3 are kept
    model.ckpt-N            the same weights in Google's layout (with adam_m/adam_v
                            and global_step, like the original's checkpoints), plus a
                            `checkpoint` state file so tf.train.latest_checkpoint works
    events.out.tfevents.*   TensorBoard: loss, learning rate, gradient norm, steps/s
  """

  def __init__(self, strategy, task, output_dir, make_optimizer, init_checkpoint=None,
               accumulation_steps=1, loss_scale=False, jit_compile=False, max_to_keep=3,
               worker=""):
    self.strategy = strategy
    self.task = task
    self.output_dir = output_dir
    self.chief = not worker
    tf.io.gfile.makedirs(output_dir)
    with strategy.scope():
      self.model = task.create_model()
      self.variable_names = checkpoints.variable_map(self.model.encoder, self.model.heads)
      self.optimizer = make_optimizer(self.variable_names)
      self.loss_scale = DynamicLossScale() if loss_scale else None
    self.train_step = TrainStep(strategy, task, self.model, self.optimizer, accumulation_steps,
                                loss_scale=self.loss_scale, jit_compile=jit_compile)
    self.init_checkpoint = init_checkpoint
    self.max_to_keep = max_to_keep
    # Every worker saves (the save is collective); each into its own folder.
    self._state_dir = os.path.join(output_dir, "training_state" + ("_" + worker if worker else ""))

  @property
  def step(self):
    return int(self.optimizer.iterations.numpy())

  def _seed_states(self):
    """The dropout layers' random seed states: Keras keeps them in `variables`, not `weights`,
    and a checkpoint of the model alone leaves them out (resume would draw other masks)."""
    weights = {id(v) for v in self.model.weights}
    return [v for v in self.model.variables if id(v) not in weights]

  def _checkpoint(self, iterator):
    items = {"model": self.model, "optimizer": self.optimizer, "seeds": self._seed_states()}
    if iterator is not None:
      items["input"] = iterator
    if self.loss_scale is not None:
      items["loss_scale"] = self.loss_scale
    return tf.train.Checkpoint(**items)

  def restore_or_initialize(self, iterator=None):
    """Resumes from output_dir if it holds a training state, else loads init_checkpoint."""
    checkpoint = self._checkpoint(iterator)
    latest = tf.train.latest_checkpoint(self._state_dir)
    if latest:
      checkpoint.restore(latest).assert_existing_objects_matched()
      logging.info("Resumed from %s at step %d", latest, self.step)
      return checkpoint
    if self.init_checkpoint:
      report = checkpoints.load_checkpoint(self.init_checkpoint, self.model.encoder,
                                           self.model.heads)
      logging.info("Initialized %d variables from %s%s", len(report.loaded), report.checkpoint,
                   "; heads left as initialized: %s" % ", ".join(report.skipped_heads)
                   if report.skipped_heads else "")
    return checkpoint

  def export_google_checkpoint(self, prefix, with_optimizer_slots=True):
    """Writes the weights (and adam_m/adam_v, global_step) under Google's names."""
    extra = {}
    if with_optimizer_slots and hasattr(self.optimizer, "slot_variables"):
      for name, variable in self.variable_names.items():
        m, v = self.optimizer.slot_variables(variable)
        extra[name + "/adam_m"], extra[name + "/adam_v"] = m, v
    return checkpoints.save_checkpoint(prefix, self.model.encoder, self.model.heads,
                                       global_step=self.step, extra=extra)

  def _save(self, manager):
    """Saves the training state and the Google-layout checkpoint of this step.

    A failed save (a full disk, a lost file system) removes its partial files and stops with
    one message; the previous complete checkpoint stays what a rerun resumes from.
    """
    try:
      self._save_files(manager)
    except (tf.errors.OpError, OSError) as e:
      self._remove_partial_save()
      previous = manager.latest_checkpoint
      raise UserInputError(
          "Saving the checkpoint of step %d in %s failed: %s. %s; free space or fix the folder, "
          "then run the same command again." %
          (self.step, self.output_dir, io_reason(e),
           "The run will resume from %s" % previous if previous
           else "No earlier checkpoint exists, so the run will start over")) from None

  def _remove_partial_save(self):
    step = self.step
    partial = tf.io.gfile.glob(os.path.join(self._state_dir, "ckpt-%d_temp" % step))
    partial += tf.io.gfile.glob(os.path.join(self.output_dir, "model.ckpt-%d.tmp-*" % step))
    if not tf.io.gfile.exists(os.path.join(self.output_dir, "model.ckpt-%d.index" % step)):
      partial += tf.io.gfile.glob(os.path.join(self.output_dir, "model.ckpt-%d.data-*" % step))
    for path in partial:
      try:
        if tf.io.gfile.isdir(path):
          tf.io.gfile.rmtree(path)
        else:
          tf.io.gfile.remove(path)
      except tf.errors.OpError:
        logging.warning("Could not remove the partial file %s", path)

  def _save_files(self, manager):
    manager.save(checkpoint_number=self.step)
    if not self.chief:
      return
    prefix = os.path.join(self.output_dir, "model.ckpt-%d" % self.step)
    self.export_google_checkpoint(prefix)
    kept = sorted(tf.io.gfile.glob(os.path.join(self.output_dir, "model.ckpt-*.index")),
                  key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0]))
    for old in kept[:-self.max_to_keep]:
      for path in tf.io.gfile.glob(old[:-len(".index")] + ".*"):
        tf.io.gfile.remove(path)
    names = [os.path.basename(p[:-len(".index")]) for p in kept[-self.max_to_keep:]]
    write_checkpoint_state(self.output_dir, names)

  def train(self, dataset, num_train_steps, save_checkpoints_steps, log_steps=100):
    """Trains to `num_train_steps` optimizer steps, resuming where a previous run stopped."""
    iterator = iter(dataset)
    checkpoint = self.restore_or_initialize(iterator)
    manager = tf.train.CheckpointManager(checkpoint, self._state_dir, self.max_to_keep)
    writer = (tf.summary.create_file_writer(self.output_dir) if self.chief
              else tf.summary.create_noop_writer())
    start_step = self.step
    if start_step >= num_train_steps:
      logging.info("Already trained to step %d of %d; nothing to do.", start_step,
                   num_train_steps)
      return {}
    progress = Progress(num_train_steps, "steps", "train", initial=start_step)
    metrics, last_log, last_time = {}, start_step, time.monotonic()
    preemption = self._preemption_handler(manager)
    stop = StopOnSignals() if preemption is None else contextlib.nullcontext()
    with writer.as_default(), stop:
      while self.step < num_train_steps:
        try:
          metrics = self.train_step.step(iterator)
        except tf.errors.DataLossError as e:
          raise UserInputError("A training record is corrupt (%s). Check or recreate the "
                               "input files." % e.message.splitlines()[0]) from None
        step = self.step
        loss = float(metrics["loss"])
        if not math.isfinite(loss) and self.loss_scale is None:
          raise FloatingPointError("Loss became %s at step %d; lower --learning_rate." %
                                   (loss, step))
        progress.update(1, info="loss %.4f" % loss)
        if step - last_log >= log_steps or step == num_train_steps:
          now = time.monotonic()
          tf.summary.scalar("loss", loss, step=step)
          tf.summary.scalar("learning_rate", float(metrics["learning_rate"]), step=step)
          tf.summary.scalar("grad_norm", float(metrics["grad_norm"]), step=step)
          tf.summary.scalar("steps_per_second", (step - last_log) / (now - last_time), step=step)
          if self.loss_scale is not None:
            tf.summary.scalar("loss_scale", float(self.loss_scale.scale.numpy()), step=step)
          logging.info("step %d: loss %.6f, lr %.3g", step, loss, float(metrics["learning_rate"]))
          last_log, last_time = step, now
        if preemption is not None:
          preemption.save_checkpoint_if_preempted(checkpoint_number=step)
        elif stop.received is not None:
          self._save(manager)
          raise Preempted(stop.received, step, self._state_dir)
        if step % save_checkpoints_steps == 0 and step < num_train_steps:
          self._save(manager)
      self._save(manager)
    writer.flush()
    return {k: float(v) for k, v in metrics.items()}

  def _preemption_handler(self, manager):
    """TensorFlow's own PreemptionCheckpointHandler under multi-worker and TPU strategies.

    There a SIGTERM on one worker must make every worker save at the same step,
    which the handler agrees through the cluster's coordination service. Single
    host strategies use StopOnSignals instead (it also handles SIGINT and writes
    the Google-layout export).
    """
    if not isinstance(self.strategy, (tf.distribute.MultiWorkerMirroredStrategy,
                                      tf.distribute.TPUStrategy)):
      return None

    def stop():
      raise Preempted(signal.SIGTERM, self.step, self._state_dir)

    return tf.distribute.experimental.PreemptionCheckpointHandler(
        self.strategy.cluster_resolver, manager,
        termination_config=tf.distribute.experimental.TerminationConfig(exit_fn=stop))

  def evaluate(self, dataset, max_steps=None, with_predictions=False):
    """Metrics as ratios of summed (sum, count) pairs, plus `loss` and `global_step`.

    With `with_predictions`, returns (metrics, predictions): the task's
    per-example outputs from the same forward pass, as numpy arrays.
    """
    @tf.function
    def eval_step(features):
      def replica(features):
        sums, numerators, predictions = self.task.eval_batch(self.model, features)
        return (sums, numerators, self.task.loss_denominators(features)), predictions
      summed, predictions = self.strategy.run(replica, args=(features,))
      sums, numerators, denominators = tf.nest.map_structure(
          lambda t: _reduce_sum(self.strategy, t), summed)
      # The batch loss of the original: each term over the whole batch, not per replica.
      loss = tf.add_n([numerators[k] / (denominators[k] + self.task.loss_epsilons[k])
                       for k in sorted(numerators)])
      return sums, loss, self._gather(predictions) if with_predictions else {}

    totals, losses, collected, steps = {}, [], [], 0
    for features, rows in padded_batches(self.strategy, dataset):
      if max_steps is not None and steps >= max_steps:
        break
      sums, loss, predictions = eval_step(distribute_batch(self.strategy, features))
      for name, (total, count) in sums.items():
        previous = totals.get(name, (0.0, 0.0))
        totals[name] = (previous[0] + float(total), previous[1] + float(count))
      losses.append(float(loss))
      collected.append(tf.nest.map_structure(lambda t: t.numpy()[:rows], predictions))
      steps += 1
    if not steps:
      raise UserInputError("The evaluation data produced no batch (fewer records than "
                           "--eval_batch_size?).")
    result = {name: total / count if count else 0.0 for name, (total, count) in totals.items()}
    result["loss"] = sum(losses) / len(losses)
    result["global_step"] = self.step
    if with_predictions:
      return result, _concatenate(collected)
    return result

  def _gather(self, per_replica):
    """Per-replica outputs -> whole-batch tensors (in replica order)."""
    if self.strategy.num_replicas_in_sync == 1:
      return per_replica
    return tf.nest.map_structure(lambda t: self.strategy.gather(t, axis=0), per_replica)

  def predict(self, dataset):
    """The task's per-example outputs (`predict_batch`) over the dataset, as numpy arrays."""
    @tf.function
    def predict_step(features):
      return self._gather(self.strategy.run(lambda f: self.task.predict_batch(self.model, f),
                                            args=(features,)))

    collected = []
    for padded, rows in padded_batches(self.strategy, dataset):
      outputs = predict_step(distribute_batch(self.strategy, padded))
      collected.append(tf.nest.map_structure(lambda t: t.numpy()[:rows], outputs))
    return _concatenate(collected)


def _concatenate(batches):
  """[{name: array}] per batch -> {name: array} over all batches."""
  if not batches or not batches[0]:
    return {}
  return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def write_checkpoint_state(folder, names):
  """The `checkpoint` state file TF1 tools read (tf.train.latest_checkpoint), atomically."""
  text = 'model_checkpoint_path: "%s"\n' % names[-1]
  text += "".join('all_model_checkpoint_paths: "%s"\n' % n for n in names)
  tmp = os.path.join(folder, "checkpoint.tmp")
  with tf.io.gfile.GFile(tmp, "w") as f:
    f.write(text)
  tf.io.gfile.rename(tmp, os.path.join(folder, "checkpoint"), overwrite=True)


def write_results(path, results):
  """The original's eval_results.txt: `key = value` lines in sorted key order."""
  with tf.io.gfile.GFile(path, "w") as f:
    for key in sorted(results):
      f.write("%s = %s\n" % (key, results[key]))
