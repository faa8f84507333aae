"""AdamWeightDecay + warmup/decay + clipping: the original's 5-step trajectory."""

import json
import logging

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.eager import context

from bert_tf import checkpoints, optimization, training
from bert_tf.config import BertConfig
from bert_tf.data import input_pipeline
from bert_tf.tasks.pretraining import PretrainingTask
from helpers import FIXTURES, TINY

OPT = FIXTURES / "optimizer"
TRAJECTORY = json.loads((OPT / "trajectory.json").read_text())
BATCH = input_pipeline.to_model_names(dict(np.load(OPT / "batch.npz")))


def _setup(strategy, accumulation_steps=1, kernel_update=None, optimizer_type="adamw",
           initial_loss_scale=None):
  config = BertConfig.from_json_file(str(OPT / "bert_config_nodropout.json"))
  with strategy.scope():
    task = PretrainingTask(config)
    model = task.create_model()
    checkpoints.load_checkpoint(TINY.ckpt, model.encoder, model.heads)
    names = checkpoints.variable_map(model.encoder, model.heads)
    optimizer = optimization.create_optimizer(1e-3, 10, 2, names, optimizer_type)
    loss_scale = (training.trainer.DynamicLossScale(initial=initial_loss_scale)
                  if initial_loss_scale is not None else None)
  step = training.TrainStep(strategy, task, model, optimizer, accumulation_steps,
                            loss_scale=loss_scale, kernel_update=kernel_update)
  return names, optimizer, step


def _iterator(strategy, dataset):
  return iter(dataset)


def test_learning_rate_schedule_matches_original():
  schedule = optimization.WarmupLinearDecay(1e-3, 10, 2)
  want = [entry["learning_rate"] for entry in TRAJECTORY["lr_schedule"]]
  assert [entry["global_step"] for entry in TRAJECTORY["lr_schedule"]] == list(range(len(want)))
  got = [float(schedule(k)) for k in range(len(want))]
  np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
  assert got[0] == 0.0 and got[2] == pytest.approx(8e-4) and got[10] == 0.0 and got[12] == 0.0


@pytest.mark.parametrize("kernel_update", [True, False], ids=["adam-kernels", "xla-per-shape"])
def test_five_steps_match_the_original_trajectory(kernel_update):
  """Both single-device updates (TrainStep picks the kernels for this short run of a tiny
  model, XLA per weight shape for long runs of large ones) follow the original's trajectory."""
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  names, optimizer, step = _setup(strategy, kernel_update=kernel_update)
  want_update = step._kernel_update_fn if kernel_update else step._per_shape_update_fn
  assert step._update == want_update
  iterator = _iterator(strategy, tf.data.Dataset.from_tensors(BATCH).repeat())
  for want in TRAJECTORY["steps"]:
    out = step.step(iterator)
    assert float(out["loss"]) == pytest.approx(want["loss_before_step"], abs=1e-5)
    assert float(out["learning_rate"]) == pytest.approx(want["learning_rate_used"], abs=1e-10)
    assert float(out["grad_norm"]) == pytest.approx(want["grad_global_norm_before_clip"], abs=1e-4)
  reference = np.load(OPT / "vars_after_step5.npz")
  assert int(optimizer.iterations) == int(reference["global_step"]) == 5
  checked = 0
  for name, variable in names.items():
    np.testing.assert_allclose(variable.numpy(), reference[name], rtol=0, atol=1e-4, err_msg=name)
    if name + "/adam_m" in reference:
      m, v = optimizer.slot_variables(variable)
      np.testing.assert_allclose(m.numpy(), reference[name + "/adam_m"], rtol=0, atol=1e-4)
      np.testing.assert_allclose(v.numpy(), reference[name + "/adam_v"], rtol=0, atol=1e-4)
      checked += 1
  assert checked == len(names) - 1  # all but word_embeddings, left out of the reference


