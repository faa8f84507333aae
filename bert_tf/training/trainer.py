"""The one training loop of bert_tf, shared by pretraining and every fine-tuning runner.

One optimizer step:
  1. take `accumulation_steps` micro-batches from the (distributed) iterator;
  2. sum each loss term's denominator over replicas and micro-batches;
  3. on every replica, for every micro-batch, the gradient of
     sum(numerator / (global denominator + eps)), summed across replicas;
  4. the original's `tf.clip_by_global_norm(grads, 1.0)` on that sum (its numbers, on the
     global batch; `clip_by_global_norm` below), then the optimizer update.
So N devices, or N accumulated micro-batches, give the update of one batch N
times larger, not an average of N separately normalised losses.

Under float16 a dynamic loss scale is applied (doubling after 2000 finite steps,
halving and skipping the update on an overflow); bfloat16 and float32 need none.

`Trainer` adds the rest: the model and optimizer, the loop with progress and
TensorBoard summaries, evaluation and prediction. Checkpoints and exact resume are
bert_tf/training/checkpoint_keeper.py's; stopping cleanly on a signal,
bert_tf/training/preemption.py's.
"""

import contextlib
import math
import signal
import time

from absl import logging
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.eager import context

from bert_tf import checkpoints
from bert_tf.checkpoints import run_folder
from bert_tf.errors import Preempted, UserInputError
import bert_tf.training.checkpoint_keeper as checkpoint_keeper
from bert_tf.training.checkpoint_keeper import CheckpointKeeper
import bert_tf.training.preemption as preemption_lib
from bert_tf.utils.progress import Progress

_LOSS_SCALE_PERIOD = 2000


def lean_grappler_options(options):
  """`options` (a thread's tf.function call options) for the train step on CPU: without the
  graph optimizations that find nothing to gain in the step's graph there. That graph has
  thousands of ops and grappler's passes are paid at its first call. A second meta-optimizer
  iteration, the memory optimizer (swapping and recomputation are GPU heuristics), the layout
  optimizer (NCHW for GPU convolutions) and the TFG passes cost about 0.4 s of a MiniLM-L6
  first step and leave later steps as fast; the remapper's fusions, the arithmetic optimizer
  and constant folding stay (docs/performance.md)."""
  config = config_pb2.ConfigProto.FromString(options.config_proto_serialized or b"")
  rewrite = config.graph_options.rewrite_options
  rewrite.meta_optimizer_iterations = rewrite.ONE
  rewrite.memory_optimization = rewrite.NO_MEM_OPT
  rewrite.layout_optimizer = rewrite.OFF
  rewrite.disable_tfg_optimizer = True
  return context.FunctionCallOptions(executor_type=options.executor_type, config_proto=config)


def clip_by_global_norm(gradients, clip_norm):
  """tf.clip_by_global_norm(gradients, clip_norm) for dense gradients: the same ops and numbers
  (a non-finite norm makes every gradient NaN) without its identity op per gradient, which a
  BERT step's first call pays for each of its ~100-400 weights."""
  norm = tf.linalg.global_norm(gradients)
  scale = clip_norm * tf.minimum(1.0 / norm, tf.constant(1.0, norm.dtype) / clip_norm)
  scale = scale + (norm - norm)
  return [g * tf.cast(scale, g.dtype) for g in gradients], norm


@contextlib.contextmanager
def _function_call_options(options):
  """Calls of tf.functions in this thread run with `options` (None: unchanged) until exit."""
  if options is None:
    yield
    return
  ctx = context.context()
  saved = ctx.function_call_options
  ctx.function_call_options = options
  try:
    yield
  finally:
    ctx.function_call_options = saved


