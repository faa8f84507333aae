"""run_pretraining: eval metrics, resume after SIGKILL, mirrored, half precision, XLA and LAMB
against one float32 run, bad input."""

from functools import partial
import json
import logging as std_logging
import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import optimization, training
from bert_tf.config import BertConfig
from bert_tf.data import input_pipeline
from bert_tf.errors import UserInputError
from bert_tf.tasks.pretraining import PretrainingTask
from helpers import FIXTURES, FLOAT32_EPS, TINY, VOCAB_UNCASED, assert_float32_close, run_script

NODROPOUT_CONFIG = str(FIXTURES / "optimizer" / "bert_config_nodropout.json")
FORWARD = FIXTURES / "model_forward"


@pytest.fixture(scope="module")
def seq64_data(tmp_path_factory):
  """Two TFRecord files of seq-64 pretraining data made from the reference corpus."""
  folder = tmp_path_factory.mktemp("data")
  files = [str(folder / "a.tfrecord"), str(folder / "b.tfrecord")]
  result = run_script("create_pretraining_data.py",
                      "--input_file=%s" % (FIXTURES / "pretraining_data" / "corpus.txt"),
                      "--output_file=%s" % ",".join(files), "--vocab_file=%s" % VOCAB_UNCASED,
                      "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=1")
  assert result.returncode == 0, result.stderr
  return ",".join(files)


def _pretrain_args(data, output_dir, *extra):
  return ["--input_file=%s" % data, "--output_dir=%s" % output_dir,
          "--bert_config_file=%s" % NODROPOUT_CONFIG, "--init_checkpoint=%s" % TINY.ckpt,
          "--max_seq_length=64", "--max_predictions_per_seq=10", "--learning_rate=1e-3",
          "--num_warmup_steps=2", "--iterations_per_loop=1", *extra]


# The runs compared with the float32 run below.
_THREE_STEPS = ("--do_train", "--train_batch_size=8", "--num_train_steps=3",
                "--save_checkpoints_steps=3")
# Two losses logged with 6 decimals differ by up to this from their values.
_PRINTED = 1e-6


def _logged_losses(stderr):
  return [float(l.rsplit("loss ", 1)[1].split(",")[0]) for l in stderr.splitlines()
          if "] step " in l]


@pytest.fixture(scope="module")
def three_step_runs(seq64_data, tmp_path_factory, script_session):
  """The float32 run of _THREE_STEPS ("") and the same run with each flag compared with it
  (gradient accumulation, half precision, XLA, LAMB), one after another in the module's
  run_pretraining process: flag -> (output dir, result). Mirrored splits the CPU before
  TensorFlow starts, so it runs in a process of its own."""
  folder = tmp_path_factory.mktemp("three_steps")
  flags = ["", "--gradient_accumulation_steps=2", *_FLAG_TOLERANCE]
  outs = [folder / ("run_%d" % index) for index in range(len(flags))]
  run_pretraining = partial(run_script, "run_pretraining.py", shared=script_session)
  results = [run_pretraining(*_pretrain_args(seq64_data, out, *_THREE_STEPS,
                                             *([flag] if flag else [])))
             for flag, out in zip(flags, outs)]
  return {flag: (out, result) for flag, out, result in zip(flags, outs, results)}


@pytest.fixture(scope="module")
def float32_run(three_step_runs):
  """One float32 run of _THREE_STEPS, the reference of the mirrored, gradient accumulation,
  half-precision, XLA and LAMB runs (one training shared by all of them)."""
  out, result = three_step_runs[""]
  assert result.returncode == 0, result.stderr[-3000:]
  losses = _logged_losses(result.stderr)
  assert len(losses) == 3
  return out, losses