@pytest.mark.parametrize("kernel_update", [True, False], ids=["adam-kernels", "xla-per-shape"])
def test_a_step_whose_scaled_gradients_overflow_changes_no_weight(kernel_update):
  """float16 training's skipped step: both single-device updates sit in the step's tf.cond;
  the skipped branch leaves weights and slots alone and advances the schedule; the next step
  updates."""
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  # An infinite scale makes every scaled gradient inf or NaN, as float16 overflows do.
  _, optimizer, step = _setup(strategy, kernel_update=kernel_update,
                              initial_loss_scale=float("inf"))
  loss_scale = step.loss_scale
  iterator = iter(tf.data.Dataset.from_tensors(BATCH).repeat())
  before = [v.numpy() for v in step.variables]
  assert not np.isfinite(float(step.step(iterator)["grad_norm"]))
  assert all(np.array_equal(v.numpy(), b) for v, b in zip(step.variables, before))
  assert not any(np.any(s.numpy()) for v in step.variables for s in optimizer.slot_variables(v))
  assert int(optimizer.iterations) == 1
  loss_scale.scale.assign(1.0)
  assert np.isfinite(float(step.step(iterator)["grad_norm"]))
  assert int(optimizer.iterations) == 2
  moved = [np.abs(v.numpy() - b).max() for v, b in zip(step.variables, before)]
  assert min(moved) > 0  # every weight stepped (lr 5e-4: the second step of the warm-up)


def test_weight_decay_exclusions_follow_google_names():
  excluded = optimization.excluded_from_weight_decay
  assert excluded("bert/embeddings/LayerNorm/gamma")
  assert excluded("cls/predictions/output_bias")
  assert excluded("bert/encoder/layer_0/attention/self/query/bias")
  assert not excluded("bert/embeddings/word_embeddings")
  assert not excluded("cls/seq_relationship/output_weights")


@pytest.mark.slow
def test_accumulated_micro_batches_update_like_one_big_batch():
  """Two micro-batches of 2 (with uneven masked-LM weights) == one batch of 4."""
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  big_names, _, big_step = _setup(strategy)
  small_names, _, small_step = _setup(strategy, accumulation_steps=2)
  big = _iterator(strategy, tf.data.Dataset.from_tensors(BATCH).repeat())
  halves = tf.data.Dataset.from_tensor_slices(BATCH).batch(2).repeat()
  small = _iterator(strategy, halves)
  for _ in range(3):
    a, b = big_step.step(big), small_step.step(small)
    assert float(a["loss"]) == pytest.approx(float(b["loss"]), abs=1e-5)
  # Gradients summed in another order differ by float32 rounding, which Adam scales up where a
  # gradient is near its epsilon: the attention key biases (zero gradient but for rounding)
  # move ~1e-6 on rounding alone. Weighting one micro-batch 1.0001 moves weights by 6e-5.
  for name in big_names:
    np.testing.assert_allclose(small_names[name].numpy(), big_names[name].numpy(), rtol=0,
                               atol=1e-5, err_msg=name)


def test_accumulated_micro_batches_trace_the_model_once(monkeypatch):
  """The micro-batches' gradients share one traced function: tracing the model once per
  micro-batch would multiply the first step's wait by --gradient_accumulation_steps."""
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  _, _, step = _setup(strategy, accumulation_steps=3)
  traced = []
  numerators = step.task.loss_numerators
  monkeypatch.setattr(step.task, "loss_numerators",
                      lambda *a, **k: traced.append(1) or numerators(*a, **k))
  thirds = tf.data.Dataset.from_tensor_slices(BATCH).batch(1).repeat()
  step.trace(iter(thirds))
  assert len(traced) == 1


@pytest.mark.parametrize("bias_correction", [False, True])
def test_bias_correction_takes_unit_steps_on_a_constant_gradient(bias_correction):
  """Hand-worked: with a constant gradient g, corrected moments are g and g^2, so every
  update is lr * g / (|g| + eps); the original's uncorrected first update is
  lr * 0.1 g / (sqrt(0.001) |g| + eps), about 3.16 lr."""
  variable = tf.Variable([1.0, -2.0], name="w")
  optimizer = optimization.AdamWeightDecay(0.01, {"layer/bias": variable},
                                           bias_correction=bias_correction)
  gradient = tf.constant([0.5, -0.25])
  moved = []
  for _ in range(3):
    before = variable.numpy().copy()
    optimizer.apply_gradients([(gradient, variable)])
    moved.append(before - variable.numpy())
  g = gradient.numpy()
  if bias_correction:
    want = [0.01 * g / (np.abs(g) + 1e-6)] * 3
  else:
    want = [0.01 * (1 - 0.9 ** t) * g / (np.sqrt(1 - 0.999 ** t) * np.abs(g) + 1e-6)
            for t in (1, 2, 3)]
    assert moved[0][0] == pytest.approx(0.0316, rel=1e-3)
  # a difference of float32 values near 2 is exact to their spacing
  np.testing.assert_allclose(moved, want, rtol=1e-5, atol=2 * np.spacing(np.float32(2)))