def _on_cpus(strategy):
  return all("CPU" in device.upper() for device in strategy.extended.worker_devices)


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
  a shorter last batch would cost a second trace of the whole BERT step."""
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
               loss_scale=None, jit_compile=False, kernel_update=None):
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
    # No AutoGraph anywhere in the step (its code has no tensor-dependent Python control flow):
    # converting the model's and the optimizer's code cost about a fifth of the first step's
    # tracing (MiniLM-L6, batch 32).
    # A function of its own only where it pays: compiled by XLA, or traced once for all the
    # accumulated micro-batches; otherwise inline, which spares grappler inlining it.
    self._replica_gradients = (
        tf.function(self._replica_gradients_fn, jit_compile=jit_compile, autograph=False)
        if jit_compile or self.accumulation_steps > 1 else self._replica_gradients_fn)
    # Under XLA a dynamic-length batch's cut length reaches the compiled function as a shape.
    self._length_carriers = jit_compile and getattr(model, "dynamic_length", False)
    # The update is a dozen elementwise passes over every weight (the dense embedding gradient
    # included, as the original's). On one device it runs fused: on short runs of small models
    # as TensorFlow's Adam kernels, which compile nothing before the first step
    # (`kernel_update`: None lets the optimizer decide, AdamWeightDecay.kernel_update_pays);
    # otherwise compiled by XLA (112 -> 34 ms a step for MiniLM-L6), once per weight shape
    # where the optimizer offers it, which compiles in a fraction of the whole update's time.
    # Distributed variables stay on the plain path.
    fuse = isinstance(strategy, tf.distribute.OneDeviceStrategy)
    if fuse and kernel_update is None:
      kernel_update = getattr(optimizer, "kernel_update_pays", lambda _: False)(self.variables)
    if fuse and kernel_update:
      self._update = self._kernel_update_fn
      self.update_kind = "TensorFlow's Adam kernels (nothing to compile before the first step)"
    elif fuse and hasattr(optimizer, "apply_per_shape"):
      self._update = self._per_shape_update_fn
      self.update_kind = "compiled by XLA once per weight shape"
    elif fuse:
      self._update = tf.function(self._update_fn, jit_compile=True, autograph=False)
      self.update_kind = "compiled whole by XLA"
    else:
      self._update = self._update_fn
      self.update_kind = "per variable (distributed)"
    logging.info("Optimizer update: %s", self.update_kind)
    self._compiled_step = tf.function(self._step, autograph=False)
    self._lean_grappler = _on_cpus(strategy)

  def step(self, iterator):
    """One optimizer step on the next batch(es) of `iterator`: its loss, gradient norm and
    learning rate. On CPUs it runs with lean_grappler_options."""
    # From the thread's options as they are at each call: a config changed between steps
    # (tf.config.optimizer, an executor type) reaches the step as it reaches other functions.
    options = (lean_grappler_options(context.context().function_call_options)
               if self._lean_grappler else None)
    with _function_call_options(options):
      return self._compiled_step(iterator)

  def trace(self, iterator):
    """Traces the step for `iterator`'s batches without running it: a benchmark times tracing
    apart from the first call."""
    return self._compiled_step.get_concrete_function(iterator)

  def _update_fn(self, grads):
    self.optimizer.apply(grads, self.variables)

  def _kernel_update_fn(self, grads):
    self.optimizer.apply_with_kernels(grads, self.variables)

  def _per_shape_update_fn(self, grads):
    self.optimizer.apply_per_shape(grads, self.variables)

  def _replica_gradients_fn(self, features, denominators, scale, length_carrier=None):
    cut = (self.model.cut_to_length_of(length_carrier) if length_carrier is not None
           else contextlib.nullcontext())
    with cut, tf.GradientTape() as tape:
      numerators = self.task.loss_numerators(self.model, features, training=True)
      loss = tf.add_n([numerators[k] / (denominators[k] + self.task.loss_epsilons[k])
                       for k in sorted(numerators)])
      scaled = loss * scale
    grads = tape.gradient(scaled, self.variables)
    grads = [tf.convert_to_tensor(g) if g is not None else tf.zeros_like(v)
             for g, v in zip(grads, self.variables)]
    if self.loss_scale is not None:  # unscaled, a division by 1 would pass over every weight
      grads = [g / scale for g in grads]
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
      args = (batch, denominators, scale)
      if self._length_carriers:
        args += (strategy.run(self._length_carrier, args=(batch,)),)
      loss, grads = strategy.run(self._replica_gradients, args=args)
      total_loss += _reduce_sum(strategy, loss)
      grads = [_reduce_sum(strategy, g) for g in grads]
      total_grads = grads if total_grads is None else [a + b for a, b in zip(total_grads, grads)]
    learning_rate = self.optimizer.learning_rate
    clipped, global_norm = clip_by_global_norm(total_grads, self.clip_norm)
    if self.loss_scale is None:
      self._update(clipped)
    else:
      finite = tf.math.is_finite(global_norm)
      tf.cond(finite, lambda: self._apply(clipped), lambda: self._skip())
      self.loss_scale.update(finite)
    return {"loss": total_loss, "grad_norm": global_norm, "learning_rate": learning_rate}

  def _length_carrier(self, features):
    """A 1-D tensor as long as the batch's cut length (TaskModel.cut_to_length_of)."""
    return tf.zeros([self.model.cut_length(features)], tf.int8)

  def _apply(self, grads):
    self._update(grads)
    return tf.constant(True)

  def _skip(self):
    self.optimizer.iterations.assign_add(1)  # a skipped step still advances the schedule
    return tf.constant(False)


