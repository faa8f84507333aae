"""The runner template: RunOptions from the flags and the shared checks, in process; then
every runner script gets every up-front check before any work (exit status 2, one message
naming the flag or file, no traceback, and no feature file, checkpoint or export written).
"""

import dataclasses
import json
import os
import sys

from absl import flags
import keras
import numpy as np
import pytest

from bert_tf import runner, tokenization
from bert_tf.checkpoints import checks
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError
from bert_tf.runner import shared_flags, template
from helpers import FIXTURES, TINY, VOCAB_UNCASED, run_script, tiny_config


def _parsed(define, *args):
  """A fresh FlagValues with the groups `define(values)` defines, parsed from `args`."""
  values = flags.FlagValues()
  define(values)
  values(["runner"] + list(args))
  return values


def test_options_from_the_finetuning_flags():
  def define(values):
    shared_flags.define_finetuning_flags(max_seq_length=384, flag_values=values)
    shared_flags.define_eval_flags(flag_values=values)

  options = runner.RunOptions.from_flags(_parsed(
      define, "--bert_config_file=c.json", "--vocab_file=v.txt", "--do_lower_case=false",
      "--output_dir=out", "--do_train", "--do_predict", "--train_batch_size=12",
      "--num_train_epochs=2", "--use_tpu", "--tpu_name=t1", "--mixed_precision=bfloat16",
      "--jit_compile", "--export_dir=exp"))
  assert options == runner.RunOptions(
      bert_config_file="c.json", output_dir="out", max_seq_length=384, vocab_file="v.txt",
      do_lower_case=False, do_train=True, do_predict=True, export_dir="exp",
      train_batch_size=12, num_train_epochs=2.0, warmup_proportion=0.1, strategy="tpu",
      tpu_name="t1", mixed_precision="bfloat16", jit_compile=True)
  assert options.actions == ("do_train", "do_eval", "do_predict", "export_dir")
  assert options.task_options() == {"use_one_hot_embeddings": True, "dtype": "mixed_bfloat16",
                                    "dynamic_length": True, "length_bucket": 16}
  # --distribution_strategy wins over --use_tpu; the default is one device.
  assert runner.RunOptions.from_flags(_parsed(
      define, "--use_tpu", "--distribution_strategy=mirrored")).strategy == "mirrored"
  assert runner.RunOptions.from_flags(_parsed(define)).strategy == "one_device"


def test_options_of_a_runner_without_finetuning_or_eval_flags():
  def define(values):
    shared_flags.define_training_flags(128, "help", flag_values=values)
    shared_flags.define_eval_flags(flag_values=values)

  values = _parsed(define, "--do_eval", "--eval_batch_size=16", "--cpu_devices=2",
                   "--gradient_accumulation_steps=4")
  options = runner.RunOptions.from_flags(values)
  assert options.actions == ("do_train", "do_eval")
  assert (options.do_eval, options.eval_batch_size, options.cpu_devices,
          options.gradient_accumulation_steps) == (True, 16, 2, 4)
  assert options.vocab_file is None and options.num_train_epochs is None
  assert options.warmup_proportion is None and options.export_dir is None
  # The actions are those the runner defined flags for.
  squad_like = _parsed(lambda v: shared_flags.define_finetuning_flags(flag_values=v))
  assert runner.RunOptions.from_flags(squad_like).actions == (
      "do_train", "do_predict", "export_dir")


def test_shared_flags_default_to_the_options_defaults():
  def define(values):
    shared_flags.define_finetuning_flags(flag_values=values)
    shared_flags.define_eval_flags(flag_values=values)

  values = _parsed(define)
  defaults = runner.RunOptions()
  shared = [f.name for f in dataclasses.fields(runner.RunOptions)
            if f.name in values and f.default is not None]
  assert len(shared) >= 15
  for name in shared:
    assert values[name].default == getattr(defaults, name), name


