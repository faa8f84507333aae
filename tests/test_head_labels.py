"""What a run records beside its checkpoints, read back: a classification head's rows in the
loading run's label order (or refused), and the casing and label names a conversion writes."""

import json
import shutil

import numpy as np
import pytest

from bert_tf import checkpoints
from bert_tf.checkpoints import conversion, head_labels, hf_files, run_folder
from bert_tf.errors import UserInputError
from helpers import TINY, VOCAB_UNCASED, run_script

TRAINED = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


def run_folder_with_ner_head(folder, labels=TRAINED, settings=None):
  """A runner-like --output_dir: model.ckpt-7 (tiny encoder + a NER head whose row i holds
  the value i), its `checkpoint` state file and training_state/settings.json."""
  return run_folder_with_head(folder, "cls/ner/", len(labels), dict({"labels": labels},
                                                                    **(settings or {})))


def run_folder_with_head(folder, scope, num_rows, settings):
  """run_folder_with_ner_head's folder with the head `scope`output_weights/_bias ("" is
  run_classifier's) of `num_rows` rows and the recorded `settings`."""
  _, variables = checkpoints.read_variables(TINY.ckpt)
  variables = {n: v for n, v in variables.items() if n.startswith("bert/")}  # the encoder
  rows = np.arange(num_rows, dtype=np.float32)
  variables[scope + "output_weights"] = np.repeat(rows[:, None], 32, axis=1)
  variables[scope + "output_bias"] = rows
  prefix = checkpoints.save_checkpoint(folder / "model.ckpt-7", extra=variables)
  (folder / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-7"\n')
  state = folder / "training_state"
  state.mkdir()
  recorded = {"do_lower_case": True, "strip_accents": None,
              "vocab_sha1": run_folder.file_digest(VOCAB_UNCASED)}
  (state / "settings.json").write_text(json.dumps({**recorded, **settings}))
  return prefix


def head_rows(source):
  return list(source.get("cls/ner/output_bias")), source.get("cls/ner/output_weights")[:, 0]


def test_a_head_is_read_in_the_loading_runs_label_order(tmp_path):
  prefix = run_folder_with_ner_head(tmp_path)
  same = head_labels.in_label_order(prefix, "ner", TRAINED, training=False)
  assert head_rows(same)[0] == [0, 1, 2, 3, 4]
  reordered = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
  view = head_labels.in_label_order(prefix, "ner", reordered, training=False)
  bias, weights = head_rows(view)
  assert bias == [TRAINED.index(label) for label in reordered] == [0, 3, 4, 1, 2]
  assert list(weights) == bias
  # The encoder is untouched.
  np.testing.assert_array_equal(view.get("bert/pooler/dense/kernel"),
                                same.get("bert/pooler/dense/kernel"))


def test_a_head_of_other_labels_is_refused_or_retrained(tmp_path):
  prefix = run_folder_with_ner_head(tmp_path)
  other = ["O", "B-ORG", "I-ORG", "B-PER", "I-PER"]
  with pytest.raises(UserInputError, match=r"trained on the labels O,B-LOC,I-LOC,B-PER,I-PER "
                                           r"\(recorded in .*settings.json\), not on this run's "
                                           r"O,B-ORG,I-ORG,B-PER,I-PER: pass --labels=O,B-LOC"):
    head_labels.in_label_order(prefix, "ner", other, training=False, flag="--labels")
  fresh = head_labels.in_label_order(prefix, "ner", other, training=True)
  assert "cls/ner/output_bias" not in fresh.shapes
  assert "bert/pooler/dense/kernel" in fresh.shapes


def test_a_checkpoint_without_the_head_or_a_record_is_read_as_it_is(tmp_path):
  plain = head_labels.in_label_order(TINY.ckpt, "ner", TRAINED, training=False)
  assert "cls/ner/output_bias" not in plain.shapes
  prefix = run_folder_with_ner_head(tmp_path)
  (tmp_path / "training_state" / "settings.json").unlink()
  unrecorded = head_labels.in_label_order(prefix, "ner", TRAINED[::-1], training=False)
  assert head_rows(unrecorded)[0] == [0, 1, 2, 3, 4]


def test_hf_id2label_names_the_rows(tmp_path):
  prefix = run_folder_with_ner_head(tmp_path / "run")
  conversion.convert_to_hf(tmp_path / "run", tmp_path / "hf", bert_config_file=TINY.config,
                           vocab_file=VOCAB_UNCASED)
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert config["architectures"] == ["BertForTokenClassification"]
  assert config["id2label"] == {str(i): label for i, label in enumerate(TRAINED)}
  assert config["label2id"] == {label: i for i, label in enumerate(TRAINED)}
  source = checkpoints.open_source(tmp_path / "hf")
  assert head_labels.recorded_labels(source) == (TRAINED, str(tmp_path / "hf" / "config.json")
                                                 + " (id2label)")
  reordered = TRAINED[::-1]
  view = head_labels.in_label_order(source, "ner", reordered, training=False)
  np.testing.assert_array_equal(view.get("cls/ner/output_bias"),
                                checkpoints.open_source(prefix).get("cls/ner/output_bias")[::-1])


def test_hf_config_says_regression_for_a_regression_head(tmp_path):
  """Issue 38 case 6: without problem_type transformers' pipeline reads a one-output head
  through a sigmoid (an STS-B score 0.028 became 0.507); a classification says single-label,
  as transformers' own fine-tuning records it."""
  written = {}
  for name, rows, labels in (("stsb", 1, None), ("mrpc", 2, ["0", "1"])):
    run_folder_with_head(tmp_path / name, "", rows, {"task_name": name, "labels": labels})
    conversion.convert_to_hf(tmp_path / name, tmp_path / (name + "_hf"),
                             bert_config_file=TINY.config, vocab_file=VOCAB_UNCASED)
    written[name] = json.loads((tmp_path / (name + "_hf") / "config.json").read_text())
  assert written["stsb"]["architectures"] == ["BertForSequenceClassification"]
  assert written["stsb"]["problem_type"] == "regression"
  assert len(written["stsb"]["id2label"]) == 1
  assert written["mrpc"]["problem_type"] == "single_label_classification"
  assert written["mrpc"]["id2label"] == {"0": "0", "1": "1"}


def test_problem_type_without_a_record_and_for_other_heads():
  decide = hf_files.problem_type
  # Nothing recorded: one output can only be run_classifier's regression head; a wider head is
  # left to transformers' default (softmax).
  assert decide("BertForSequenceClassification", 1, {}) == "regression"
  assert decide("BertForSequenceClassification", 3, {}) is None
  # transformers reads problem_type for sequence classifiers only.
  assert decide("BertForTokenClassification", 5, {"labels": TRAINED}) is None
  assert decide("BertForPreTraining", None, {}) is None


def classifier_rows(source):
  return list(source.get("output_bias")) if "output_bias" in source.shapes else None


def test_a_head_of_another_task_is_refused_or_retrained_even_with_the_same_label_names(tmp_path):
  """Issue 38 case 7: an MRPC head evaluated as SST-2 was read without a word, both tasks
  naming their labels "0", "1". It is refused (one line naming both tasks and the fix), and a
  fine-tuning run from it trains a new head; the same task, or one whose labels mean the same
  (MNLI's and XNLI's), reads it; a regression run (STS-B) is checked the same way."""
  from bert_tf.tasks import glue
  mrpc = run_folder_with_head(tmp_path / "mrpc", "", 2, {"task_name": "mrpc",
                                                         "labels": ["0", "1"]})
  sst2 = glue.task_labels("SST-2", ["0", "1"])
  with pytest.raises(UserInputError) as refused:
    head_labels.in_label_order(mrpc, "classifier", sst2, training=False)
  message = str(refused.value)
  assert "\n" not in message and "fine-tuned for task mrpc (recorded in " in message
  assert "not for --task_name=sst-2" in message and "Pass --task_name=mrpc to use it" in message
  assert "fine-tune it on sst-2 with --do_train, which trains a new head" in message
  fresh = head_labels.in_label_order(mrpc, "classifier", sst2, training=True)
  assert classifier_rows(fresh) is None and "bert/pooler/dense/kernel" in fresh.shapes
  same = head_labels.in_label_order(mrpc, "classifier", glue.task_labels("MRPC", ["0", "1"]),
                                    training=False)
  assert classifier_rows(same) == [0, 1]
  nli = ["contradiction", "entailment", "neutral"]
  mnli = run_folder_with_head(tmp_path / "mnli", "", 3, {"task_name": "mnli", "labels": nli})
  for task in ("xnli", "mnli-mm"):
    read = head_labels.in_label_order(mnli, "classifier", glue.task_labels(task, nli), False)
    assert classifier_rows(read) == [0, 1, 2]
  stsb = glue.task_labels("STS-B", None)
  with pytest.raises(UserInputError, match="fine-tuned for task mrpc .*not for --task_name=sts-b"):
    head_labels.in_label_order(mrpc, "classifier", stsb, training=False)
  own = run_folder_with_head(tmp_path / "stsb", "", 1, {"task_name": "sts-b", "labels": None})
  assert classifier_rows(head_labels.in_label_order(own, "classifier", stsb, False)) == [0]
  # Recorded with no task (an older run), or one no GLUE task is: read by its label names.
  old = run_folder_with_head(tmp_path / "old", "", 2, {"labels": ["0", "1"]})
  assert classifier_rows(head_labels.in_label_order(old, "classifier", sst2, False)) == [0, 1]
  assert not sst2.other_task("text-classification")
  # transformers' run_glue names SST-2 "sst2", STS-B "stsb": the same tasks.
  assert not sst2.other_task("sst2") and not stsb.other_task("stsb")
  assert sst2.other_task("qqp") and glue.task_labels("xnli", nli).other_task("rte")


def test_an_hf_conversion_keeps_the_task_its_head_was_fine_tuned_for(tmp_path):
  from bert_tf.tasks import glue
  run_folder_with_head(tmp_path / "mrpc", "", 2, {"task_name": "mrpc", "labels": ["0", "1"]})
  conversion.convert_to_hf(tmp_path / "mrpc", tmp_path / "hf", bert_config_file=TINY.config,
                           vocab_file=VOCAB_UNCASED)
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert config["finetuning_task"] == "mrpc"
  source = checkpoints.open_source(tmp_path / "hf")
  assert head_labels.recorded_task(source) == ("mrpc", str(tmp_path / "hf" / "config.json")
                                               + " (finetuning_task)")
  with pytest.raises(UserInputError, match=r"fine-tuned for task mrpc \(recorded in .*config"
                                           r".json \(finetuning_task\)\), not for "
                                           r"--task_name=sst-2"):
    head_labels.in_label_order(source, "classifier", glue.task_labels("sst-2", ["0", "1"]),
                               training=False)


def test_conversion_takes_the_runs_casing_and_checks_its_vocab(tmp_path):
  run = tmp_path / "run"
  run_folder_with_ner_head(run, settings={"do_lower_case": False, "strip_accents": True})
  shutil.copy(TINY.config, run / "bert_config.json")
  shutil.copy(VOCAB_UNCASED, run / "vocab.txt")
  result = run_script("convert_checkpoint.py", "--input=%s" % run, "--to=hf",
                      "--output_dir=%s" % (tmp_path / "hf"))
  assert result.returncode == 0, result.stderr[-2000:]
  assert "do_lower_case=False (as recorded with the run)" in result.stdout
  tokenizer = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
  assert tokenizer["do_lower_case"] is False and tokenizer["strip_accents"] is True
  other_vocab = tmp_path / "other_vocab.txt"
  other_vocab.write_text(open(VOCAB_UNCASED, encoding="utf-8").read().replace("[unused0]", "x"))
  with pytest.raises(UserInputError, match=r"is not the one the run in .* was trained with"):
    conversion.convert_to_hf(run, tmp_path / "hf2", vocab_file=str(other_vocab))


def test_run_files_are_copied_and_never_replace_a_saved_states(tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  run_folder.keep_model_files(str(out), TINY.config, VOCAB_UNCASED)
  assert (out / "bert_config.json").read_bytes() == open(TINY.config, "rb").read()
  assert (out / "vocab.txt").read_bytes() == open(VOCAB_UNCASED, "rb").read()
  other = tmp_path / "bert_config.json"
  other.write_text(open(TINY.config).read().replace("32", "64"))
  run_folder.keep_model_files(str(out), str(other), VOCAB_UNCASED)  # no state yet: replaced
  assert (out / "bert_config.json").read_bytes() == other.read_bytes()
  state = run_folder_with_ner_head(tmp_path / "run")  # a folder with a saved state
  (tmp_path / "run" / "training_state" / "ckpt-1.index").write_bytes(b"")
  (tmp_path / "run" / "training_state" / "checkpoint").write_text(
      'model_checkpoint_path: "ckpt-1"\n')
  assert run_folder.has_training_state(str(tmp_path / "run")), state
  shutil.copy(TINY.config, tmp_path / "run" / "bert_config.json")
  run_folder.keep_model_files(str(tmp_path / "run"), str(other), VOCAB_UNCASED)
  assert (tmp_path / "run" / "bert_config.json").read_bytes() == open(TINY.config, "rb").read()
