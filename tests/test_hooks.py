"""The TaskHooks contract (bert_tf/runner/template.py): hooks are built from the script's own
flags and the RunOptions, check() only checks (nor does reading the data change them), and
once built they refuse attribute assignment; what a stage produces for a later one
(record_files' Records) the template keeps on the Run and passes on. Checked for every
runner's hooks, built as runner.main builds them.
"""

import json
import os
import types

import pytest

from bert_tf import runner
from bert_tf.runner import template
from helpers import FIXTURES, ROOT, TINY, VOCAB_UNCASED, run_script
import hooks_probe

MODEL = ["--bert_config_file=%s" % TINY.config, "--vocab_file=%s" % VOCAB_UNCASED,
         "--init_checkpoint=%s" % TINY.ckpt, "--output_dir=/nonexistent/hooks_probe"]
DATA = os.path.join(ROOT, "data")
NER = ["--data_dir=%s" % os.path.join(DATA, "conll_sample"), "--max_seq_length=32",
       "--doc_stride=16"]
SQUAD = str(FIXTURES / "squad" / "squad_v1_tiny.json")
# case -> (script, hooks class, its command line besides MODEL)
CASES = {
    "glue": ("run_classifier", "bert_tf.tasks.glue.hooks:ClassifierHooks",
             ["--task_name=MRPC", "--data_dir=%s" % (FIXTURES / "classifier_data" / "MRPC"),
              "--do_train", "--do_predict", "--long_document=windows"]),
    "own_data": ("run_classifier", "bert_tf.tasks.own_data.hooks:OwnDataHooks",
                 ["--train_file=%s" % os.path.join(DATA, "own_data", "reviews_train.csv"),
                  "--do_train", "--long_document=windows"]),
    "ner": ("run_ner", "bert_tf.tasks.ner.hooks:FineTuningHooks",
            NER + ["--do_train", "--do_eval", "--do_predict"]),
    "ner_trained_labels": ("run_ner", "bert_tf.tasks.ner.hooks:FineTuningHooks",
                           NER + ["--do_eval", "--labels=O,B-PER,I-PER,B-LOC,I-LOC,B-ORG,"
                                                "I-ORG,B-MISC,I-MISC"]),
    "ner_feature_based": ("run_ner", "bert_tf.tasks.ner.hooks:FeatureBasedHooks",
                          NER + ["--approach=feature_based", "--do_train", "--do_eval"]),
    "squad": ("run_squad", "bert_tf.tasks.squad.hooks:SquadHooks",
              ["--train_file=%s" % SQUAD, "--predict_file=%s" % SQUAD, "--do_train",
               "--do_predict", "--max_seq_length=64", "--max_query_length=16"]),
    "swag": ("run_swag", "bert_tf.tasks.swag.hooks:SwagHooks",
             ["--data_dir=%s" % os.path.join(DATA, "swag_sample"), "--do_train", "--do_eval"]),
    "pretraining": ("run_pretraining", "bert_tf.tasks.pretraining.hooks:PretrainingHooks",
                    ["--input_file=%s" % (FIXTURES / "pretraining_data" / "a_seq128.tfrecord"),
                     "--do_train", "--do_eval"]),
}


@pytest.fixture(scope="module")
def probed():
  """Every case of CASES probed in one process (one TensorFlow import): case -> what the
  probe saw."""
  cases = [[case, script, hooks, [a for a in MODEL if script != "run_pretraining" or
                                  not a.startswith("--vocab_file")] + args]
           for case, (script, hooks, args) in CASES.items()]
  result = run_script("tests/hooks_probe.py", json.dumps(cases), timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", list(CASES))
def test_check_and_reading_change_nothing_and_built_hooks_are_read_only(probed, case):
  seen = probed[case]
  assert "missing" not in seen, seen["missing"]
  assert seen["class"] == CASES[case][1].partition(":")[2]
  assert seen["checked"] == seen["built"]  # check() only checks
  assert seen["read"] and all(seen["read"].values())  # every split asked for was read
  assert seen["after_reading"] == seen["built"]  # and reading left nothing on the hooks
  for name in ("counts", "flags"):  # a new attribute and one the constructor set
    message = seen["new_attribute" if name == "counts" else "existing_attribute"]
    assert message is not None, "%s accepted hooks.%s = ..." % (seen["class"], name)
    assert message.startswith("%s is read-only once built: cannot set %r." %
                              (seen["class"], name))
  assert seen["still"]  # nothing was set


class _Counting(runner.TaskHooks):
  """A constructor setting attributes, before and after its base's."""

  def __init__(self, task_flags, options):
    self.own = "before the base"
    super().__init__(task_flags, options)
    self.derived = options.max_seq_length // 2


def test_hooks_are_writable_only_while_being_built():
  hooks = _Counting(("flags",), runner.RunOptions(max_seq_length=64))
  assert (hooks.own, hooks.flags, hooks.derived) == ("before the base", ("flags",), 32)
  with pytest.raises(AttributeError) as error:
    hooks.counts = {}
  assert str(error.value) == (
      "_Counting is read-only once built: cannot set 'counts'. Compute it in __init__, or "
      "return it from the stage that produces it (the template keeps it on the Run).")
  with pytest.raises(AttributeError, match="cannot set 'derived'"):
    hooks.derived = 1
  with pytest.raises(AttributeError, match="cannot set 'own'"):
    del hooks.own
  assert hooks.derived == 32 and not hasattr(hooks, "counts")


def test_the_probe_sees_a_change_inside_an_attribute():
  """The probe's `state` follows bert_tf objects, so a check() that changed one (as run_ner's
  check once set its labels) would show."""
  from bert_tf.tasks import ner
  labels = ner.RunLabels(["O", "B-PER", "I-PER"], "auto")
  before = hooks_probe.state({"labels": labels})
  labels.use(["O", "B-PER", "I-PER"], "iob2")
  assert hooks_probe.state({"labels": labels}) != before


class _Recording(runner.TaskHooks):
  """Records what each stage was given."""

  def __init__(self, seen):
    super().__init__(None, None)
    self.seen = seen

  def record_files(self, run, split, examples):
    return runner.Records(["%s.tf_record" % split], len(examples) * 2, {"kept": split})

  def dataset(self, run, split, examples, records):
    self.seen["dataset"] = records
    return "dataset of " + split

  def describe(self, run, split, examples, records):
    self.seen["describe"] = records
    return "%d examples, %d windows" % (len(examples), records.count)

  def postprocess_predict(self, run, examples, outputs, records):
    self.seen["postprocess"] = (outputs, records)


def test_the_template_keeps_each_splits_records_and_passes_them_on():
  seen = {}
  trainer = types.SimpleNamespace(predict=lambda dataset: {"of": dataset}, chief=True)
  run = runner.Run(runner.RunOptions(), None, None, trainer=trainer)
  template._predict(run, _Recording(seen), ["a", "b"])
  records = runner.Records(["predict.tf_record"], 4, {"kept": "predict"})
  assert run.records == {"predict": records}
  assert seen == {"dataset": records, "describe": records,
                  "postprocess": ({"of": "dataset of predict"}, records)}