def test_task_flags_are_the_modules_own_flags_read_once():
  values = flags.FlagValues()
  shared_flags.define_eval_flags(flag_values=values)  # shared_flags' own, not this module's
  flags.DEFINE_integer("doc_stride", 128, "stride", flag_values=values)
  flags.DEFINE_list("labels", None, "labels", flag_values=values)
  values(["runner", "--doc_stride=64", "--labels=O,B-PER"])
  task = shared_flags.task_flags(sys.modules[__name__], values)
  assert task._fields == ("doc_stride", "labels")
  assert (task.doc_stride, task.labels) == (64, ["O", "B-PER"])
  with pytest.raises(AttributeError):
    task.doc_stride = 1  # read-only


def test_no_action_names_the_runners_action_flags():
  with pytest.raises(UserInputError, match=r"^At least one of --do_train, --do_eval must be "
                     r"set\.$"):
    runner.RunOptions(actions=("do_train", "do_eval")).check()
  with pytest.raises(UserInputError, match="At least one of --do_train, --do_eval, --do_predict, "
                     "--export_dir must be set"):
    runner.RunOptions().check()
  runner.RunOptions(export_dir="exp").check()  # an export alone is something to do


@pytest.mark.parametrize("change,message", [
    ({"train_batch_size": 0}, "--train_batch_size must be a positive integer, got 0."),
    ({"predict_batch_size": -1}, "--predict_batch_size must be a positive integer, got -1."),
    ({"save_checkpoints_steps": 0}, "--save_checkpoints_steps must be a positive integer, got 0."),
    ({"num_train_epochs": 0.0}, "--num_train_epochs must be positive, got 0.0."),
    ({"warmup_proportion": 1.5}, "--warmup_proportion must be between 0 and 1, got 1.5."),
    ({"learning_rate": -1e-5}, "--learning_rate must not be negative, got -1e-05."),
])
def test_numbers_out_of_range(change, message):
  options = dataclasses.replace(runner.RunOptions(do_train=True), **change)
  with pytest.raises(UserInputError) as error:
    options.check()
  assert str(error.value) == message


def test_epochs_matter_only_for_training():
  runner.RunOptions(do_eval=True, num_train_epochs=0.0).check()


def test_batch_not_divisible_by_micro_batches_and_replicas():
  options = runner.RunOptions(train_batch_size=12, gradient_accumulation_steps=4)
  options.check_batch_sizes(1)
  options.check_batch_sizes(3)
  with pytest.raises(UserInputError) as error:
    options.check_batch_sizes(2)
  assert str(error.value) == ("--train_batch_size=12 must be divisible by "
                              "--gradient_accumulation_steps (4) times the number of replicas (2).")
  odd_eval = runner.RunOptions(train_batch_size=12, eval_batch_size=5)
  odd_eval.check_batch_sizes(2)  # fine-tuning pads eval batches
  with pytest.raises(UserInputError, match=r"--eval_batch_size=5 must be divisible by the number "
                     r"of replicas \(2\)\."):
    odd_eval.check_batch_sizes(2, whole_eval_batches=True)


def test_train_steps_are_the_originals():
  options = runner.RunOptions(train_batch_size=32, num_train_epochs=3.0, warmup_proportion=0.1)
  assert options.train_steps(100) == (9, 0)  # int(100 / 32 * 3), int(0.9)
  assert options.train_steps(3668) == (343, 34)  # MRPC's train set
  assert options.train_steps(1) == (1, 0)  # at least one step


def _config(**fields):
  config = BertConfig(**dict({"vocab_size": 30522, "max_position_embeddings": 64}, **fields))
  config.source_file = "/m/bert_config.json"
  return config


