"""run_swag: features for a hand-worked example, CSV errors, training, checkpoint layout."""

import csv
import shutil

import pytest
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.errors import UserInputError
from bert_tf.tasks import swag
from helpers import FIXTURES, PROGRAMS, TINY, VOCAB_UNCASED, printed_json, run_script, tiny_config

HEADER = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0",
          "ending1", "ending2", "ending3", "label"]


def _write(path, rows, header=HEADER):
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(header)
    writer.writerows(rows)


def test_features_hand_worked(tmp_path):
  _write(tmp_path / "x.csv", [["v", "3", "The cat sat. It", "The cat sat.", "It", "gold",
                               "slept", "ran away quickly", "ate", "flew", "0"]])
  (example,) = swag.read_swag_examples(str(tmp_path / "x.csv"), True)
  assert (example.swag_id, example.context, example.label) == ("v-3", "The cat sat. It", 0)
  tokenizer = tokenization.FullTokenizer(VOCAB_UNCASED)
  ids, mask, segments, label = swag.convert_example(example, 9, tokenizer)
  assert len(ids) == len(mask) == len(segments) == 4 * 9 and label == 0
  choice = lambda values, i: values[9 * i:9 * (i + 1)]
  # [CLS] the cat sat . it [SEP] slept [SEP]: 9 tokens exactly, nothing truncated
  assert tokenizer.convert_ids_to_tokens(choice(ids, 0)) == [
      "[CLS]", "the", "cat", "sat", ".", "it", "[SEP]", "slept", "[SEP]"]
  assert choice(segments, 0) == [0] * 7 + [1] * 2
  # 6 pieces for the pair: context 5 -> 3 (longer side popped), ending 3 kept
  assert tokenizer.convert_ids_to_tokens(choice(ids, 1)) == [
      "[CLS]", "the", "cat", "sat", "[SEP]", "ran", "away", "quickly", "[SEP]"]
  assert choice(mask, 2) == [1] * 9  # [CLS] the cat sat . it [SEP] ate [SEP]


@pytest.mark.parametrize("row, message", [
    (["v", "1", "s", "s1", "s2", "gold", "a", "", "c", "d", "0"], r"x.csv line 2: an ending is"),
    (["v", "1", "s", "s1", "s2", "gold", "a", "b", "c", "d", "4"],
     r"x.csv line 2: label '4' is not"),
])
def test_bad_rows_name_the_line(tmp_path, row, message):
  _write(tmp_path / "x.csv", [row])
  with pytest.raises(UserInputError, match=message):
    swag.read_swag_examples(str(tmp_path / "x.csv"), True)


def test_empty_and_malformed_files(tmp_path):
  (tmp_path / "empty.csv").write_text("")
  with pytest.raises(UserInputError, match="empty.csv has no rows"):
    swag.read_swag_examples(str(tmp_path / "empty.csv"), True)
  _write(tmp_path / "nolabel.csv", [["v", "1", "s", "s1", "s2", "g", "a", "b", "c", "d"]],
         header=HEADER[:-1])
  with pytest.raises(UserInputError, match="lacks column\\(s\\) label"):
    swag.read_swag_examples(str(tmp_path / "nolabel.csv"), True)
  assert swag.read_swag_examples(str(tmp_path / "nolabel.csv"), False)[0].label is None


def _run(*args):
  return run_script("run_swag.py", *args)


@pytest.mark.slow
def test_training_lowers_the_loss_and_stores_the_head_under_its_documented_name(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  shutil.copy(FIXTURES / "swag" / "train.csv", data / "train.csv")
  shutil.copy(FIXTURES / "swag" / "train.csv", data / "val.csv")
  with open(FIXTURES / "swag" / "train.csv", newline="") as f:
    rows = list(csv.reader(f))
  _write(data / "test.csv", [r[:-1] for r in rows[1:4]], header=rows[0][:-1])
  common = ["--data_dir=%s" % data, "--vocab_file=%s" % VOCAB_UNCASED,
            "--bert_config_file=%s" % TINY.config, "--init_checkpoint=%s" % TINY.ckpt,
            "--max_seq_length=48", "--eval_batch_size=8"]
  before = _run(*common, "--do_eval", "--output_dir=%s" % (tmp_path / "before"))
  assert before.returncode == 0, before.stderr
  after = _run(*common, "--do_train", "--do_eval", "--do_predict", "--train_batch_size=8",
               "--num_train_epochs=6", "--learning_rate=2e-3",
               "--output_dir=%s" % (tmp_path / "after"))
  assert after.returncode == 0, after.stderr
  read = lambda p: dict(l.split(" = ") for l in open(p).read().splitlines())
  r0 = read(tmp_path / "before" / "eval_results.txt")
  r1 = read(tmp_path / "after" / "eval_results.txt")
  assert sorted(r1) == ["eval_accuracy", "eval_loss", "global_step", "loss"]
  assert float(r1["eval_loss"]) < float(r0["eval_loss"])
  lines = (tmp_path / "after" / "test_results.tsv").read_text().splitlines()
  assert len(lines) == 3 and all(len(l.split("\t")) == 4 for l in lines)
  checkpoint = tf.train.latest_checkpoint(str(tmp_path / "after"))
  shapes = tf.train.load_checkpoint(checkpoint).get_variable_to_shape_map()
  assert shapes["cls/swag/output_weights"] == [1, 32]


@pytest.mark.slow
def test_export_answers_raw_text_like_the_python_path_in_a_fresh_process(tmp_path):
  import json

  import numpy as np

  from bert_tf import checkpoints
  from bert_tf.tasks.swag.export import export_swag
  model = swag.MultipleChoiceModel(tiny_config(), dynamic_length=True)  # the reference: full 32
  encoder, head = model.encoder, model.choice
  checkpoints.load_checkpoint(TINY.ckpt, encoder)
  export_swag(str(tmp_path / "export"), model, VOCAB_UNCASED, True, 32)
  example = swag.SwagExample("x", "The cat sat on the mat. Then it",
                             ["slept.", "ran away.", "", "caf\u00e9 \u4e2d"], 0)
  tokenizer = tokenization.FullTokenizer(VOCAB_UNCASED)
  ids, mask, segments, _ = swag.convert_example(example, 32, tokenizer)
  pooled = encoder({"input_word_ids": np.reshape(ids, (4, 32)),
                    "input_mask": np.reshape(mask, (4, 32)),
                    "input_type_ids": np.reshape(segments, (4, 32))})["pooled_output"]
  want = tf.nn.softmax(head(pooled, num_choices=4)).numpy()[0]
  texts = {"context": [example.context, ""],
           **{"ending%d" % i: [example.endings[i], "x"] for i in range(4)}}
  got = printed_json(run_script(PROGRAMS + "serve_signature.py", json.dumps(texts),
                                tmp_path / "export", isolated=True,
                                cwd=tmp_path))["probabilities"]
  np.testing.assert_allclose(got[0], want, atol=1e-5)
  assert abs(sum(got[1]) - 1) < 1e-5


@pytest.mark.slow
def test_run_swag_export_dir(tmp_path):
  from bert_tf import export
  result = _run("--data_dir=%s" % tmp_path, "--vocab_file=%s" % VOCAB_UNCASED,
                "--bert_config_file=%s" % TINY.config, "--init_checkpoint=%s" % TINY.ckpt,
                "--max_seq_length=32", "--export_dir=%s" % (tmp_path / "export"),
                "--output_dir=%s" % (tmp_path / "out"))
  assert result.returncode == 0, result.stderr
  assert export.read_metadata(str(tmp_path / "export"))["task"] == "multiple_choice"