class Trainer:
  """Runs a task's training and evaluation with checkpoints, resume, exports and summaries.

  What goes into `output_dir` and how a run resumes is bert_tf/training/checkpoint_keeper.py's;
  TensorBoard event files (loss, learning rate, gradient norm, steps/s) are written here.
  `settings` (what shapes the state and the data) is stored with the training state
  and compared on resume.
  """

  def __init__(self, strategy, task, output_dir, make_optimizer, init_checkpoint=None,
               accumulation_steps=1, loss_scale=False, jit_compile=False, max_to_keep=3,
               worker="", settings=None):
    self.strategy = strategy
    self.task = task
    self.output_dir = output_dir
    self.chief = not worker
    self.worker = worker
    tf.io.gfile.makedirs(output_dir)
    with strategy.scope():
      self.model = task.create_model()
      self.variable_names = checkpoints.variable_map_of(self.model)
      self.optimizer = make_optimizer(self.variable_names)
      self.loss_scale = DynamicLossScale() if loss_scale else None
    self.train_step = TrainStep(strategy, task, self.model, self.optimizer, accumulation_steps,
                                loss_scale=self.loss_scale, jit_compile=jit_compile)
    self.init_checkpoint = init_checkpoint
    self.max_to_keep = max_to_keep
    self.settings = settings
    self._settings_checked = False  # check_resume did
    # The compiled evaluation steps (by with_predictions) and prediction step, kept for the run.
    self._eval_steps, self._predict_step = {}, None

  @property
  def step(self):
    return int(self.optimizer.iterations.numpy())

  def _seed_states(self):
    """The dropout layers' random seed states: Keras keeps them in `variables`, not `weights`,
    and a checkpoint of the model alone leaves them out (resume would draw other masks)."""
    weights = {id(v) for v in self.model.weights}
    return [v for v in self.model.variables if id(v) not in weights]

  def _keeper(self, iterator):
    items = {"model": self.model, "optimizer": self.optimizer, "seeds": self._seed_states()}
    if iterator is not None:
      items["input"] = iterator
    if self.loss_scale is not None:
      items["loss_scale"] = self.loss_scale
    return CheckpointKeeper(self.output_dir, tf.train.Checkpoint(**items),
                            lambda prefix, step: self.export_google_checkpoint(prefix),
                            self.worker, self.settings, self.max_to_keep)

  def check_resume(self, training):
    """Stops, before the run writes anything, when output_dir holds a training state saved
    with other settings (checkpoint_keeper.check_settings; `training`: this run trains)."""
    checkpoint_keeper.check_settings(self.output_dir,
                                     run_folder.state_dir(self.output_dir, self.worker),
                                     self.settings, training)
    self._settings_checked = True

  def restore_or_initialize(self, iterator=None):
    """Resumes from output_dir if it holds a training state, else loads init_checkpoint.
    With `iterator` (the training input, saved with the state) the run trains.

    Returns the CheckpointKeeper of the run."""
    keeper = self._keeper(iterator)
    latest = keeper.restore_latest(training=iterator is not None,
                                   settings_checked=self._settings_checked)
    if latest:
      logging.info("Resumed from %s at step %d", latest, self.step)
      return keeper
    if self.init_checkpoint:
      report = checkpoints.load_groups(self.init_checkpoint, self.model.checkpoint_groups(),
                                       config=self.model.config)
      logging.info("Initialized %d variables from %s%s", len(report.loaded), report.checkpoint,
                   "; heads left as initialized: %s" % ", ".join(report.skipped_heads)
                   if report.skipped_heads else "")
      if report.skipped_heads and iterator is None:  # evaluates or predicts, untrained
        logging.warning("%s has no trained %s head, and this run does not train: its answers "
                        "come from a randomly initialized head.", report.checkpoint,
                        ", ".join(report.skipped_heads))
    return keeper

  def export_google_checkpoint(self, prefix, with_optimizer_slots=True):
    """Writes the weights (and adam_m/adam_v, global_step) under Google's names."""
    extra = {}
    if with_optimizer_slots and hasattr(self.optimizer, "slot_variables"):
      for name, variable in self.variable_names.items():
        m, v = self.optimizer.slot_variables(variable)
        extra[name + "/adam_m"], extra[name + "/adam_v"] = m, v
    return checkpoints.save_checkpoint(prefix, global_step=self.step,
                                       extra={**self.variable_names, **extra})

  def train(self, dataset, num_train_steps, save_checkpoints_steps, log_steps=100,
            evaluate=None, best=None):
    """Trains to `num_train_steps` optimizer steps, resuming where a previous run stopped.

    With `best` (a checkpoint_keeper.BestCheckpoint, resumed from its record) the checkpoint
    of every best.every_steps-th step and of the last is saved and evaluated (`evaluate`: () ->
    metrics); the best is never pruned, and the run stops early after best.patience
    evaluations without improvement (a re-run then has nothing to do)."""
    iterator = iter(dataset)
    keeper = self.restore_or_initialize(iterator)
    writer = (tf.summary.create_file_writer(self.output_dir) if self.chief
              else tf.summary.create_noop_writer())
    start_step = self.step
    if best is not None:
      best.load(start_step)
      keeper.protected_steps = best.protected_steps
      if start_step and not best.evaluated(start_step) and (
          start_step % best.every_steps == 0 or start_step >= num_train_steps):
        # A run stopped between the save of this step and its evaluation.
        keeper.ensure_google_checkpoint(start_step)
        with writer.as_default():
          self._evaluate_checkpoint(start_step, keeper, evaluate, best,
                                    last=start_step >= num_train_steps)
      if best.should_stop() and start_step < num_train_steps:
        if best.stopped_early is None:
          best.stop(start_step)
        logging.info("Stopped early at step %d: %d evaluations without improvement on the best, "
                     "%s; nothing to do.", start_step, best.without_improvement(),
                     best.describe(best.best()))
        return {}
      if best.stopped_early is not None:  # a larger patience continues a stopped run
        best.stopped_early = None
    if start_step >= num_train_steps:
      logging.info("Already trained to step %d of %d; nothing to do.", start_step,
                   num_train_steps)
      return {}
    progress = Progress(num_train_steps, "steps", "train", initial=start_step)
    metrics, last_log, last_time = {}, start_step, time.monotonic()
    stopped_early = False
    preemption = preemption_lib.cluster_handler(self.strategy, keeper.manager, self._preempted)
    stop = preemption_lib.StopOnSignals() if preemption is None else contextlib.nullcontext()
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
          keeper.save(step)
          raise Preempted(stop.received, step, keeper.state_dir)
        saved = step % save_checkpoints_steps == 0 and step < num_train_steps
        if saved:
          keeper.save(step)
        if best is not None and step % best.every_steps == 0 and step < num_train_steps:
          if not saved:
            keeper.save(step)
          if self._evaluate_checkpoint(step, keeper, evaluate, best):
            stopped_early = True
            break
      if not stopped_early:
        keeper.save(self.step)
        if best is not None:
          self._evaluate_checkpoint(self.step, keeper, evaluate, best, last=True)
      if preemption is None and stop.received is not None:
        # Received during the last save or an evaluation: stop as the log promised, not go on
        # to the outputs; the state is saved, and the same command finishes the run.
        raise Preempted(stop.received, self.step, keeper.state_dir)
    writer.flush()
    # The training state (model, optimizer and input iterator in one tf.train.Checkpoint) is
    # freed when this returns: measured 36 s after the demo's fine-tuning on 2 CPUs, silent
    # unless said (pretraining's took under a second).
    logging.info("Training done at step %d (saved); freeing the training state can take a "
                 "minute before what follows.", self.step)
    return {k: float(v) for k, v in metrics.items()}

  def _evaluate_checkpoint(self, step, keeper, evaluate, best, last=False):
    """Evaluates the saved checkpoint of `step` for `best`; True when the run stops early
    (never at the `last` step: it ends anyway)."""
    metrics = evaluate()
    best.add(step, metrics)
    keeper.prune()  # the previous best may go now
    chosen = best.best()
    if best.metric in metrics:
      tf.summary.scalar(best.metric, float(metrics[best.metric]), step=step)
    logging.info("Evaluation at step %d: %s = %s; best so far: %s", step, best.metric,
                 metrics[best.metric], best.describe(chosen) if chosen else "none")
    if last or not best.should_stop():
      return False
    best.stop(step)
    logging.info("Early stopping at step %d: %d evaluations without improvement on %s "
                 "(--early_stopping_patience=%d).", step, best.without_improvement(),
                 best.describe(chosen), best.patience)
    return True

  def restore_best(self, best):
    """Puts the weights of the best checkpoint of `best` in the model, its step the trainer's
    (what the evaluation, predictions and export then report); returns that evaluation, or
    None when there is none."""
    chosen, anywhere = best.best(), best.best(on_disk=False)
    if anywhere is not None and (chosen is None or best.better(
        best.value(anywhere), best.value(chosen))):  # its model.ckpt-N removed by hand
      logging.warning("The best evaluation in %s, %s, has no model.ckpt-%d on disk; %s.",
                      best.path, best.describe(anywhere), anywhere["step"],
                      "using the best of the checkpoints left" if chosen else
                      "none evaluated is left: using the weights of step %d" % self.step)
    elif chosen is None and best.evaluations:
      logging.warning("No evaluation in %s has a finite %s: using the weights of step %d.",
                      best.path, best.metric, self.step)
    if chosen is None:
      return None
    prefix = checkpoint_keeper.google_checkpoint(self.output_dir, chosen["step"])
    try:
      reader = tf.train.load_checkpoint(prefix)
      for name, variable in self.variable_names.items():
        variable.assign(reader.get_tensor(name))
    except (tf.errors.OpError, ValueError) as e:
      raise UserInputError("Cannot read the best checkpoint %s (%s). Restore it, or remove %s to "
                           "use the last step's weights." %
                           (prefix, str(e).splitlines()[0], best.path)) from None
    self.optimizer.iterations.assign(chosen["step"])
    logging.info("Using the best checkpoint: %s", best.describe(chosen))
    return chosen

  def _preempted(self):
    raise Preempted(signal.SIGTERM, self.step,
                    run_folder.state_dir(self.output_dir, self.worker))

  def evaluate(self, dataset, max_steps=None, with_predictions=False):
    """Metrics as ratios of summed (sum, count) pairs, plus `loss` and `global_step`.

    With `with_predictions`, returns (metrics, predictions): the task's
    per-example outputs from the same forward pass, as numpy arrays.
    """
    eval_step = self._eval_step(with_predictions)
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

  def _eval_step(self, with_predictions):
    """The compiled evaluation step: evaluations every --eval_every_steps trace it once, not
    once each."""
    if with_predictions in self._eval_steps:
      return self._eval_steps[with_predictions]

    @tf.function(autograph=False)  # plain ops only: AutoGraph's conversion costs the trace time
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

    self._eval_steps[with_predictions] = eval_step
    return eval_step

  def _gather(self, per_replica):
    """Per-replica outputs -> whole-batch tensors (in replica order)."""
    if self.strategy.num_replicas_in_sync == 1:
      return per_replica
    return tf.nest.map_structure(lambda t: self.strategy.gather(t, axis=0), per_replica)

  def predict(self, dataset):
    """The task's per-example outputs (`predict_batch`) over the dataset, as numpy arrays."""
    if self._predict_step is None:
      self._predict_step = tf.function(lambda features: self._gather(self.strategy.run(
          lambda f: self.task.predict_batch(self.model, f), args=(features,))), autograph=False)
    collected = []
    for padded, rows in padded_batches(self.strategy, dataset):
      outputs = self._predict_step(distribute_batch(self.strategy, padded))
      collected.append(tf.nest.map_structure(lambda t: t.numpy()[:rows], outputs))
    return _concatenate(collected)


def _concatenate(batches):
  """[{name: array}] per batch -> {name: array} over all batches."""
  if not batches or not batches[0]:
    return {}
  return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def write_results(path, results):
  """The original's eval_results.txt: `key = value` lines in sorted key order."""
  with tf.io.gfile.GFile(path, "w") as f:
    for key in sorted(results):
      f.write("%s = %s\n" % (key, results[key]))