def test_sequence_length_against_the_config():
  checks.check_seq_length(64, _config(), 3)
  checks.check_seq_length(3, _config(), 3)
  for value in (65, 2):
    with pytest.raises(UserInputError) as error:
      checks.check_seq_length(value, _config(), 3)
    assert str(error.value) == ("--max_seq_length=%d must be between 3 and "
                                "max_position_embeddings=64 of /m/bert_config.json." % value)
  with pytest.raises(UserInputError, match=r"^--seq_length=1 must be between 2 and "):
    checks.check_seq_length(1, _config(), 2, flag="--seq_length")
  with pytest.raises(UserInputError, match=r"^seq_length=1 must be an integer of at least 2\.$"):
    checks.check_seq_length(1, None, 2, flag="seq_length")


def test_vocab_larger_than_the_config():
  tokenizer = checks.checked_tokenizer(VOCAB_UNCASED, True, None, _config())
  assert len(tokenizer.vocab) == 30522
  with pytest.raises(UserInputError) as error:
    checks.checked_tokenizer(VOCAB_UNCASED, True, None, _config(vocab_size=1000))
  assert str(error.value) == (
      "Vocab file %s has 30522 tokens but vocab_size=1000 in /m/bert_config.json; use the "
      "vocab file that belongs to the checkpoint." % VOCAB_UNCASED)


def test_cased_flags_with_an_uncased_checkpoint_name():
  cases = json.loads((FIXTURES / "tokenization" /
                      "validate_case_matches_checkpoint.json").read_text("utf-8"))
  wrong = [c for c in cases if c["error"]]
  assert wrong  # the original's messages, recorded from its tokenization.py
  for case in wrong:
    with pytest.raises(UserInputError) as error:
      checks.check_case(case["do_lower_case"], case["init_checkpoint"])
    assert str(error.value) == case["error"]
  checks.check_case(True, "/x/uncased_L-12_H-768_A-12/bert_model.ckpt")
  with pytest.raises(UserInputError, match="`--do_lower_case=False`.*seems to be a lowercased "
                     "model"):
    checks.check_case(False, "/x/uncased_L-12_H-768_A-12/bert_model.ckpt")


class _Hooks(runner.TaskHooks):
  def check(self, options):
    if options.max_seq_length == 7:
      raise UserInputError("the task's own check")


def test_prepare_checks_before_creating_anything(tmp_path):
  """Each failing check leaves no --output_dir; the passing run gets its config, tokenizer
  and a writable output folder."""
  good = runner.RunOptions(bert_config_file=TINY.config, vocab_file=VOCAB_UNCASED,
                           init_checkpoint=TINY.ckpt, output_dir=str(tmp_path / "out"),
                           max_seq_length=32, do_train=True, train_batch_size=4)
  small = tmp_path / "bert_config.json"
  small.write_text(open(TINY.config).read().replace('"vocab_size": 30522', '"vocab_size": 1000'))
  (tmp_path / "export").mkdir()
  (tmp_path / "export" / "saved_model.pb").write_text("")
  for change, message in [
      ({"do_train": False}, "At least one of"),
      ({"max_seq_length": 7}, "the task's own check"),
      ({"do_lower_case": False,
        "init_checkpoint": "/x/uncased_L-12_H-768_A-12/bert_model.ckpt"}, "lowercased model"),
      ({"max_seq_length": 65}, "must be between 3 and max_position_embeddings=64"),
      ({"export_dir": str(tmp_path / "export")}, "already exists and is not empty"),
      ({"bert_config_file": str(small)}, "has 30522 tokens but vocab_size=1000"),
      ({"train_batch_size": 6, "gradient_accumulation_steps": 4}, "must be divisible"),
      ({"init_checkpoint": str(tmp_path / "missing.ckpt")}, "missing.ckpt.index is missing"),
  ]:
    with pytest.raises(UserInputError, match=message):
      runner.prepare(dataclasses.replace(good, **change), _Hooks(None, good))
    assert not (tmp_path / "out").exists()
  run = runner.prepare(good, _Hooks(None, good))
  assert run.config.max_position_embeddings == 64 and run.strategy.num_replicas_in_sync == 1
  assert isinstance(run.tokenizer, tokenization.FullTokenizer) and run.trainer is None
  # The folder holds only the lock naming this run (released when the process ends).
  assert os.listdir(tmp_path / "out") == [".bert_tf.lock"]
  assert '"pid": %d' % os.getpid() in (tmp_path / "out" / ".bert_tf.lock").read_text()
  assert run.output_path("x") == str(tmp_path / "out" / "x")


