"""--eval_every_steps: the best checkpoint, its record, pruning, early stopping and resume
(bert_tf/checkpoint_keeper.BestCheckpoint, Trainer.train, the runner's use of the best)."""

from functools import partial
import json
import logging as std_logging

import numpy as np
import pytest

from bert_tf.errors import UserInputError
from bert_tf.runner.shared_flags import RunOptions
from bert_tf.training import checkpoint_keeper
from bert_tf.training.checkpoint_keeper import BestCheckpoint, CheckpointKeeper
from helpers import TINY, VOCAB_UNCASED, run_script


def _saved(folder, *steps):
  """Stand-in model.ckpt-N files (what BestCheckpoint and the pruning look for)."""
  for step in steps:
    for suffix in (".index", ".data-00000-of-00001"):
      (folder / ("model.ckpt-%d%s" % (step, suffix))).write_text("x")


def _best(folder, metric, values, patience=0):
  """A BestCheckpoint that evaluated steps 2, 4, ... with these `metric` values."""
  best = BestCheckpoint(str(folder), metric, every_steps=2, patience=patience)
  for index, value in enumerate(values):
    step = 2 * (index + 1)
    _saved(folder, step)
    best.add(step, {metric: value, "eval_other": 1.0, "global_step": step})
  return best


def _steps(folder):
  return sorted(int(p.name.split("-")[1].split(".")[0]) for p in folder.glob("model.ckpt-*.index"))


def test_the_direction_rule_minimises_loss_and_mse_only():
  assert checkpoint_keeper.lower_is_better("eval_loss")
  assert checkpoint_keeper.lower_is_better("eval_mse")
  assert not any(map(checkpoint_keeper.lower_is_better,
                     ("eval_accuracy", "eval_micro_f1", "eval_pearson", "eval_mcc")))


def test_the_best_is_the_first_of_equals_and_patience_counts_the_evaluations_after_it(tmp_path):
  best = _best(tmp_path, "eval_accuracy", [0.5, 0.75, 0.75, 0.6], patience=3)
  assert best.best()["step"] == 4  # step 6 only equals it
  assert best.without_improvement() == 2 and not best.should_stop()
  assert best.add(10, {"eval_accuracy": 0.7}) is False
  assert best.should_stop()
  assert best.add(12, {"eval_accuracy": 0.8}) is True  # _saved not needed: checked at best()
  _saved(tmp_path, 12)
  assert best.best()["step"] == 12 and best.without_improvement() == 0


def test_a_loss_is_minimised_and_a_nan_or_pruned_checkpoint_is_never_the_best(tmp_path):
  best = _best(tmp_path, "eval_loss", [0.9, 0.4, float("nan"), 0.6])
  assert best.best()["step"] == 4
  (tmp_path / "model.ckpt-4.index").unlink()  # gone: the best of what is left
  assert best.best()["step"] == 8


def test_a_nan_is_recorded_as_null_so_the_record_is_json_and_reads_back_unranked(tmp_path):
  _best(tmp_path, "eval_pearson", [float("nan"), 0.5, float("inf")])
  text = (tmp_path / BestCheckpoint.NAME).read_text()
  assert "NaN" not in text and "Infinity" not in text
  assert [e["eval_pearson"] for e in json.loads(text)["evaluations"]] == [None, 0.5, None]
  assert BestCheckpoint.recorded(str(tmp_path), 6).best()["step"] == 4


def test_the_record_is_written_whole_and_read_back_by_a_resumed_run(tmp_path):
  _best(tmp_path, "eval_loss", [0.9, 0.4, 0.6, 0.7], patience=2).stop(8)
  record = json.loads((tmp_path / BestCheckpoint.NAME).read_text())
  assert (record["best_step"], record["best_value"], record["stopped_early"]) == (4, 0.4, 8)
  assert [e["step"] for e in record["evaluations"]] == [2, 4, 6, 8]
  assert "global_step" not in record["evaluations"][0]
  assert not list(tmp_path.glob("*.tmp"))
  resumed = BestCheckpoint(str(tmp_path), "eval_loss", every_steps=2, patience=2)
  resumed.load(8)
  assert resumed.best()["step"] == 4 and resumed.should_stop() and resumed.stopped_early == 8
  # A larger patience on the re-run continues.
  more = BestCheckpoint(str(tmp_path), "eval_loss", every_steps=2, patience=3)
  more.load(8)
  assert not more.should_stop()


