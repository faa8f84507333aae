"""The original optimizer: AdamWeightDecay with linear warmup and linear decay.

Semantics of google-research/bert `optimization.py`, kept exactly:

* learning rate at optimizer step k (k = 0, 1, ...): `init_lr * k / warmup` while
  k < warmup, else `init_lr * (1 - min(k, N) / N)`; so the first step uses lr 0 and
  only fills the moments;
* Adam without bias correction, epsilon added after the square root (1e-6) (a quirk:
  the first hundred updates are several times those of Kingma & Ba's Adam; the
  correction is offered behind `bias_correction`, off by default);
* decoupled weight decay 0.01 (`update += 0.01 * param` before scaling by lr),
  skipped for variables whose Google name matches LayerNorm, layer_norm or bias;
* gradients clipped to global norm 1.0 (done by the training loop on the gradients
  summed over replicas, so several devices update exactly like one device).

The optimizers are Keras optimizers; `variable_names` maps each trainable variable
to its Google checkpoint name, which is what the weight-decay exclusions match.
"""

import functools
import re

import keras
from keras import ops
import numpy as np
import tensorflow as tf

from bert_tf.errors import UserInputError

EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
# Weights times training steps up to which the update runs as TensorFlow's Adam kernels rather
# than compiled by XLA (AdamWeightDecay.kernel_update_pays). The kernels make the first step
# shorter and later steps a little longer; up to this bound a run of MiniLM-L6 or BERT-Base
# pays at most a couple of seconds in all for its shorter first step (docs/performance.md,
# "Short runs of small models").
KERNEL_UPDATE_WEIGHT_STEPS = 1e10