class _RefusingHooks(runner.TaskHooks):
  def read_examples(self, run, split):
    raise UserInputError("a refused run")


def test_a_run_refused_after_the_lock_leaves_no_lock_in_the_process(tmp_path):
  """run_task releases --output_dir's lock however the run ends, so a second run in the same
  process (a notebook, a shared test process) finds the folder free."""
  options = runner.RunOptions(bert_config_file=TINY.config, vocab_file=VOCAB_UNCASED,
                              init_checkpoint=TINY.ckpt, output_dir=str(tmp_path / "out"),
                              max_seq_length=32, do_train=True, train_batch_size=4)
  for _ in range(2):
    with pytest.raises(UserInputError, match="a refused run"):
      runner.run_task(options, _RefusingHooks(None, options))
    assert not (tmp_path / "out" / ".bert_tf.lock").exists()


MODEL = ["--bert_config_file=%s" % TINY.config, "--vocab_file=%s" % VOCAB_UNCASED,
         "--init_checkpoint=%s" % TINY.ckpt]
RUNNERS = {
    "run_classifier.py": ["--task_name=MRPC", "--data_dir=%s" % (FIXTURES / "classifier_data" /
                                                                 "MRPC"), "--max_seq_length=32"],
    "run_squad.py": ["--train_file=%s" % (FIXTURES / "squad" / "squad_v1_tiny.json"),
                     "--max_seq_length=64", "--max_query_length=16", "--doc_stride=32"],
    "run_swag.py": ["--data_dir=%s" % (FIXTURES / "swag"), "--max_seq_length=32"],
}


def _run(script, tmp_path, *args):
  out = tmp_path / "out"
  result = run_script(script, *MODEL, *RUNNERS[script], "--output_dir=%s" % out, "--do_train",
                      "--train_batch_size=4", *args)
  written = sorted(p.name for p in out.iterdir()) if out.exists() else []
  return result, written


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(RUNNERS))
def test_a_non_empty_export_dir_stops_before_any_work(script, tmp_path):
  export_dir = tmp_path / "export"
  export_dir.mkdir()
  (export_dir / "saved_model.pb").write_text("a previous export")
  result, written = _run(script, tmp_path, "--export_dir=%s" % export_dir)
  assert result.returncode == 2, result.stderr[-2000:]
  assert "already exists and is not empty" in result.stderr
  assert "Traceback" not in result.stderr
  assert written == []  # no features, no checkpoints
  assert (export_dir / "saved_model.pb").read_text() == "a previous export"


@pytest.mark.slow
@pytest.mark.parametrize("script,args,message", [
    ("run_classifier.py", ["--max_seq_length=65"],
     "--max_seq_length=65 must be between 3 and max_position_embeddings=64 of %s." % TINY.config),
    ("run_swag.py", ["--max_seq_length=65"], "--max_seq_length=65 must be between"),
    ("run_classifier.py", ["--max_seq_length=2"], "--max_seq_length=2 must be between 3 and"),
    ("run_squad.py", ["--train_batch_size=0"], "--train_batch_size must be a positive integer"),
    ("run_swag.py", ["--num_train_epochs=0"], "--num_train_epochs must be positive"),
    ("run_classifier.py", ["--save_checkpoints_steps=0"], "--save_checkpoints_steps must be"),
])
def test_bad_flags_stop_before_any_work(script, args, message, tmp_path):
  result, written = _run(script, tmp_path, *args)
  assert result.returncode == 2, result.stderr[-2000:]
  assert message in result.stderr and "Traceback" not in result.stderr
  assert not [name for name in written if name.endswith((".tf_record", ".index"))]