def test_bias_correction_is_refused_with_lamb():
  with pytest.raises(Exception, match="adamw"):
    optimization.create_optimizer(1e-3, 10, 1, {}, "lamb", bias_correction=True)


def _updated(values, grads, make_update, num_warmup_steps, **options):
  """{name: (weight, adam_m, adam_v)} after one update per entry of `grads`, from fresh
  variables holding `values`, and the optimizer. make_update(optimizer, weights) returns the
  update of one step's gradients."""
  variables = {n: tf.Variable(v.astype(np.float32), name=n.replace("/", "_"))
               for n, v in values.items()}
  weights = list(variables.values())
  optimizer = optimization.create_optimizer(1e-2, 10, num_warmup_steps, variables, **options)
  optimizer.build(weights)
  update = make_update(optimizer, weights)
  for step_grads in grads:
    update(step_grads)
  assert int(optimizer.iterations) == len(grads)
  return {n: (v.numpy(), *(s.numpy() for s in optimizer.slot_variables(v)))
          for n, v in variables.items()}, optimizer


def _assert_within_ulps(values, want, got, ulps):
  """Each weight and slot of `got` within ulps[name] float32 ulps of the numbers it was
  computed from (the weight before the steps, about 1) of `want`'s, however small it ends up."""
  eps = np.finfo(np.float32).eps
  for name in values:
    scale = np.maximum(np.abs(values[name]), 1.0)
    for want_value, got_value in zip(want[name], got[name]):
      assert np.all(np.abs(got_value - want_value) <= ulps[name] * eps * scale), name


def test_the_kernel_update_equals_the_keras_update():
  """apply_with_kernels (TrainStep's path on one device) and apply (the Keras update, as the
  original writes it) agree to float32 rounding over steps with warm-up, decay and an
  excluded variable; a bias-corrected optimizer has no kernel path."""
  rng = np.random.default_rng(0)
  values = {"layer/kernel": rng.normal(size=(64, 32)), "layer/bias": rng.normal(size=(32,))}
  grads = [[rng.normal(size=v.shape).astype(np.float32) for v in values.values()]
           for _ in range(4)]
  keras_update, _ = _updated(values, grads, lambda o, w: lambda g: o.apply(g, w), 2)
  kernel_update, _ = _updated(values, grads, lambda o, w: lambda g: o.apply_with_kernels(g, w), 2)
  # The kernel orders the arithmetic otherwise. A missing decay term alone would move a weight
  # by 1e-4.
  _assert_within_ulps(values, keras_update, kernel_update, dict.fromkeys(values, 16))
  moved = kernel_update["layer/kernel"][0] - values["layer/kernel"]
  assert np.abs(moved).max() > 1e-3  # the updates are not all zero
  assert optimization.AdamWeightDecay(1e-3, {}).has_kernel_update
  assert not optimization.AdamWeightDecay(1e-3, {}, bias_correction=True).has_kernel_update


def test_the_step_logs_which_update_it_runs(caplog):
  """The update's kind explains part of the first step (XLA compiles in it)."""
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  with caplog.at_level(logging.INFO, logger="absl"):  # absl's own level may be WARNING
    steps = [_setup(strategy)[2],  # the tiny model's 10-step run
             _setup(strategy, kernel_update=False)[2],
             _setup(strategy, optimizer_type="lamb")[2]]  # Keras's LAMB: no per-shape update
  kinds = [step.update_kind for step in steps]
  assert kinds[0].startswith("TensorFlow's Adam kernels")
  assert kinds[1] == "compiled by XLA once per weight shape"
  assert kinds[2] == "compiled whole by XLA"
  for kind in kinds:
    assert ("Optimizer update: " + kind) in caplog.text