class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
  """Linear warmup to `init_lr` over `num_warmup_steps`, then linear decay to 0 at
  `num_train_steps` (the original's polynomial_decay with power 1, no cycling)."""

  def __init__(self, init_lr, num_train_steps, num_warmup_steps):
    self.init_lr = float(init_lr)
    self.num_train_steps = int(num_train_steps)
    self.num_warmup_steps = int(num_warmup_steps)

  def __call__(self, step):
    step = ops.cast(step, "float32")
    decay_steps = float(self.num_train_steps)
    decayed = self.init_lr * (1.0 - ops.minimum(step, decay_steps) / decay_steps)
    if not self.num_warmup_steps:
      return decayed
    warmup = self.init_lr * (step / float(self.num_warmup_steps))
    is_warmup = ops.cast(step < float(self.num_warmup_steps), "float32")
    return (1.0 - is_warmup) * decayed + is_warmup * warmup

  def get_config(self):
    return {"init_lr": self.init_lr, "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps}


def excluded_from_weight_decay(name, exclude=EXCLUDE_FROM_WEIGHT_DECAY):
  """Whether the original skips weight decay for the variable with this Google name."""
  return any(re.search(pattern, name) for pattern in exclude)


def _tf_variable(variable):
  """The tf.Variable behind a Keras variable: a compiled function takes it as an argument
  (traced by shape and dtype, so one trace serves every weight of a shape)."""
  return variable.value if isinstance(variable, keras.Variable) else variable


def _adam_kernel(variable, m, v, gradient, lr, constants):
  """TensorFlow's fused Adam kernel on one weight; `constants`: AdamWeightDecay's
  _kernel_constants."""
  zero, beta_1, beta_2, epsilon = constants
  tf.raw_ops.ResourceApplyAdam(
      var=variable.handle, m=m.handle, v=v.handle, beta1_power=zero, beta2_power=zero, lr=lr,
      beta1=beta_1, beta2=beta_2, epsilon=epsilon, grad=tf.cast(gradient, tf.float32))


class AdamWeightDecay(keras.optimizers.Optimizer):
  """The original AdamWeightDecayOptimizer as a Keras optimizer.

  Slots are named `adam_m` / `adam_v` like the original's `<param>/adam_m|adam_v`.
  `bias_correction` divides the moments by (1 - beta^t) at update t (1, 2, ...), as
  torch's AdamW does; the original does not.
  """

  def __init__(self, learning_rate, variable_names, weight_decay_rate=0.01, beta_1=0.9,
               beta_2=0.999, epsilon=1e-6, exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY,
               bias_correction=False, name="AdamWeightDecay", **kwargs):
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    self.weight_decay_rate = weight_decay_rate
    self.bias_correction = bool(bias_correction)
    self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
    self._variable_names = dict(variable_names)
    self._exclude = tuple(exclude_from_weight_decay)
    self._compiled_updates = {}  # (shape, dtype, decays) -> its update compiled by XLA

  def build(self, var_list):
    if self.built:
      return
    super().build(var_list)
    self._m, self._v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])
    # Keyed like Keras keys variables, so mirrored copies find their entry too.
    self._decays = {self._var_key(v): not excluded_from_weight_decay(name, self._exclude)
                    for name, v in self._variable_names.items()}

  def _uses_decay(self, variable):
    return bool(self.weight_decay_rate) and self._decays.get(self._var_key(variable), True)

  def update_step(self, gradient, variable, learning_rate):
    index = self._get_variable_index(variable)
    self._update_weight(variable, self._m[index], self._v[index],
                        ops.cast(gradient, variable.dtype),
                        ops.cast(learning_rate, variable.dtype), self._uses_decay(variable),
                        self._update_count() if self.bias_correction else None)

  def _update_count(self):
    """t of Adam's bias correction: 1 at the first update."""
    return ops.cast(self.iterations + 1, "float32")

  def _update_weight(self, variable, m, v, gradient, lr, decay, count):
    """The original's update of one weight and its two moments (count: bias correction's t,
    or None for the original's update without it). The variables are Keras's or, compiled by
    apply_per_shape, the tf.Variables behind them."""
    next_m = self.beta_1 * m + (1.0 - self.beta_1) * gradient
    next_v = self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient)
    if count is not None:
      update = (next_m / (1.0 - ops.power(self.beta_1, count))) / (
          ops.sqrt(next_v / (1.0 - ops.power(self.beta_2, count))) + self.epsilon)
    else:
      update = next_m / (ops.sqrt(next_v) + self.epsilon)
    if decay:
      update = update + self.weight_decay_rate * variable
    self.assign(m, next_m)
    self.assign(v, next_v)
    self.assign_sub(variable, lr * update)

  def _compiled_update(self, variable):
    """`_update_weight` compiled by XLA for every weight with `variable`'s shape, dtype and
    decay: one program serves them all (the weights are its arguments, not captured)."""
    key = tuple(variable.shape), variable.dtype, self._uses_decay(variable)
    if key not in self._compiled_updates:
      # A partial: a function of its own per key for tf.function's retracing count.
      self._compiled_updates[key] = tf.function(
          functools.partial(self._update_weight, decay=key[2]), jit_compile=True,
          autograph=False)
    return self._compiled_updates[key]

  def apply_per_shape(self, gradients, variables):
    """`apply` on one device, each decaying weight's update compiled by XLA: once per weight
    shape, then called for every weight of that shape (bitwise the numbers of `apply` compiled
    whole, which lowered some 3,000 TensorFlow ops before the first step). The weights without
    decay (LayerNorm, biases) take TensorFlow's Adam kernel, which is their whole update and
    compiles nothing; with bias_correction they are compiled too (docs/performance.md). Like
    apply_with_kernels it takes dense gradients and none of Keras's extras (clipping, EMA):
    TrainStep clips and densifies before."""
    lr = tf.cast(self.learning_rate, tf.float32)
    count = self._update_count() if self.bias_correction else None
    constants = None if self.bias_correction else self._kernel_constants()
    for gradient, variable in zip(gradients, variables):
      m, v = self.slot_variables(variable)
      if constants is not None and not self._uses_decay(variable):
        _adam_kernel(variable, m, v, gradient, lr, constants)
      else:
        self._compiled_update(variable)(_tf_variable(variable), _tf_variable(m), _tf_variable(v),
                                        tf.cast(gradient, variable.dtype), lr, count=count)
    self.iterations.assign_add(1)

  @property
  def has_kernel_update(self):
    """Whether `apply_with_kernels` gives this optimizer's update (not with bias_correction,
    which TensorFlow's kernel would correct otherwise than update_step does)."""
    return not self.bias_correction

  def kernel_update_pays(self, variables):
    """Whether this run updates with `apply_with_kernels` rather than `apply_per_shape`: the
    kernels compile nothing before the first step, but read every weight once more a step, so
    they are for short runs of small models (weights x steps up to KERNEL_UPDATE_WEIGHT_STEPS;
    docs/performance.md). A run without WarmupLinearDecay's step count compiles."""
    schedule = self._learning_rate
    if not (self.has_kernel_update and isinstance(schedule, WarmupLinearDecay)):
      return False
    weights = sum(int(np.prod(v.shape)) for v in variables)
    return weights * schedule.num_train_steps <= KERNEL_UPDATE_WEIGHT_STEPS

  def apply_with_kernels(self, gradients, variables):
    """`apply` as TensorFlow's fused Adam kernel (ResourceApplyAdam with zero beta powers: no
    bias correction) after the decay, each weight read about twice and nothing compiled, so
    the first training step does not wait for XLA to compile the update. Equal to `apply` up
    to float32 rounding: the kernel orders the same arithmetic otherwise."""
    learning_rate = tf.cast(self.learning_rate, tf.float32)
    decay = learning_rate * self.weight_decay_rate
    constants = self._kernel_constants()
    for gradient, variable in zip(gradients, variables):
      m, v = self.slot_variables(variable)
      if self._uses_decay(variable):  # on the handle: one read, one product, one update
        weights = tf.raw_ops.ReadVariableOp(resource=variable.handle, dtype=variable.dtype)
        tf.raw_ops.AssignSubVariableOp(resource=variable.handle, value=decay * weights)
      _adam_kernel(variable, m, v, gradient, learning_rate, constants)
    self.iterations.assign_add(1)

  def _kernel_constants(self):
    """The kernel's beta powers (zero: no bias correction), betas and epsilon, made once for
    all weights."""
    return tuple(tf.constant(x) for x in (0.0, self.beta_1, self.beta_2, self.epsilon))

  def slot_variables(self, variable):
    """(adam_m, adam_v) of a trainable variable, for Google-layout export."""
    index = self._get_variable_index(variable)
    return self._m[index], self._v[index]

  def get_config(self):
    config = super().get_config()
    config.update({"weight_decay_rate": self.weight_decay_rate, "beta_1": self.beta_1,
                   "beta_2": self.beta_2, "epsilon": self.epsilon,
                   "bias_correction": self.bias_correction})
    return config


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, variable_names,
                     optimizer_type="adamw", bias_correction=False):
  """The original `create_optimizer` minus clipping (the loop clips the summed gradients).

  bias_correction: Adam's bias correction for adamw (AdamWeightDecay's docstring).
  optimizer_type "lamb" uses Keras' LAMB with the same schedule, weight decay rate
  and exclusions (not in the original code; offered for large-batch pretraining).
  """
  if num_train_steps < 1:
    raise UserInputError("num_train_steps must be positive, got %d." % num_train_steps)
  if not 0 <= num_warmup_steps:
    raise UserInputError("num_warmup_steps must be >= 0, got %d." % num_warmup_steps)
  schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
  if optimizer_type == "adamw":
    return AdamWeightDecay(schedule, variable_names, bias_correction=bias_correction)
  if optimizer_type == "lamb":
    if bias_correction:
      raise UserInputError("--adam_bias_correction is for --optimizer=adamw; LAMB always "
                           "corrects its moments.")
    optimizer = keras.optimizers.Lamb(learning_rate=schedule, beta_1=0.9, beta_2=0.999,
                                      epsilon=1e-6, weight_decay=0.01)
    optimizer.exclude_from_weight_decay(
        var_list=[v for name, v in variable_names.items() if excluded_from_weight_decay(name)])
    return optimizer
  raise UserInputError("--optimizer must be adamw or lamb, got %r." % optimizer_type)
