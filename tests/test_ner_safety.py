"""run_ner never answers silently wrong: labels in another order, cached features that no longer
match the data, a tagger run with other settings, untagged dev files, odd characters in CoNLL
lines, very long sentences. Each case with the real command line where it needs a runner."""

from functools import partial
import json
import os
import shutil

import numpy as np
import pytest

from bert_tf.errors import UserInputError
from bert_tf.tasks import ner
from bert_tf.tasks.ner import feature_based as fb
from bert_tf.tasks.ner import feature_cache
from helpers import TINY, run_script
from test_ner import ner_args, read_results, slice_data

REORDERED = "I-PER,B-PER,O,B-LOC,I-LOC,I-ORG,B-ORG,I-MISC,B-MISC"


def run_ner_in_a_process(*args):
  return run_script("run_ner.py", *args)


def run_ner(*args, run=run_ner_in_a_process):
  """run_ner.py given `args`, by `run`: a process of its own, or the module's ScriptSession
  (its run_ner commands one after another in one process)."""
  result = run(*args)
  assert result.returncode == 0, result.stderr[-3000:]
  return result


def one_line_error(*args, run=run_ner_in_a_process):
  result = run(*args)
  assert result.returncode != 0
  assert "Traceback" not in result.stderr
  return result.stderr


# ------------------------------------------------------------------------------ reading

def test_conll_lines_break_at_newlines_only(tmp_path):
  path = tmp_path / "odd.txt"
  path.write_bytes("Anna\x0cMaria B-PER\r\nsaid O\n\nBonn\x1eEast B-LOC\n\nx  PER\n".encode())
  with pytest.raises(UserInputError, match=r"odd.txt line 6: tag 'PER' is not O, B-TYPE"):
    ner.read_conll(str(path))
  path.write_bytes("Anna\x0cMaria B-PER\r\nsaid O\n\nBonn\x1eEast\tB-LOC\n".encode())
  (document,) = ner.read_conll(str(path))
  assert [s.words for s in document.sentences] == [["Anna\x0cMaria", "said"], ["Bonn\x1eEast"]]
  assert [s.tags for s in document.sentences] == [["B-PER", "O"], ["B-LOC"]]
  assert [s.line for s in document.sentences] == [1, 4]


# ---------------------------------------------------------------------- the BiLSTM's batches