@pytest.mark.slow
def test_a_missing_dev_file_stops_before_training(tmp_path):
  data = tmp_path / "MRPC"
  data.mkdir()
  mrpc = FIXTURES / "classifier_data" / "MRPC"
  (data / "train.tsv").write_bytes((mrpc / "train.tsv").read_bytes())
  result, written = _run("run_classifier.py", tmp_path, "--do_eval", "--data_dir=%s" % data)
  assert result.returncode == 2 and "dev.tsv does not exist" in result.stderr
  assert written == []


@pytest.mark.slow
def test_a_vocab_larger_than_the_config_is_refused(tmp_path):
  small = tmp_path / "bert_config.json"
  small.write_text(open(TINY.config).read().replace('"vocab_size": 30522', '"vocab_size": 1000'))
  result, written = _run("run_squad.py", tmp_path, "--bert_config_file=%s" % small)
  assert result.returncode == 2
  assert "has 30522 tokens but vocab_size=1000" in result.stderr
  assert written == []


@pytest.mark.slow
def test_the_scripts_share_the_model_checks(tmp_path):
  """A runner, extract_features and export_tfhub refuse a foreign vocab and a casing that
  contradicts the checkpoint's name with the same message (one implementation)."""
  small = tmp_path / "bert_config.json"
  small.write_text(open(TINY.config).read().replace('"vocab_size": 30522', '"vocab_size": 1000'))
  scripts = {
      "run_classifier.py": RUNNERS["run_classifier.py"] + [
          "--output_dir=%s" % (tmp_path / "out"), "--do_train"],
      "extract_features.py": ["--input_file=%s" % (tmp_path / "in.txt"), "--max_seq_length=32",
                              "--layers=-1", "--output_file=%s" % (tmp_path / "out.jsonl")],
      "export_tfhub.py": ["--encoder_export_dir=%s" % (tmp_path / "enc"),
                          "--preprocessor_export_dir=%s" % (tmp_path / "pre"), "--seq_length=32"],
  }
  uncased_name = "/x/uncased_L-12_H-768_A-12/bert_model.ckpt"
  cases = [
      (["--bert_config_file=%s" % small],
       "error: Vocab file %s has 30522 tokens but vocab_size=1000 in %s; use the vocab file "
       "that belongs to the checkpoint." % (VOCAB_UNCASED, small)),
      (["--init_checkpoint=%s" % uncased_name, "--do_lower_case=false"],
       "error: You passed in `--do_lower_case=False` with `--init_checkpoint=%s`. However, "
       "`uncased_L-12_H-768_A-12` seems to be a lowercased model" % uncased_name),
  ]
  for script, args in scripts.items():
    for extra, message in cases:
      result = run_script(script, *MODEL, *args, *extra)
      assert result.returncode == 2, (script, result.stderr[-2000:])
      assert result.stderr.strip().splitlines()[-1].startswith(message), (script, result.stderr)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["bert_config.json"]


@pytest.mark.parametrize("fast", [False, True])
def test_bfloat16_on_a_cpu_without_avx512_is_warned_about(monkeypatch, caplog, fast):
  from bert_tf.utils import cpu
  monkeypatch.setattr(cpu, "fast_bfloat16", lambda cpu_info=None: fast)
  with caplog.at_level("WARNING"):
    runner.warn_if_slow_bfloat16("--inference_precision=bfloat16", "Use float32 here.")
  warned = [r.getMessage() for r in caplog.records if "slow bfloat16 fallback" in r.getMessage()]
  if fast:
    assert not warned
  else:
    assert len(warned) == 1 and warned[0].startswith("--inference_precision=bfloat16 on this CPU")
    assert warned[0].endswith("Use float32 here.")