def _weights(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def _assert_same_weights(a, b, atol):
  wa, wb = _weights(a), _weights(b)
  assert sorted(wa) == sorted(wb)
  for name in wa:
    np.testing.assert_allclose(wa[name], wb[name], rtol=0, atol=atol, err_msg=name)


def test_eval_metrics_match_the_original_metric_fn(tmp_path):
  meta = json.loads((FORWARD / "pretrain_heads_forward.json").read_text())["eval_model_fn_set_A"]
  ref = np.load(FORWARD / "pretrain_heads_forward.npz")
  features = {
      "input_word_ids": ref["A.in.input_ids"], "input_mask": ref["A.in.input_mask"],
      "input_type_ids": ref["A.in.segment_ids"],
      "masked_lm_positions": ref["A.in.masked_lm_positions"],
      "masked_lm_ids": ref["A.in.masked_lm_ids"],
      "masked_lm_weights": ref["A.in.masked_lm_weights"],
      "next_sentence_labels": ref["A.in.next_sentence_labels"][:, None]}
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  task = PretrainingTask(BertConfig.from_json_file(TINY.config))
  trainer = training.Trainer(strategy, task, str(tmp_path),
                             lambda names: optimization.create_optimizer(1e-3, 10, 1, names),
                             init_checkpoint=TINY.ckpt)
  trainer.restore_or_initialize()
  traced = []  # eval_batch runs in Python only while the evaluation step is traced
  eval_batch = task.eval_batch
  task.eval_batch = lambda model, batch: (traced.append(1), eval_batch(model, batch))[1]
  for _ in range(2):  # as --eval_every_steps evaluates: the same step, traced once
    result = trainer.evaluate(tf.data.Dataset.from_tensors(features))
    for key, want in meta["metrics"].items():
      assert result[key] == pytest.approx(want, abs=1e-4), key
    assert result["loss"] == pytest.approx(meta["total_loss"], abs=1e-4)
    assert result["global_step"] == 0
  assert len(traced) == 1


@pytest.mark.slow
def test_train_eval_and_google_layout_outputs(seq64_data, tmp_path, script_session):
  run_pretraining = partial(run_script, "run_pretraining.py", shared=script_session)
  out = tmp_path / "run"
  result = run_pretraining(*_pretrain_args(
      seq64_data, out, "--do_train", "--do_eval", "--train_batch_size=8", "--num_train_steps=4",
      "--save_checkpoints_steps=2", "--max_eval_steps=3", "--eval_batch_size=4"))
  assert result.returncode == 0, result.stderr
  assert "train: 4/4 steps" in result.stderr
  lines = (out / "eval_results.txt").read_text().splitlines()
  assert [l.split(" = ")[0] for l in lines] == ["global_step", "loss", "masked_lm_accuracy",
                                                "masked_lm_loss", "next_sentence_accuracy",
                                                "next_sentence_loss"]
  assert lines[0] == "global_step = 4"
  assert tf.train.latest_checkpoint(str(out)).endswith("model.ckpt-4")
  exported = _weights(str(out / "model.ckpt-4"))
  assert exported["global_step"] == 4
  assert "bert/encoder/layer_1/output/dense/kernel/adam_m" in exported
  assert len([n for n in exported if not n.endswith(("adam_m", "adam_v"))]) == 46 + 1
  assert list(out.glob("events.out.tfevents.*"))
  # A finished run given the same command again does nothing and changes nothing.
  again = run_pretraining(*_pretrain_args(
      seq64_data, out, "--do_train", "--train_batch_size=8", "--num_train_steps=4",
      "--save_checkpoints_steps=2"))
  assert again.returncode == 0 and "nothing to do" in again.stderr


@pytest.mark.slow
def test_sigkill_and_restart_ends_with_the_same_weights(seq64_data, tmp_path, script_session):
  # Dropout on (the tiny config's 0.1): the masks after the restart must be the ones an
  # uninterrupted run draws, so the seed states are part of the training state.
  # 30 steps: the kill lands at step 4, with 26 steps to spare on a loaded machine (the tiny
  # model's steps take milliseconds).
  args = ["--do_train", "--train_batch_size=4", "--num_train_steps=30",
          "--save_checkpoints_steps=2",
          "--bert_config_file=%s" % TINY.config]
  # This run and the restart below: the module's process of the script; the killed run has
  # its own.
  session = partial(run_script, "run_pretraining.py", shared=script_session)
  straight = tmp_path / "straight"
  assert session(*_pretrain_args(seq64_data, straight, *args)).returncode == 0

  killed = tmp_path / "killed"
  command = _pretrain_args(seq64_data, killed, *args)
  process = run_script("run_pretraining.py", *command, wait=False, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
  deadline = time.monotonic() + 240
  while not list((killed / "training_state").glob("ckpt-4.index")) if killed.exists() else True:
    assert time.monotonic() < deadline and process.poll() is None, "no checkpoint appeared"
    time.sleep(0.05)
  process.send_signal(signal.SIGKILL)
  process.wait()
  assert not (killed / "model.ckpt-30.index").exists()
  resumed = session(*command)
  assert resumed.returncode == 0, resumed.stderr
  assert "Resumed from" in resumed.stderr
  _assert_same_weights(str(straight / "model.ckpt-30"), str(killed / "model.ckpt-30"), atol=1e-6)


@pytest.mark.slow
def test_mirrored_on_two_cpus_equals_one_device(seq64_data, float32_run, tmp_path):
  two = tmp_path / "two"
  r2 = run_script("run_pretraining.py", *_pretrain_args(
      seq64_data, two, *_THREE_STEPS, "--distribution_strategy=mirrored", "--cpu_devices=2"))
  assert r2.returncode == 0, r2.stderr
  assert "mirrored with 2 replica(s)" in r2.stderr
  _assert_same_weights(str(float32_run[0] / "model.ckpt-3"), str(two / "model.ckpt-3"),
                       atol=2e-6)


@pytest.mark.slow
def test_gradient_accumulation_flag_equals_the_full_batch(three_step_runs, float32_run):
  # The full batch of 8 in one step (the float32 run) against two accumulated halves of 4.
  accumulated, result = three_step_runs["--gradient_accumulation_steps=2"]
  assert result.returncode == 0, result.stderr
  _assert_same_weights(str(float32_run[0] / "model.ckpt-3"), str(accumulated / "model.ckpt-3"),
                       atol=2e-6)


def _free_ports(count):
  import socket
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def _launch_two_workers(data, out, *args):
  """Two local multi_worker_mirrored workers of run_pretraining.py (output on stdout)."""
  cluster = {"worker": ["127.0.0.1:%d" % p for p in _free_ports(2)]}
  processes = []
  for index in range(2):
    env = {"TF_CONFIG": json.dumps({"cluster": cluster,
                                    "task": {"type": "worker", "index": index}})}
    processes.append(run_script(
        "run_pretraining.py", *_pretrain_args(data, out, "--do_train", "--train_batch_size=8",
                                              "--distribution_strategy=multi_worker_mirrored",
                                              *args),
        env=env, wait=False, stderr=subprocess.STDOUT))
  return processes


def _finish(processes, stop_at_step=None):
  """Waits for the workers (SIGTERM to worker 0 once it logs `stop_at_step`); codes, outputs."""
  seen = ""
  if stop_at_step is not None:
    for line in processes[0].stdout:
      seen += line
      if re.search(r"\] step %d: loss" % stop_at_step, line):
        processes[0].send_signal(signal.SIGTERM)
        break
  try:
    outputs = [p.communicate(timeout=240)[0] for p in processes]
  finally:
    for p in processes:
      if p.poll() is None:
        p.kill()
  return [p.returncode for p in processes], [seen + outputs[0], outputs[1]]


# The two workers' run of the SIGTERM test below (dropout on): SIGTERM after step 3 stops both
# at step 4 (they agree on it at the next step); the regular saves are at 10 and 16.
_TWO_WORKER_ARGS = ("--num_train_steps=16", "--save_checkpoints_steps=10",
                    "--bert_config_file=%s" % TINY.config)


@pytest.fixture(scope="module")
def two_workers_straight(seq64_data, tmp_path_factory):
  """One uninterrupted run of two local workers: the run the multi-worker test checks and the
  weights the SIGTERM test's resumed run must end with. (output dir, exit codes, outputs)"""
  out = tmp_path_factory.mktemp("two_workers") / "straight"
  codes, outputs = _finish(_launch_two_workers(seq64_data, out, *_TWO_WORKER_ARGS))
  return out, codes, outputs


@pytest.mark.slow
def test_multi_worker_mirrored_runs_with_two_local_workers(two_workers_straight):
  out, codes, outputs = two_workers_straight
  assert codes == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
  assert "multi_worker_mirrored with 2 replica(s)" in outputs[0]
  assert _weights(str(out / "model.ckpt-16"))["global_step"] == 16


def test_a_record_file_cut_short_is_found_up_front_with_its_byte_offset(tmp_path):
  records = [b"r" * n for n in (5, 300, 17, 0, 64)]
  path = tmp_path / "whole.tfrecord"
  with tf.io.TFRecordWriter(str(path)) as writer:
    for record in records:
      writer.write(record)
  data = path.read_bytes()
  # TFRecord framing: 8-byte length, 4-byte length CRC, the record, 4-byte record CRC.
  starts = np.cumsum([0] + [16 + len(r) for r in records])
  assert starts[-1] == len(data)
  assert input_pipeline.check_complete([str(path)]) == [5]
  for cut in (1, 4, 20, 70, 79):  # inside the last record's data, CRC or header
    short = tmp_path / "short.tfrecord"
    short.write_bytes(data[:len(data) - cut])
    with pytest.raises(UserInputError, match=r"short.tfrecord is cut short: record 4 at byte "
                       r"offset %d .*ends at byte %d" % (starts[4], len(data) - cut)):
      input_pipeline.check_complete([str(short)])
  short.write_bytes(data[:starts[3] + 5])  # the cut lands inside a header
  with pytest.raises(UserInputError, match="record 3 at byte offset %d has an incomplete header"
                     % starts[3]):
    input_pipeline.record_dataset([str(path), str(short)], {}, 2, is_training=False)
  flipped = bytearray(data)
  flipped[starts[2] + 1] ^= 0x40  # a length header that no longer matches its CRC
  short.write_bytes(bytes(flipped))
  with pytest.raises(UserInputError, match="length header of record 2 at byte offset %d fails"
                     % starts[2]):
    input_pipeline.check_complete([str(short)])


@pytest.mark.slow
def test_bad_inputs_are_clear_errors_and_overwrite_nothing(seq64_data, tmp_path, script_session):
  run_pretraining = partial(run_script, "run_pretraining.py", shared=script_session)
  out = tmp_path / "bad"
  base = ["--do_train", "--train_batch_size=4", "--num_train_steps=2"]
  result = run_pretraining(*_pretrain_args(str(tmp_path / "none*.tfrecord"), out, *base))
  assert result.returncode == 2 and "No file matches --input_file" in result.stderr

  empty = tmp_path / "empty.tfrecord"
  empty.write_bytes(b"")
  result = run_pretraining(*_pretrain_args(str(empty), out, *base))
  assert result.returncode == 2 and "empty.tfrecord has no records" in result.stderr

  first = seq64_data.split(",")[0]
  args = _pretrain_args(first, out, *base)
  args = [a for a in args if not a.startswith("--max_seq_length")] + ["--max_seq_length=32"]
  result = run_pretraining(*args)
  assert result.returncode == 2
  assert "feature input_ids has length 64, expected 32" in result.stderr

  cut = tmp_path / "cut.tfrecord"
  cut.write_bytes(open(first, "rb").read()[:-100])  # an interrupted copy
  result = run_pretraining(*_pretrain_args(str(cut), out, *base))
  assert result.returncode == 2 and "cut.tfrecord is cut short: record" in result.stderr
  assert "Traceback" not in result.stderr

  corrupt = tmp_path / "corrupt.tfrecord"
  data = bytearray(open(first, "rb").read())
  data[30:60] = b"\xff" * 30
  corrupt.write_bytes(bytes(data))
  result = run_pretraining(*_pretrain_args(str(corrupt), out, *base))
  assert result.returncode == 2 and "corrupt.tfrecord" in result.stderr

  wide = tmp_path / "wide_config.json"
  config = json.loads(open(NODROPOUT_CONFIG).read())
  config["hidden_size"] = 64
  wide.write_text(json.dumps(config))
  args = [a for a in _pretrain_args(first, out, *base) if not a.startswith("--bert_config_file")]
  result = run_pretraining(*args, "--bert_config_file=%s" % wide)
  assert result.returncode == 2 and "does not match the model" in result.stderr
  assert "shape mismatch" in result.stderr and "Traceback" not in result.stderr
  assert not list(out.glob("model.ckpt-*")) and not (out / "training_state").exists()


@pytest.mark.slow
def test_a_failed_save_leaves_the_last_good_checkpoint_readable(tmp_path, monkeypatch, caplog):
  from bert_tf import checkpoints
  out = str(tmp_path / "run")
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  task = PretrainingTask(BertConfig.from_json_file(NODROPOUT_CONFIG))
  trainer = training.Trainer(strategy, task, out,
                             lambda names: optimization.create_optimizer(1e-3, 10, 1, names),
                             init_checkpoint=TINY.ckpt)
  batch = input_pipeline.to_model_names(dict(np.load(FIXTURES / "optimizer" / "batch.npz")))
  dataset = tf.data.Dataset.from_tensors(batch).repeat()
  caplog.set_level(std_logging.INFO, logger="absl")
  trainer.train(dataset, num_train_steps=2, save_checkpoints_steps=2)
  # The pause after training (its state freed) is announced, not silent.
  assert "Training done at step 2 (saved); freeing the training state" in caplog.text
  good = _weights(os.path.join(out, "model.ckpt-2"))

  real_save = checkpoints.save_checkpoint

  def crash_midway(prefix, *args, **kwargs):
    real_save(str(prefix) + ".tmp-crashed", *args, **kwargs)  # files half-way in place...
    raise OSError("disk full")  # ...and the process dies before renaming them

  monkeypatch.setattr(checkpoints, "save_checkpoint", crash_midway)
  with pytest.raises(UserInputError, match=r"Saving the checkpoint of step 4 in .* failed: disk "
                     r"full. The run will resume from .*ckpt-4; free space"):
    trainer.train(dataset, num_train_steps=4, save_checkpoints_steps=2)
  assert not tf.io.gfile.glob(os.path.join(out, "model.ckpt-4*"))  # the partial files removed
  assert tf.train.latest_checkpoint(out).endswith("model.ckpt-2")
  after = _weights(os.path.join(out, "model.ckpt-2"))
  assert all(np.array_equal(good[k], after[k]) for k in good)
  assert tf.train.latest_checkpoint(os.path.join(out, "training_state")).endswith("ckpt-4")


# How far a flag's logged loss may be from the float32 run's, as a fraction of the loss. Half
# precision rounds every activation to its type, and the loss, an average of many rounded terms,
# stays within one epsilon of the type (float16 2**-10, bfloat16 2**-7). XLA computes in float32
# with other fusions and sum orders: 16 float32 ulps. LAMB runs the same float32 kernels.
_FLAG_TOLERANCE = {"--mixed_precision=float16": 2.0**-10, "--mixed_precision=bfloat16": 2.0**-7,
                   "--jit_compile": 16 * FLOAT32_EPS, "--optimizer=lamb": 4 * FLOAT32_EPS}


@pytest.mark.parametrize("flag", list(_FLAG_TOLERANCE))
@pytest.mark.slow
def test_precision_xla_and_lamb_runs_match_the_float32_run(three_step_runs, float32_run, flag):
  out, result = three_step_runs[flag]
  assert result.returncode == 0, result.stderr[-3000:]
  losses, reference = _logged_losses(result.stderr), float32_run[1]
  assert len(losses) == 3
  differences = [abs(a - b) for a, b in zip(losses, reference)]
  bounds = [_FLAG_TOLERANCE[flag] * abs(r) + _PRINTED for r in reference]
  float32_bounds = [16 * FLOAT32_EPS * abs(r) + _PRINTED for r in reference]
  # The learning rate of step 1 is 0 (warmup), so steps 1 and 2 see the initial weights; step 3
  # sees one update, which LAMB makes otherwise.
  compared = 2 if flag == "--optimizer=lamb" else 3
  assert all(d <= b for d, b in zip(differences[:compared], bounds)), (losses, reference)
  if flag == "--optimizer=lamb":
    assert differences[2] > float32_bounds[2], (losses, reference)
  if flag.startswith("--mixed_precision"):  # it did compute in half precision
    assert max(d - b for d, b in zip(differences, float32_bounds)) > 0, (losses, reference)
  weights = _weights(str(out / "model.ckpt-3"))
  assert weights["bert/embeddings/word_embeddings"].dtype == np.float32


def _lamb_by_hand(weights, gradients, learning_rates, decayed, weight_decay=0.01, beta_1=0.9,
                  beta_2=0.999, epsilon=1e-6):
  """LAMB in float64 as create_optimizer promises it (Keras' Lamb): first the decoupled decay
  w -= lr * weight_decay * w of the decayed variables, then Adam's bias-corrected step scaled
  per variable by the trust ratio ||w|| / ||step|| (1 if either norm is 0). The bias corrections
  take powers of the betas as float32 holds them: float32(0.999) moves 1 - beta_2 by 1.3e-5 of
  itself, far more than float32 rounding of the result."""
  powers_of = (float(np.float32(beta_1)), float(np.float32(beta_2)))
  w = [np.array(x, np.float64) for x in weights]
  m = [np.zeros_like(x) for x in w]
  v = [np.zeros_like(x) for x in w]
  for t, (lr, grads) in enumerate(zip(learning_rates, gradients), start=1):
    for i, g in enumerate(grads):
      if decayed[i]:
        w[i] -= lr * weight_decay * w[i]
      m[i] = beta_1 * m[i] + (1 - beta_1) * g
      v[i] = beta_2 * v[i] + (1 - beta_2) * g * g
      m_hat, v_hat = m[i] / (1 - powers_of[0]**t), v[i] / (1 - powers_of[1]**t)
      step = m_hat / (np.sqrt(v_hat) + epsilon)
      w_norm, step_norm = np.linalg.norm(w[i]), np.linalg.norm(step)
      ratio = w_norm / step_norm if w_norm > 0 and step_norm > 0 else 1.0
      w[i] -= ratio * lr * step
  return w


def test_lamb_steps_equal_lamb_by_hand():
  import keras
  rng = np.random.default_rng(3)
  initial = [rng.normal(size=(3, 2)), 1 + 0.1 * rng.normal(size=2), np.zeros(2)]
  names = ["bert/encoder/layer_0/output/dense/kernel",  # decayed
           "bert/encoder/layer_0/output/LayerNorm/gamma",  # excluded, like the bias
           "bert/encoder/layer_0/output/dense/bias"]  # zero: trust ratio 1
  variables = [keras.Variable(x.astype(np.float32), name=n.replace("/", "_"))
               for x, n in zip(initial, names)]
  optimizer = optimization.create_optimizer(0.1, 4, 0, dict(zip(names, variables)),
                                            optimizer_type="lamb")
  gradients = [[rng.normal(size=x.shape).astype(np.float32) for x in initial] for _ in range(3)]
  for grads in gradients:
    optimizer.apply(grads, variables)
  # No warmup, linear decay to 0 at step 4: 0.1 * (1 - k / 4).
  want = _lamb_by_hand(initial, gradients, [0.1, 0.075, 0.05], decayed=[True, False, False])
  for variable, expected, before, name in zip(variables, want, initial, names):
    assert not np.allclose(expected, before, rtol=0, atol=1e-3), name  # the steps moved it
    assert_float32_close(variable.numpy(), expected, err_msg=name)


@pytest.mark.slow
def test_multi_worker_sigterm_saves_on_every_worker_and_resumes_exactly(
    seq64_data, two_workers_straight, tmp_path):
  """TensorFlow's PreemptionCheckpointHandler: SIGTERM on one worker, every worker saves at the
  same step and exits 143; the same command resumes both to the uninterrupted weights."""
  args = _TWO_WORKER_ARGS
  straight, codes, outputs = two_workers_straight
  assert codes == [0, 0], outputs[0][-3000:]
  stopped = tmp_path / "stopped"
  codes, outputs = _finish(_launch_two_workers(seq64_data, stopped, *args), stop_at_step=3)
  assert codes == [143, 143], outputs[0][-3000:] + outputs[1][-3000:]
  steps = [int(re.search(r"stopped: preempted by SIGTERM after step (\d+)", o).group(1))
           for o in outputs]
  assert steps[0] == steps[1] and steps[0] < 16
  codes, outputs = _finish(_launch_two_workers(seq64_data, stopped, *args))
  assert codes == [0, 0], outputs[0][-3000:]
  assert all("Resumed from" in o and "at step %d" % steps[0] in o for o in outputs)
  _assert_same_weights(str(straight / "model.ckpt-16"), str(stopped / "model.ckpt-16"),
                       atol=1e-6)