def test_a_resume_from_an_older_state_drops_later_evaluations(tmp_path, caplog):
  _best(tmp_path, "eval_loss", [0.9, 0.4, 0.6, 0.7])
  resumed = BestCheckpoint(str(tmp_path), "eval_loss", every_steps=2)
  with caplog.at_level(std_logging.WARNING):
    resumed.load(4)
  assert [e["step"] for e in resumed.evaluations] == [2, 4]
  assert "dropped the evaluations after step 4" in caplog.text


def test_another_best_metric_on_resume_is_logged_and_reranks_what_is_kept(tmp_path, caplog):
  best = _best(tmp_path, "eval_loss", [0.9, 0.4, 0.6])
  for evaluation, other in zip(best.evaluations, (0.3, 0.5, 0.9)):
    evaluation["eval_other"] = other
  best.write()
  (tmp_path / "model.ckpt-6.index").unlink()  # pruned under eval_loss
  resumed = BestCheckpoint(str(tmp_path), "eval_other", every_steps=3)
  with caplog.at_level(std_logging.INFO, logger="absl"):
    resumed.load(6)
  assert resumed.best()["step"] == 4  # step 6 ranks first, but its checkpoint is gone
  assert "--best_metric=eval_other (the record" in caplog.text
  assert "--eval_every_steps=3 (the record" in caplog.text
  assert BestCheckpoint.recorded(str(tmp_path), 6).best()["step"] == 4  # its own metric


def test_a_metric_the_evaluation_lacks_is_one_line_naming_those_it_has(tmp_path):
  best = BestCheckpoint(str(tmp_path), "eval_f1", every_steps=2)
  with pytest.raises(UserInputError, match=r"^--best_metric=eval_f1 is not among this run's "
                     r"metrics \(eval_accuracy, eval_loss\); pass one of them\. The checkpoint "
                     r"of step 2 is kept"):
    best.add(2, {"eval_accuracy": 1.0, "eval_loss": 0.1, "global_step": 2})


def test_pruning_keeps_the_last_n_and_the_best_and_lists_them_newest_last(tmp_path):
  import tensorflow as tf
  keeper = CheckpointKeeper(str(tmp_path), tf.train.Checkpoint(), None, max_to_keep=2)
  _saved(tmp_path, 2, 4, 6, 8, 10)
  keeper.protected_steps = lambda: {4}
  keeper.prune()
  assert _steps(tmp_path) == [4, 8, 10]
  assert not list(tmp_path.glob("model.ckpt-6.*"))
  assert tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths[:] == [
      str(tmp_path / n) for n in ("model.ckpt-4", "model.ckpt-8", "model.ckpt-10")]
  assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model.ckpt-10")
  keeper.protected_steps = frozenset  # no best: the last two only
  keeper.prune()
  assert _steps(tmp_path) == [8, 10]


@pytest.mark.parametrize("edit,reason", [
    (lambda r: r["evaluations"].append(7), "an evaluation without a whole-number step: 7"),
    (lambda r: r["evaluations"][0].pop("step"), "an evaluation without a whole-number step"),
    (lambda r: r["evaluations"][0].update(step="2"), "an evaluation without a whole-number step"),
    (lambda r: r["evaluations"][1].update(eval_loss="0.4"), "step 4's eval_loss is not a number"),
    (lambda r: r["evaluations"][1].update(eval_loss=[0.4]), "step 4's eval_loss is not a number"),
    (lambda r: r.update(stopped_early="8"), "its stopped_early is not a step"),
    (lambda r: r.update(metric=["eval_loss"]), "its metric is not a name"),
])
def test_a_hand_edited_record_is_one_line_saying_what_is_wrong(tmp_path, edit, reason):
  _best(tmp_path, "eval_loss", [0.9, 0.4])
  path = tmp_path / BestCheckpoint.NAME
  record = json.loads(path.read_text())
  edit(record)
  path.write_text(json.dumps(record))
  with pytest.raises(UserInputError, match=r"^Cannot read .*best_checkpoint\.json \(%s" % reason):
    BestCheckpoint.recorded(str(tmp_path), 10)


def test_a_best_metric_no_recorded_evaluation_has_stops_instead_of_using_the_last_step(
    tmp_path):
  # A run that does not train (or is already trained) would otherwise pick no best and answer
  # with the last step's weights, exit 0.
  _best(tmp_path, "eval_loss", [0.9, 0.4])
  with pytest.raises(UserInputError, match=r"^--best_metric=eval_micro_f1 is not among the "
                     r"metrics recorded in .*best_checkpoint\.json \(eval_loss, eval_other\)"):
    BestCheckpoint.recorded(str(tmp_path), 4, "eval_micro_f1")
  with pytest.raises(UserInputError, match="--best_metric=eval_los is not among"):
    BestCheckpoint(str(tmp_path), "eval_los", every_steps=2).load(4)
  assert BestCheckpoint.recorded(str(tmp_path), 4, "eval_other").metric == "eval_other"
  assert BestCheckpoint.recorded(str(tmp_path), 0, "eval_los").evaluations == []  # none to rank