def test_inference_precision_flag_gives_the_export_its_model():
  import types

  from bert_tf.tasks import glue
  from bert_tf.utils import precision

  def define(values):
    shared_flags.define_finetuning_flags(flag_values=values)
    shared_flags.define_eval_flags(flag_values=values)

  assert runner.RunOptions.from_flags(_parsed(define)).inference_precision == "float32"
  options = runner.RunOptions.from_flags(_parsed(define, "--inference_precision=int8"))
  assert options.inference_precision == "int8"
  with pytest.raises(flags.IllegalFlagValueError):
    _parsed(define, "--inference_precision=float16")
  model = glue.ClassifierModel(tiny_config(), num_labels=2)
  run = runner.Run(options, tiny_config(), None, trainer=types.SimpleNamespace(model=model))
  served = run.serving_model()
  assert served is not model and precision.of(served) == "int8"
  float32 = runner.Run(runner.RunOptions(), tiny_config(), None,
                       trainer=types.SimpleNamespace(model=model))
  assert float32.serving_model() is model


def test_an_export_dir_that_is_or_holds_the_output_dir_is_refused(tmp_path):
  out = str(tmp_path / "run")
  for export_dir, word in ((out, "is"), (out + "/", "is"), (str(tmp_path), "holds")):
    with pytest.raises(UserInputError) as error:
      runner.check_export_apart(export_dir, out)
    assert str(error.value) == (
        "--export_dir=%s %s --output_dir=%s: replacing the export would delete the run's "
        "checkpoints; pass another --export_dir, e.g. %s/export." % (export_dir, word, out, out))
  runner.check_export_apart(out + "/export", out)
  runner.check_export_apart(out + "_export", out)  # a sibling sharing the prefix


def test_a_run_that_does_not_train_needs_weights_to_read(tmp_path):
  out = str(tmp_path / "out")
  with pytest.raises(UserInputError) as error:
    runner.check_weights_exist(runner.RunOptions(do_predict=True, output_dir=out))
  assert str(error.value) == (
      "Nothing to predict with: --output_dir=%s holds no training state and no "
      "--init_checkpoint is given (the model would be random). Pass --do_train, the "
      "--output_dir of a trained run, or --init_checkpoint=<its model.ckpt-N>." % out)
  for fine in (dict(do_train=True), dict(do_eval=True, init_checkpoint="ckpt")):
    runner.check_weights_exist(runner.RunOptions(output_dir=out, **fine))


def test_an_export_replaced_is_restored_when_the_new_one_fails(tmp_path):
  from bert_tf import export
  folder = tmp_path / "exp"
  folder.mkdir()
  (folder / "saved_model.pb").write_text("old")
  with pytest.raises(RuntimeError):
    with export.replacing(str(folder)):
      assert not folder.exists()  # moved aside while the new export is written
      raise RuntimeError("the export failed")
  assert (folder / "saved_model.pb").read_text() == "old"
  with export.replacing(str(folder)):
    folder.mkdir()
    (folder / "saved_model.pb").write_text("new")
  assert (folder / "saved_model.pb").read_text() == "new"
  assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]  # the old one is gone


def test_an_export_replaced_through_a_symlink_keeps_the_link(tmp_path):
  from bert_tf import export
  real, link = tmp_path / "real", tmp_path / "link"
  real.mkdir()
  (real / "saved_model.pb").write_text("old")
  link.symlink_to(real)
  with pytest.raises(RuntimeError):
    with export.replacing(str(link)):
      assert link.is_symlink() and not real.exists()  # the target moved aside, not the link
      raise RuntimeError("the export failed")
  assert link.is_symlink() and (link / "saved_model.pb").read_text() == "old"
  with export.replacing(str(link)):
    real.mkdir()  # where save_serving_module writes through the link
    (real / "saved_model.pb").write_text("new")
  assert link.is_symlink() and (link / "saved_model.pb").read_text() == "new"
  assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


