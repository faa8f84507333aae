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

`Trainer` adds the rest: checkpoints with resume (model, optimizer slots, step,
input position), Google-layout exports, TensorBoard summaries, progress and eval.
"""

import tensorflow as tf

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
    self.step = tf.function(self._step)

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
    batches = [next(iterator) for _ in range(self.accumulation_steps)]
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
      self.optimizer.apply(clipped, self.variables)
    else:
      finite = tf.math.is_finite(global_norm)
      tf.cond(finite, lambda: self._apply(clipped), lambda: self._skip())
      self.loss_scale.update(finite)
    return {"loss": total_loss, "grad_norm": global_norm, "learning_rate": learning_rate}

  def _apply(self, grads):
    self.optimizer.apply(grads, self.variables)
    return tf.constant(True)

  def _skip(self):
    self.optimizer.iterations.assign_add(1)  # a skipped step still advances the schedule
    return tf.constant(False)