def test_using_the_best_says_when_it_is_gone_or_none_is_finite(tmp_path, caplog):
  from types import SimpleNamespace

  from bert_tf.training import Trainer
  trainer = SimpleNamespace(step=6, output_dir=str(tmp_path))
  best = _best(tmp_path, "eval_loss", [0.9, 0.4, 0.7])
  for step in (2, 4, 6):  # every evaluated checkpoint removed by hand
    (tmp_path / ("model.ckpt-%d.index" % step)).unlink()
  with caplog.at_level(std_logging.WARNING):
    assert Trainer.restore_best(trainer, best) is None
  assert "step 4 (eval_loss = 0.4), has no model.ckpt-4 on disk; none evaluated is left: using " \
         "the weights of step 6" in caplog.text
  caplog.clear()
  _saved(tmp_path, 2)  # the best left is step 2: said, then read (a stand-in: unreadable)
  with caplog.at_level(std_logging.WARNING), pytest.raises(UserInputError, match="model.ckpt-2"):
    Trainer.restore_best(trainer, best)
  assert "no model.ckpt-4 on disk; using the best of the checkpoints left" in caplog.text
  caplog.clear()
  (tmp_path / "nan").mkdir()
  nan = _best(tmp_path / "nan", "eval_loss", [float("nan")] * 2)
  with caplog.at_level(std_logging.WARNING):
    assert Trainer.restore_best(trainer, nan) is None
  assert "No evaluation in %s has a finite eval_loss: using the weights of step 6" % nan.path \
      in caplog.text


def test_a_resume_writes_the_google_checkpoint_a_stopped_save_left_out(tmp_path):
  # Stopped after training_state/ckpt-6 but before model.ckpt-6: its evaluation on resume
  # could never make it the best without the file.
  import tensorflow as tf
  written = []
  keeper = CheckpointKeeper(str(tmp_path), tf.train.Checkpoint(),
                            lambda prefix, step: written.append((prefix, step)))
  _saved(tmp_path, 4)
  keeper.ensure_google_checkpoint(4)
  keeper.ensure_google_checkpoint(6)
  assert written == [(str(tmp_path / "model.ckpt-6"), 6)]


def test_a_run_folder_given_as_a_checkpoint_names_its_best_when_the_latest_is_not_it(tmp_path):
  # --init_checkpoint=<a run's output_dir> took its latest model.ckpt-N: another model than
  # the one its outputs and export used, without a word.
  from bert_tf.checkpoints import resolve_checkpoint_path
  best = _best(tmp_path, "eval_loss", [0.9, 0.4, 0.7])
  checkpoint_keeper.write_checkpoint_state(str(tmp_path), ["model.ckpt-4", "model.ckpt-6"])
  with pytest.raises(UserInputError, match=r"its best checkpoint \(.*\) is model\.ckpt-4, its "
                     r"latest model\.ckpt-6\. Pass the one you mean: .*model\.ckpt-4 for"):
    resolve_checkpoint_path(str(tmp_path))
  assert resolve_checkpoint_path(str(tmp_path / "model.ckpt-6")) == str(tmp_path / "model.ckpt-6")
  best.add(8, {"eval_loss": 0.1})  # the latest is the best: no doubt
  _saved(tmp_path, 8)
  best.write()
  checkpoint_keeper.write_checkpoint_state(str(tmp_path), ["model.ckpt-4", "model.ckpt-8"])
  assert resolve_checkpoint_path(str(tmp_path)) == str(tmp_path / "model.ckpt-8")


def test_training_over_an_earlier_runs_checkpoints_without_its_state_is_refused(tmp_path):
  # Its training_state/ removed to start over: model.ckpt-6 and -12 would outrank the new
  # run's model.ckpt-3 in the pruning (deleted on save) and stay the folder's latest.
  from bert_tf.runner import check_no_stale_checkpoints
  check_no_stale_checkpoints(str(tmp_path))  # an empty folder
  _saved(tmp_path, 6, 12)
  with pytest.raises(UserInputError, match=r"^--output_dir=.* holds model\.ckpt-12, model\.ckpt-6 "
                     r"of an earlier run but no training state to resume"):
    check_no_stale_checkpoints(str(tmp_path))
  (tmp_path / "training_state").mkdir()
  checkpoint_keeper.write_checkpoint_state(str(tmp_path / "training_state"), ["ckpt-12"])
  (tmp_path / "training_state" / "ckpt-12.index").write_text("x")
  check_no_stale_checkpoints(str(tmp_path))  # a resume: its own checkpoints