def _fake_export(folder, weights):
  """An export folder shaped like a SavedModel: a graph, variables and metadata."""
  os.makedirs(os.path.join(folder, "variables"))
  os.makedirs(os.path.join(folder, "assets.extra"))
  for name, text in (("saved_model.pb", "graph"), ("variables/variables.index", "index"),
                     ("variables/variables.data-00000-of-00001", weights),
                     ("assets.extra/bert_tf_export.json", "{}")):
    with open(os.path.join(folder, name), "w") as f:
      f.write(text)


def test_an_export_is_kept_only_when_every_file_and_setting_matches(tmp_path):
  from bert_tf.checkpoints import run_folder
  out, exp = str(tmp_path / "run"), str(tmp_path / "exp")
  os.makedirs(out)
  _fake_export(exp, "weights of step 6")
  source = {"step": 6, "max_seq_length": 32, "window_pooling": "mean", "labels": ["0", "1"]}
  run_folder.record_export(out, exp, source)
  recorded = run_folder.recorded_export(out, exp)
  assert run_folder.export_changes(recorded, dict(source), exp) == []
  changed = dict(source, window_pooling="max", labels=["1", "0"])
  assert run_folder.export_changes(recorded, changed, exp) == [
      "the labels changed", 'window_pooling was "mean", now "max"']
  assert run_folder.export_changes(recorded, dict(source, doc_stride=16), exp) == [
      "doc_stride was unset, now 16"]
  # saved_model.pb is the same, so the folder is still this run's export, but not as written.
  data = os.path.join(exp, "variables", "variables.data-00000-of-00001")
  with open(data, "w") as f:
    f.write("weights of another run")
  assert run_folder.recorded_export(out, exp) is not None
  assert run_folder.export_changes(recorded, source, exp) == [run_folder.FILES_CHANGED]
  os.remove(data)
  assert run_folder.export_changes(recorded, source, exp) == [run_folder.FILES_CHANGED]
  with open(data, "w") as f:
    f.write("weights of step 6")
  assert run_folder.export_changes(recorded, source, exp) == []
  os.rename(data, data + ".moved")  # the same bytes under another name
  assert run_folder.export_changes(recorded, source, exp) == [run_folder.FILES_CHANGED]


def _nothing():
  pass


class _FakeExportHooks(runner.TaskHooks):
  """Writes _fake_export with `weights`, calling `before()` and `after()` around it."""

  def __init__(self, weights, before=_nothing, after=_nothing):
    self.weights, self.before, self.after = weights, before, after

  def export(self, run):
    self.before()  # save_serving_module traces and saves elsewhere, then moves it in place
    _fake_export(run.options.export_dir, self.weights)
    self.after()


def _fake_run(tmp_path, name, export_dir, step=6, **options):
  import types
  out = tmp_path / name
  out.mkdir()
  options = runner.RunOptions(output_dir=str(out), export_dir=str(export_dir),
                              vocab_file=VOCAB_UNCASED, **options)
  model = types.SimpleNamespace(weights=[keras.Variable(np.arange(4.0), name="kernel")])
  return runner.Run(options, tiny_config(), None,
                    trainer=types.SimpleNamespace(step=step, model=model))


def test_an_export_of_other_weights_at_the_same_step_is_replaced(tmp_path, caplog):
  import logging
  caplog.set_level(logging.INFO, logger="absl")
  exp = tmp_path / "exp"
  run = _fake_run(tmp_path, "run", exp)
  template._export(run, _FakeExportHooks("first weights"))
  template._export(run, _FakeExportHooks("first weights"))
  assert "Kept the SavedModel in %s" % exp in caplog.text
  run.trainer.model.weights[0].assign(np.array([0.0, 1.0, 2.0, 3.5]))  # retrained, same step
  caplog.clear()
  template._export(run, _FakeExportHooks("second weights"))
  assert "the weights' values changed" in caplog.text
  assert (exp / "variables" / "variables.data-00000-of-00001").read_text() == "second weights"