def test_sentence_batches_pad_each_batch_to_its_own_longest():
  lengths = [3, 5000, 4, 2, 6, 1, 9]
  rng = np.random.RandomState(0)
  words = rng.normal(size=(sum(lengths), 2, 3)).astype(np.float32)
  ids = rng.randint(0, 5, size=sum(lengths)).astype(np.int32)
  batches = fb.SentenceBatches(words, lengths, ids, batch_size=2)
  widths = []
  restored = np.zeros_like(words)
  restored_ids = np.zeros_like(ids)
  for index in range(len(batches.batches)):
    (features, mask), batch_ids, weights = batches.batch(index)
    members = [lengths[s] for s in batches.batches[index]]
    widths.append(features.shape[1])
    assert features.shape[1] == -(-max(members) // 8) * 8  # its own longest, to a multiple of 8
    assert mask.sum() == sum(members)
    assert weights.sum() == pytest.approx(mask.size)  # the loss is the mean over real words
    positions, rows = batches.scatter(index, features)
    restored[positions] = rows
    restored_ids[positions] = batches.scatter(index, batch_ids)[1]
  np.testing.assert_array_equal(restored, words)  # every word once, back in its place
  np.testing.assert_array_equal(restored_ids, ids)
  assert widths == [8, 8, 16, 5000]  # by length: [1, 2], [3, 4], [6, 9], [5000]


# ------------------------------------------------------------------------------ the feature cache

class CountingCompute:

  def __init__(self, words):
    self.calls, self.words = [], words

  def __call__(self, layers):
    self.calls.append(list(layers))
    return {k: np.full((self.words, 4), k, np.float32) for k in layers}


def test_the_feature_cache_recomputes_what_no_longer_matches(tmp_path, caplog):
  folder = str(tmp_path / "key")
  compute = CountingCompute(words=5)
  cache = lambda split="eval", sha1="d1", words=5: feature_cache.FeatureCache(folder, split,
                                                                              sha1, words)
  assert cache().load([1, 2], compute)[2][0, 0] == 2
  assert cache().load([1, 2], compute)[1][0, 0] == 1 and compute.calls == [[1, 2]]
  train = CountingCompute(words=7)
  cache("train", "d0", 7).load([2], train)

  def damage_and_reload(how, expected_reason):
    caplog.clear()
    compute.calls.clear()
    path = cache().path(2)
    how(path)
    with caplog.at_level("WARNING"):
      values = cache().load([1, 2], compute)
    assert compute.calls == [[2]], how
    assert values[2].shape == (5, 4) and values[2][0, 0] == 2
    assert any(path in r.getMessage() and expected_reason in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]

  changed = "the file changed after it was written"
  damage_and_reload(lambda p: shutil.copy(cache("train").path(2), p), changed)  # train's file
  damage_and_reload(lambda p: open(p, "ab").write(b"\0" * 64), changed)
  damage_and_reload(lambda p: open(p, "r+b").truncate(100), changed)
  damage_and_reload(lambda p: open(p, "wb").close(), changed)
  # Another data file under the same folder (a copied folder): every layer is computed again.
  compute.calls.clear()
  cache(sha1="d2").load([1, 2], compute)
  assert compute.calls == [[1, 2]]
  # A damaged manifest: its layers are not trusted.
  open(cache().manifest_path, "w").write("{not json")
  compute.calls.clear()
  cache(sha1="d2").load([1], compute)
  assert compute.calls == [[1]]


# ------------------------------------------------------------------------------ runs

@pytest.mark.slow
def test_a_fine_tuned_model_tags_the_same_whatever_the_order_of_labels(tmp_path, script_session):
  session = partial(run_script, "run_ner.py", shared=script_session)
  data = slice_data(tmp_path / "data", documents=3)
  trained = tmp_path / "trained"
  run_ner(*ner_args(data, trained, "--do_train", "--do_predict", "--num_train_epochs=1"),
          run=session)
  labels = json.loads((trained / "ner_labels.json").read_text())["labels"]
  assert sorted(labels) == sorted(REORDERED.split(",")) and labels != REORDERED.split(",")
  expected = (trained / "test_predictions.txt").read_text()
  # Read through the wrong order, the model's most likely label (O, on so little training)
  # would be named I-PER.
  assert REORDERED.split(",").index("O") != labels.index("O")

  # In the training folder, --labels in another order: the model's order is used.
  (trained / "test_predictions.txt").unlink()
  run_ner(*ner_args(data, trained, "--do_predict", "--labels=" + REORDERED), run=session)
  assert (trained / "test_predictions.txt").read_text() == expected

  # From its checkpoint in a new folder, predicting only: the recorded order is used.
  other = tmp_path / "other"
  args = ner_args(data, other, "--do_predict", "--labels=" + REORDERED)
  args = [a if not a.startswith("--init_checkpoint") else "--init_checkpoint=%s" % trained
          for a in args]
  run_ner(*args, run=session)
  assert (other / "test_predictions.txt").read_text() == expected

  # Fine-tuning from it with the labels in another order (learning rate 0: weights unchanged):
  # the head's rows are reordered, so the tags are the same.
  tuned = tmp_path / "tuned"
  args = ner_args(data, tuned, "--do_train", "--do_predict", "--num_train_epochs=1",
                  "--labels=" + REORDERED, "--learning_rate=0")
  args = [a if not a.startswith("--init_checkpoint") else "--init_checkpoint=%s" % trained
          for a in args]
  result = run_ner(*args, run=session)
  assert "its rows are read in this run's order %s" % REORDERED in result.stderr
  assert json.loads((tuned / "ner_labels.json").read_text())["labels"] == REORDERED.split(",")
  assert (tuned / "test_predictions.txt").read_text() == expected

  # Other labels than the model's: one line naming both.
  stderr = one_line_error(*ner_args(data, trained, "--do_eval", "--labels=O,B-PER,I-PER"),
                          run=session)
  assert "--labels=O,B-PER,I-PER are not the labels the model was trained on (%s" % (
      ",".join(labels)) in stderr

  # The run folder converts on its own, its labels named in id2label.
  result = run_script("convert_checkpoint.py", "--input=%s" % trained, "--to=hf",
                      "--output_dir=%s" % (tmp_path / "hf"))
  assert result.returncode == 0, result.stderr[-2000:]
  assert "(as recorded with the run)" in result.stdout
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert config["id2label"] == {str(i): label for i, label in enumerate(labels)}


@pytest.mark.slow
def test_the_feature_based_tagger_checks_what_it_reads(tmp_path, script_session):
  session = partial(run_script, "run_ner.py", shared=script_session)
  data = slice_data(tmp_path / "data", documents=3)
  # One 500-word sentence (no blank lines) in the training file: twice the length that is
  # warned about (the BiLSTM reads it in one pass, a step per word, forward and backward).
  with open(data / "train.txt", "a", encoding="utf-8") as f:
    f.write("\n" + "".join("w%d NN I-NP O\n" % (i % 50) for i in range(500)))
  out = tmp_path / "out"
  common = ner_args(data, out, "--approach=feature_based", "--features=last_hidden",
                    "--lstm_units=8", "--num_train_epochs=1")
  result = run_ner(*common, "--do_train", "--do_eval", "--do_predict", run=session)
  assert "a sentence of 500 words" in result.stderr
  assert "train.txt line" in result.stderr
  record = json.loads((out / "feature_based_last_hidden.json").read_text())
  assert record["lstm_units"] == 8 and record["features"] == "last_hidden"
  labels = record["labels"]
  expected = {name: (out / name).read_text() for name in ("eval_predictions.txt",
                                                           "test_predictions.txt")}
  results = read_results(out / "eval_results.txt")

  # --labels in another order reads the tagger in its own order: the same tags.
  (out / "eval_predictions.txt").unlink()
  run_ner(*common, "--do_eval", "--labels=" + ",".join(labels[::-1]), run=session)
  assert (out / "eval_predictions.txt").read_text() == expected["eval_predictions.txt"]

  # Cached features swapped in from the training split, or cut short: computed again.
  (cache,) = [p for p in (out / "bert_features").glob("*/eval_layer2.npy")]
  (train_cache,) = [p for p in (out / "bert_features").glob("*/train_layer2.npy")]
  (test_cache,) = [p for p in (out / "bert_features").glob("*/predict_layer2.npy")]
  shutil.copy(train_cache, cache)
  with open(test_cache, "r+b") as f:
    f.truncate(os.path.getsize(test_cache) // 2)
  result = run_ner(*common, "--do_eval", "--do_predict", run=session)
  assert "%s are not used: the file changed after it was written" % cache in result.stderr
  assert "%s are not used" % test_cache in result.stderr
  for name, text in expected.items():
    assert (out / name).read_text() == text, name
  assert read_results(out / "eval_results.txt") == results

  # Another --lstm_units or checkpoint than the tagger was trained with: one line each.
  stderr = one_line_error(*common, "--do_eval", "--lstm_units=16", run=session)
  assert "was trained with --lstm_units=8; this run gives --lstm_units=16" in stderr
  other_ckpt = tmp_path / "ckpt"
  shutil.copytree(os.path.dirname(TINY.ckpt), other_ckpt)
  from bert_tf import checkpoints
  _, variables = checkpoints.read_variables(TINY.ckpt)
  variables["bert/pooler/dense/bias"] = variables["bert/pooler/dense/bias"] + 1
  checkpoints.save_checkpoint(other_ckpt / "bert_model.ckpt", extra=variables)
  args = [a if not a.startswith("--init_checkpoint") else
          "--init_checkpoint=%s" % (other_ckpt / "bert_model.ckpt") for a in common]
  stderr = one_line_error(*args, "--do_eval", run=session)
  assert "was trained on the features of another BERT checkpoint" in stderr


@pytest.mark.slow
def test_evaluating_an_untagged_dev_file_is_one_line(tmp_path, script_session):
  data = slice_data(tmp_path / "data", documents=2)
  words = [line.split(" ")[0] if line.strip() else line
           for line in (data / "dev.txt").read_text().split("\n")]
  (data / "dev.txt").write_text("\n".join(words))
  stderr = one_line_error(*ner_args(data, tmp_path / "out", "--do_eval",
                                    "--labels=O,B-PER,I-PER"), run=script_session("run_ner.py"))
  assert "dev.txt line 3 has no tag column; --do_eval needs `word ... tag` lines" in stderr