@pytest.mark.parametrize("bias_correction", [False, True], ids=["original", "bias-corrected"])
def test_the_per_shape_update_equals_the_whole_update_compiled(bias_correction):
  """apply_per_shape (TrainStep's path on one device for long runs) gives the numbers of
  `apply` compiled whole by XLA. It compiles one program per kind of decaying weight (shape,
  dtype): two here, for three such weights; the weight excluded from decay takes TensorFlow's
  Adam kernel, unless the moments are bias-corrected."""
  rng = np.random.default_rng(1)
  values = {"a/kernel": rng.normal(size=(48, 16)), "b/kernel": rng.normal(size=(48, 16)),
            "a/bias": rng.normal(size=(16,)), "c/kernel": rng.normal(size=(16,))}
  grads = [[rng.normal(size=v.shape).astype(np.float32) for v in values.values()]
           for _ in range(3)]
  whole, _ = _updated(values, grads, lambda o, w: tf.function(
      lambda g: o.apply(g, w), jit_compile=True, autograph=False), 1,
      bias_correction=bias_correction)
  per_shape, optimizer = _updated(values, grads, lambda o, w: tf.function(
      lambda g: o.apply_per_shape(g, w), autograph=False), 1, bias_correction=bias_correction)
  # The compiled weights were equal on the machine this was written on; another CPU's XLA may
  # fuse the two programs otherwise and round a value within a float32 ulp or two. The kernel
  # orders the arithmetic otherwise (a few ulps). A lost decay term would move a weight by 1e-4.
  ulps = dict.fromkeys(values, 2)
  if not bias_correction:
    ulps["a/bias"] = 16
  _assert_within_ulps(values, whole, per_shape, ulps)
  assert np.abs(per_shape["a/kernel"][0] - values["a/kernel"]).max() > 1e-3
  kinds = optimizer._compiled_updates
  assert len(kinds) == (3 if bias_correction else 2)
  assert all(f.experimental_get_tracing_count() == 1 for f in kinds.values())