def test_weights_digest_follows_every_value_name_and_shape():
  import types
  def digest(*weights):
    return runner.weights_digest(types.SimpleNamespace(weights=list(weights)))
  base = digest(keras.Variable(np.zeros((2, 3)), name="a"))
  assert base == digest(keras.Variable(np.zeros((2, 3)), name="a"))
  assert base != digest(keras.Variable(np.zeros((3, 2)), name="a"))
  assert base != digest(keras.Variable(np.zeros((2, 3)), name="b"))
  changed = np.zeros((2, 3))
  changed[1, 2] = 1e-7
  assert base != digest(keras.Variable(changed, name="a"))


def test_two_runs_exporting_to_one_folder_take_turns_and_the_second_stops(tmp_path, caplog):
  import logging
  import threading
  caplog.set_level(logging.INFO, logger="absl")
  from bert_tf.checkpoints import run_folder
  exp = tmp_path / "exp"
  first, second = _fake_run(tmp_path, "first", exp), _fake_run(tmp_path, "second", exp)
  writing, errors = threading.Event(), {}

  def slow():  # the second run reaches its export while the first one writes
    writing.set()
    threading.Event().wait(0.5)

  def export(name, run, hooks):
    try:
      template._export(run, hooks)
    except UserInputError as e:
      errors[name] = str(e)

  first_hooks = _FakeExportHooks("1", before=slow)
  threads = [threading.Thread(target=export, args=("first", first, first_hooks))]
  threads[0].start()
  assert writing.wait(30)
  threads.append(threading.Thread(target=export, args=("second", second, _FakeExportHooks("2"))))
  threads[1].start()
  for thread in threads:
    thread.join(60)
  assert list(errors) == ["second"]
  assert "Waiting for another run's export to %s to end." % exp in caplog.text
  assert errors["second"] == (
      "--export_dir=%s now holds an export this run did not write (another run exported there "
      "while this one ran). The checkpoints in --output_dir=%s are kept: run the same command "
      "with another --export_dir, or with --overwrite_export to replace that export."
      % (exp, second.options.output_dir))
  assert (exp / "variables" / "variables.data-00000-of-00001").read_text() == "1"
  recorded = run_folder.recorded_export(first.options.output_dir, exp)
  assert recorded["files_sha1"] == run_folder.export_digest(str(exp))
  assert run_folder.export_record(second.options.output_dir, exp) is None
  assert sorted(p.name for p in tmp_path.iterdir()) == ["exp", "first", "second"]  # no lock left


def test_ctrl_c_during_an_export_puts_the_previous_one_back_and_exits_130(tmp_path):
  from bert_tf import errors
  from bert_tf.checkpoints import run_folder
  exp = tmp_path / "exp"
  run = _fake_run(tmp_path, "run", exp)
  template._export(run, _FakeExportHooks("step 6"))
  before = run_folder.export_record(run.options.output_dir, exp)
  run.trainer.step = 7

  def interrupt():  # after the new export is whole in place
    raise KeyboardInterrupt

  with pytest.raises(errors.Preempted) as stopped:
    template._export(run, _FakeExportHooks("step 7", after=interrupt))
  assert stopped.value.exit_code == 130
  assert str(stopped.value) == (
      "interrupted during the export to %s; it holds what it held before, and --output_dir=%s "
      "is kept: run the same command again to export." % (exp, run.options.output_dir))
  assert stopped.value.__cause__ is None and stopped.value.__suppress_context__
  assert (exp / "variables" / "variables.data-00000-of-00001").read_text() == "step 6"
  assert run_folder.export_record(run.options.output_dir, exp) == before
  assert sorted(p.name for p in tmp_path.iterdir()) == ["exp", "run"]


def test_an_export_lock_that_cannot_be_written_is_one_line(tmp_path):
  from bert_tf import export
  (tmp_path / ".exp.bert_tf_export.lock").mkdir()  # in the way of the lock file
  with pytest.raises(UserInputError, match=r"Cannot export to .*exp: its lock file "
                                           r".*\.exp\.bert_tf_export\.lock cannot be written"):
    with export.locked(str(tmp_path / "exp")):
      pass