@pytest.mark.slow  # builds and trains the tiny model one step (~5 s)
def test_a_signal_during_the_last_evaluation_stops_the_run_as_the_log_says(tmp_path):
  # The handler logs "finishing this step, saving the training state, then stopping"; received
  # during the evaluation after the loop, the run went on to its outputs, exit 0.
  import os
  import signal

  import tensorflow as tf

  from bert_tf import optimization, training
  from bert_tf.config import BertConfig
  from bert_tf.errors import Preempted
  from bert_tf.tasks.pretraining import PretrainingTask
  features = {"input_word_ids": tf.ones([2, 8], tf.int32), "input_mask": tf.ones([2, 8], tf.int32),
              "input_type_ids": tf.zeros([2, 8], tf.int32),
              "masked_lm_positions": tf.ones([2, 2], tf.int32),
              "masked_lm_ids": tf.ones([2, 2], tf.int32),
              "masked_lm_weights": tf.ones([2, 2], tf.float32),
              "next_sentence_labels": tf.zeros([2, 1], tf.int32)}
  trainer = training.Trainer(
      tf.distribute.OneDeviceStrategy("/cpu:0"),
      PretrainingTask(BertConfig.from_json_file(TINY.config)), str(tmp_path),
      lambda names: optimization.create_optimizer(1e-3, 1, 0, names))

  def evaluate():
    os.kill(os.getpid(), signal.SIGINT)
    return {"eval_loss": 1.0}

  best = BestCheckpoint(str(tmp_path), "eval_loss", every_steps=5)
  with pytest.raises(Preempted, match="SIGINT after step 1"):
    trainer.train(tf.data.Dataset.from_tensors(features).repeat(), 1, 100, evaluate=evaluate,
                  best=best)
  assert [e["step"] for e in BestCheckpoint.recorded(str(tmp_path), 1).evaluations] == [1]
  assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("change,message", [
    ({"keep_checkpoint_max": 0}, "--keep_checkpoint_max must be a positive integer, got 0."),
    ({"eval_every_steps": 5, "do_eval": False}, "--eval_every_steps=5 evaluates the eval file "
     "during training; add --do_eval"),
    ({"eval_every_steps": -1}, "--eval_every_steps must be a positive integer, got -1."),
    ({"best_metric": "eval_loss"}, "--best_metric=eval_loss ranks the evaluations of "
     "--eval_every_steps; add --eval_every_steps=N or drop it."),
    ({"early_stopping_patience": 2}, "--early_stopping_patience=2 ranks the evaluations"),
    ({"eval_every_steps": 5, "early_stopping_patience": -1}, "--early_stopping_patience must "
     "be 0 (off) or positive, got -1."),
    ({"eval_every_steps": 5, "best_metric": "accuracy"}, "--best_metric=accuracy must name an "
     "eval_results.txt entry"),
    ({"eval_every_steps": 5, "strategy": "multi_worker_mirrored"}, "not supported with "
     "--distribution_strategy=multi_worker_mirrored"),
])
def test_best_checkpoint_flags_are_checked_before_any_work(change, message):
  options = dict(do_train=True, do_eval=True, num_train_epochs=1.0)
  options.update(change)
  with pytest.raises(UserInputError) as error:
    RunOptions(**options).check()
  assert message in str(error.value)


# One run end to end: a small own-data file whose eval labels disagree with a third of the
# training labels, so the eval loss falls while the model fits the majority, then rises as it
# memorises the training labels (a peak at p = 2/3 for the majority).

_WORDS = ["red", "blue", "green", "cat", "dog", "house", "tree", "car", "book", "music", "river",
          "stone", "bread", "water", "light", "night"]
_ROWS = [("the %s and the %s %d" % (_WORDS[i % 16], _WORDS[(i * 7 + 3) % 16], i),
          "pos" if i % 2 else "neg") for i in range(24)]
_FLIP = {"pos": "neg", "neg": "pos"}


def _csv(path, rows):
  path.write_text("text,label\n" + "".join("%s,%s\n" % row for row in rows))
  return str(path)


def _predictions(path):
  return [json.loads(line)["probabilities"] for line in open(path, encoding="utf-8")]