def test_the_kernel_update_is_for_short_runs_of_small_models():
  """kernel_update_pays, TrainStep's default choice on one device: the kernels up to
  KERNEL_UPDATE_WEIGHT_STEPS weights x steps, XLA beyond, never with bias correction."""
  variables = [tf.Variable(np.zeros((1000, 1000), np.float32), name="w")]  # 1e6 weights
  names = {"layer/kernel": variables[0]}
  steps = int(optimization.KERNEL_UPDATE_WEIGHT_STEPS // 1e6)
  assert optimization.create_optimizer(1e-3, steps, 1, names).kernel_update_pays(variables)
  assert not optimization.create_optimizer(1e-3, steps + 1, 1, names).kernel_update_pays(
      variables)
  assert not optimization.create_optimizer(1e-3, 10, 1, names, bias_correction=True
                                           ).kernel_update_pays(variables)


def _lean_fields_cleared(config):
  """`config` with the four settings lean_grappler_options changes set back to the defaults."""
  config = config_pb2.ConfigProto.FromString(config.SerializeToString())
  rewrite = config.graph_options.rewrite_options
  for name in ("meta_optimizer_iterations", "memory_optimization", "layout_optimizer",
               "disable_tfg_optimizer"):
    rewrite.ClearField(name)
  return config


def test_the_step_runs_with_lean_grappler_options_and_gives_the_same_numbers(monkeypatch):
  """On CPU the step's call skips grappler's passes that cost first-step seconds (one
  meta-optimizer iteration, no memory/layout/TFG passes); the rest of the thread's config
  is kept, the thread's own options are back after the call, and the numbers do not move."""
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  _, _, lean = _setup(strategy)
  _, _, plain = _setup(strategy)
  plain._lean_grappler = False
  seen = []
  denominators = lean.task.loss_denominators
  monkeypatch.setattr(lean.task, "loss_denominators", lambda batch: seen.append(
      context.context().function_call_options.config_proto_serialized) or denominators(batch))
  before = context.context().function_call_options.config_proto_serialized
  dataset = tf.data.Dataset.from_tensors(BATCH).repeat()
  lean_it, plain_it = _iterator(strategy, dataset), _iterator(strategy, dataset)
  losses = [(float(lean.step(lean_it)["loss"]), float(plain.step(plain_it)["loss"]))
            for _ in range(3)]
  assert context.context().function_call_options.config_proto_serialized == before
  assert len(seen) == 1  # traced once, inside the lean call
  config = config_pb2.ConfigProto.FromString(seen[0])
  rewrite = config.graph_options.rewrite_options
  assert rewrite.meta_optimizer_iterations == rewrite.ONE
  assert rewrite.memory_optimization == rewrite.NO_MEM_OPT
  assert rewrite.layout_optimizer == rewrite.OFF and rewrite.disable_tfg_optimizer
  assert rewrite.remapping != rewrite.OFF and rewrite.arithmetic_optimization != rewrite.OFF
  assert _lean_fields_cleared(config) == _lean_fields_cleared(
      config_pb2.ConfigProto.FromString(before))
  np.testing.assert_allclose([a for a, _ in losses], [b for _, b in losses], rtol=1e-6)
  assert losses[0][0] != losses[2][0]  # the weights moved


def test_the_lean_options_follow_the_threads_options_at_every_call(monkeypatch):
  """Built at each call from the thread's options: what a user changes between steps (here an
  executor type) reaches the step, with the lean settings on top."""
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  _, _, step = _setup(strategy)
  used = []
  real = training.trainer._function_call_options
  monkeypatch.setattr(training.trainer, "_function_call_options",
                      lambda options: used.append(options) or real(options))
  iterator = _iterator(strategy, tf.data.Dataset.from_tensors(BATCH).repeat())
  step.step(iterator)
  with context.function_executor_type("SINGLE_THREADED_EXECUTOR"):
    step.step(iterator)
  step.step(iterator)
  assert [o.executor_type or "" for o in used] == ["", "SINGLE_THREADED_EXECUTOR", ""]
  for options in used:
    rewrite = config_pb2.ConfigProto.FromString(options.config_proto_serialized) \
        .graph_options.rewrite_options
    assert rewrite.meta_optimizer_iterations == rewrite.ONE


def test_lean_grappler_options_start_from_any_config_and_stay_off_accelerators():
  """An empty config is TensorFlow's defaults: the lean settings apply to it too, and the
  executor type is kept. Strategies with a GPU or TPU device keep the default passes (the
  layout and memory passes are theirs)."""
  lean = training.trainer.lean_grappler_options(
      context.FunctionCallOptions(executor_type="SINGLE_THREADED_EXECUTOR", config_proto=None))
  rewrite = config_pb2.ConfigProto.FromString(lean.config_proto_serialized).graph_options \
      .rewrite_options
  assert rewrite.meta_optimizer_iterations == rewrite.ONE and rewrite.disable_tfg_optimizer
  assert lean.executor_type == "SINGLE_THREADED_EXECUTOR"

  class Extended:
    worker_devices = ("/job:localhost/replica:0/task:0/device:GPU:0",)

  class Strategy:
    extended = Extended()
  assert not training.trainer._on_cpus(Strategy())
  Extended.worker_devices = ("/job:worker/replica:0/task:1/device:CPU:0",)
  assert training.trainer._on_cpus(Strategy())


@pytest.mark.parametrize("case", ["clipped", "under_the_norm", "infinite", "nan"])
def test_clip_by_global_norm_is_tensorflows_without_the_identities(case):
  """The step's clipping gives tf.clip_by_global_norm's numbers bitwise: scaled down above
  the norm, untouched under it, all NaN when a gradient is not finite."""
  rng = np.random.default_rng(5)
  grads = [tf.constant(rng.normal(size=shape).astype("float32")) for shape in [(3, 4), (5,)]]
  if case == "under_the_norm":
    grads = [g * 1e-3 for g in grads]
  elif case in ("infinite", "nan"):
    grads[1] = tf.tensor_scatter_nd_update(grads[1], [[2]], [np.inf if case == "infinite"
                                                             else np.nan])

  @tf.function
  def both(grads):
    return training.trainer.clip_by_global_norm(grads, 1.0), tf.clip_by_global_norm(grads, 1.0)

  (ours, our_norm), (theirs, their_norm) = both(grads)
  np.testing.assert_array_equal(our_norm.numpy(), their_norm.numpy())
  for a, b in zip(ours, theirs):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  if case == "clipped":
    assert float(their_norm) > 1 and float(tf.linalg.global_norm(ours)) == pytest.approx(1.0)
  elif case == "under_the_norm":
    np.testing.assert_array_equal(ours[0].numpy(), grads[0].numpy())
  else:
    assert all(np.isnan(g.numpy()).all() for g in ours)