@pytest.mark.slow
def test_the_best_step_is_kept_used_for_every_output_and_early_stopping_ends_the_run(
    tmp_path, script_session):
  run = partial(run_script, "run_classifier.py", shared=script_session)
  train = _csv(tmp_path / "train.csv", _ROWS)
  dev = _csv(tmp_path / "dev.csv", [(t, l if i % 3 else _FLIP[l]) for i, (t, l) in
                                    enumerate(_ROWS)])
  out, export = tmp_path / "out", tmp_path / "export"
  common = ["--vocab_file=" + VOCAB_UNCASED, "--bert_config_file=" + TINY.config,
            "--max_seq_length=16", "--eval_file=" + dev, "--predict_file=" + dev,
            "--eval_batch_size=24", "--predict_batch_size=24"]
  command = common + [
      "--train_file=" + train, "--init_checkpoint=" + TINY.ckpt, "--train_batch_size=8",
      "--num_train_epochs=10", "--learning_rate=1e-2", "--warmup_proportion=0", "--do_train",
      "--do_eval", "--do_predict", "--eval_every_steps=3", "--best_metric=eval_loss",
      "--early_stopping_patience=2", "--keep_checkpoint_max=1", "--output_dir=%s" % out,
      "--export_dir=%s" % export]
  done = run(*command)
  assert done.returncode == 0, done.stderr[-3000:]
  record = json.loads((out / BestCheckpoint.NAME).read_text())
  losses = [e["eval_loss"] for e in record["evaluations"]]
  best = record["best_step"]
  # It peaked and dropped: the best is neither the first nor the last evaluation, and the run
  # stopped after two evaluations without improvement, well before its 30 steps.
  assert [e["step"] for e in record["evaluations"]] == [3, 6, 9, 12]
  assert best == 6 and losses[1] == min(losses) and record["stopped_early"] == 12
  assert "Early stopping at step 12: 2 evaluations without improvement" in done.stderr
  assert "Using the best checkpoint: step 6 (eval_loss = %.6g)" % losses[1] in done.stderr
  # The best is kept beside the last one (--keep_checkpoint_max=1); steps 3 and 9 are pruned.
  assert _steps(out) == [6, 12]
  results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
  assert int(results["global_step"]) == 6
  assert float(results["eval_loss"]) == pytest.approx(losses[1], abs=1e-6)
  in_run = _predictions(out / "predictions.jsonl")

  # A --do_predict run of its own from model.ckpt-6 predicts what the run and its export did
  # (step 12's eval loss differs by far more than the tolerance: its answers differ).
  alone = run(*common, "--init_checkpoint=%s" % (out / "model.ckpt-6"), "--do_predict",
              "--output_dir=%s" % (tmp_path / "from_best"))
  assert alone.returncode == 0, alone.stderr[-3000:]
  from_best = [[p["neg"], p["pos"]] for p in _predictions(tmp_path / "from_best" /
                                                           "predictions.jsonl")]
  np.testing.assert_allclose(from_best, [[p["neg"], p["pos"]] for p in in_run], atol=1e-6)
  from test_own_data import _answer
  answer = _answer(export, [t for t, _ in _ROWS[:4]])
  np.testing.assert_allclose(answer["probabilities"], from_best[:4], atol=1e-5)
  assert abs(losses[3] - losses[1]) > 1e-3

  # The same command again trains nothing and keeps the export.
  again = run(*command)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "Stopped early at step 12: 2 evaluations without improvement" in again.stderr
  assert "nothing to do" in again.stderr and "Evaluation at step" not in again.stderr
  assert "Kept the SavedModel in %s" % export in again.stderr
  assert _steps(out) == [6, 12]

  # A larger patience resumes from step 12 with the best so far and the count since it: one
  # more evaluation without improvement (step 15) is the third, and step 12 is pruned.
  more = run(*[a.replace("patience=2", "patience=3") for a in command])
  assert more.returncode == 0, more.stderr[-3000:]
  assert "Resumed from" in more.stderr and "--early_stopping_patience=3 (the record" in more.stderr
  assert "Early stopping at step 15: 3 evaluations without improvement on step 6" in more.stderr
  assert _steps(out) == [6, 15]
  assert "Kept the SavedModel in %s" % export in more.stderr  # still step 6's weights

  # Training on without --eval_every_steps is refused (the record would go stale).
  plain = run(*[a for a in command if not a.startswith(("--eval_every", "--best_metric",
                                                         "--early_stopping"))])
  assert plain.returncode == 2 and "was trained with --eval_every_steps" in plain.stderr
