"""Inputs a careless or unlucky user gives: each is read as the original reads it, or stops with
one message naming the file or flag, and leaves nothing half-written."""

import json
import os
import shutil

import pytest
import tensorflow as tf

from bert_tf.checkpoints import checks, run_folder, sentence_models
from bert_tf.config import BertConfig
from bert_tf.data import example_codec
from bert_tf.errors import UserInputError
from bert_tf.tasks import glue
from bert_tf.utils import user_files
from helpers import FIXTURES, TINY, VOCAB_UNCASED, run_script, tiny_config

MRPC = FIXTURES / "classifier_data" / "MRPC" / "train.tsv"


def _mrpc_examples(tmp_path, data):
  folder = tmp_path / "MRPC"
  folder.mkdir(exist_ok=True)
  (folder / "train.tsv").write_bytes(data)
  return glue.MrpcProcessor().get_train_examples(str(folder))


def test_crlf_line_endings_and_a_bom_read_like_the_plain_file(tmp_path):
  plain = MRPC.read_bytes()
  assert b"\r" not in plain
  want = glue.MrpcProcessor().get_train_examples(str(MRPC.parent))
  assert _mrpc_examples(tmp_path, plain.replace(b"\n", b"\r\n")) == want
  assert _mrpc_examples(tmp_path, b"\xef\xbb\xbf" + plain) == want
  assert not any(e.text_b.endswith("\r") for e in want)


def test_a_label_with_surrounding_whitespace_names_the_row_and_the_fix(tmp_path):
  rows = MRPC.read_bytes().split(b"\n")
  label = rows[3].split(b"\t")[0]
  rows[3] = label + b" " + rows[3][len(label):]
  with pytest.raises(UserInputError, match=r"train.tsv row 4 has label '%s ', which is not one of "
                     r"the task's labels \['0', '1'\] \(it has surrounding whitespace; remove it\)"
                     % label.decode()):
    _mrpc_examples(tmp_path, b"\n".join(rows))
  rows[3] = b"yes" + rows[3][len(label) + 1:]
  with pytest.raises(UserInputError, match=r"row 4 has label 'yes', which is not one of the "
                     r"task's labels \['0', '1'\]\.$"):
    _mrpc_examples(tmp_path, b"\n".join(rows))


def test_sts_b_score_that_is_not_a_number_names_the_row(tmp_path):
  folder = tmp_path / "STS-B"
  folder.mkdir()
  header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
  (folder / "train.tsv").write_text(header + "\n0\tg\tf\ty\t0\ts\ts\tA man.\tA dog.\t4.5\n"
                                    "1\tg\tf\ty\t1\ts\ts\tA cat.\tA car.\tn/a\n")
  with pytest.raises(UserInputError, match="train.tsv row 3: could not convert string to float"):
    glue.StsbProcessor().get_train_examples(str(folder))


def test_user_files_name_the_file_and_the_problem(tmp_path):
  (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf[PAD]\nx\n")
  assert user_files.read_text(tmp_path / "bom.txt", "Vocab file") == "[PAD]\nx\n"
  with pytest.raises(UserInputError, match=r"Vocab file .*missing.txt does not exist \(check "
                     r"--vocab_file\)\.$"):
    user_files.read_text(tmp_path / "missing.txt", "Vocab file", "(check --vocab_file)")
  with pytest.raises(UserInputError, match="SQuAD file .* is a folder, not a file"):
    user_files.read_text(tmp_path, "SQuAD file")
  with pytest.raises(UserInputError, match="part of its path is a file, not a folder"):
    user_files.read_text(tmp_path / "bom.txt" / "train.tsv", "Data file")
  (tmp_path / "latin1.tsv").write_bytes("a\tb\ncaf\xe9\n".encode("latin-1"))
  with pytest.raises(UserInputError, match="latin1.tsv is not UTF-8 text \\(bad byte at line 2\\)"):
    user_files.read_text(tmp_path / "latin1.tsv", "Data file")


def test_unreadable_file_names_the_permission(tmp_path, monkeypatch):
  def denied(path, mode="r"):
    raise PermissionError(13, "Permission denied", path)

  monkeypatch.setattr("builtins.open", denied)  # root reads any file; a user would be refused
  with pytest.raises(UserInputError, match="vocab.txt cannot be read: permission denied"):
    user_files.read_text(tmp_path / "vocab.txt", "Vocab file")


def test_output_dir_that_is_a_file_or_not_writable_stops_up_front(tmp_path, monkeypatch):
  a_file = tmp_path / "out"
  a_file.write_text("")
  with pytest.raises(UserInputError, match=r"--output_dir=.*out is a file; pass a folder\."):
    run_folder.make_output_dir(str(a_file))
  run_folder.make_output_dir(str(tmp_path / "new" / "out"))
  assert os.listdir(tmp_path / "new" / "out") == []  # the write probe is gone

  def read_only(*unused_args, **unused_kwargs):
    raise tf.errors.PermissionDeniedError(None, None, "/ro/out/.probe; Read-only file system")

  monkeypatch.setattr(tf.io.gfile, "GFile", read_only)
  with pytest.raises(UserInputError, match="--output_dir=.* is not writable: .*Read-only file "
                     "system. Pick a folder you can write to."):
    run_folder.make_output_dir(str(tmp_path / "ro"))


def test_a_full_disk_while_writing_records_leaves_no_file(tmp_path):
  class FullDisk:
    def __init__(self, path):
      self.path = path
      open(path, "wb").close()

    def write(self, record):
      raise tf.errors.ResourceExhaustedError(None, None, self.path + "; No space left on device")

    def close(self):
      pass

  assert example_codec.write_records(str(tmp_path / "x.tf_record"), [b"r"]) == 1  # a real disk
  writer = example_codec.ExampleFileWriter([str(tmp_path / "train.tf_record")])
  writer.writers = [FullDisk(writer.temporary[0])]
  with pytest.raises(UserInputError, match=r"Writing .*train.tf_record failed: No space left on "
                     r"device\. Nothing was kept; free space"):
    with writer:
      writer.write(b"record")
  assert sorted(os.listdir(tmp_path)) == ["x.tf_record"]


@pytest.mark.slow
def test_runner_paths_checked_before_any_file_is_written(tmp_path):
  """Each case: exit 2, one line naming the path, no traceback, nothing in --output_dir."""
  base = ["run_classifier.py", "--task_name=MRPC",
          "--bert_config_file=%s" % TINY.config, "--vocab_file=%s" % VOCAB_UNCASED,
          "--data_dir=%s" % MRPC.parent, "--max_seq_length=32", "--do_train"]
  empty = tmp_path / "empty"
  empty.mkdir()
  cases = [
      (["--init_checkpoint=%s" % empty], "empty holds no checkpoint"),
      (["--init_checkpoint=%s" % TINY.ckpt, "--data_dir=%s" % MRPC],
       "train.tsv does not exist: part of its path is a file"),
      (["--init_checkpoint=%s" % TINY.ckpt, "--bert_config_file=%s" % empty],
       "BERT config file %s is a folder, not a file" % empty),
  ]
  for extra, message in cases:
    out = tmp_path / "out"
    result = run_script(*base, *extra, "--output_dir=%s" % out)
    assert result.returncode == 2, result.stderr[-2000:]
    assert message in result.stderr.strip().splitlines()[-1] and "Traceback" not in result.stderr
    assert not out.exists() or os.listdir(out) == []


def _ltr_run_folder(folder, settings=True, config=True):
  """A run_pretraining --pretraining_objective=ltr --output_dir as it is left: model.ckpt-2
  (the weights carry no trace of the mask; the tiny checkpoint's serve), the causal
  bert_config.json beside it and training_state/settings.json with the config it trained."""
  folder.mkdir()
  for suffix in (".index", ".data-00000-of-00001"):
    shutil.copy(TINY.ckpt + suffix, str(folder / ("model.ckpt-2" + suffix)))
  causal = BertConfig.from_dict(dict(tiny_config().to_dict(), causal_attention=True))
  if config:
    (folder / "bert_config.json").write_text(causal.to_json_string())
  if settings:
    (folder / "training_state").mkdir()
    (folder / "training_state" / "settings.json").write_text(json.dumps(
        {"bert_config": causal.to_dict(), "pretraining_objective": "ltr"}))
  return str(folder / "model.ckpt-2"), str(folder / "bert_config.json"), causal


def test_causal_attention_of_the_config_and_the_checkpoint_must_agree(tmp_path, caplog):
  ltr, ltr_config, causal = _ltr_run_folder(tmp_path / "ltr")
  plain = tiny_config()
  with pytest.raises(UserInputError) as info:
    checks.check_causal_attention(ltr, plain, TINY.config)
  assert str(info.value) == (
      "--init_checkpoint=%s is a left-to-right model (causal_attention: true in %s) but "
      "--bert_config_file=%s has no causal_attention, so its weights would run bidirectionally; "
      "pass --bert_config_file=%s (the paper fine-tunes its LTR model left-to-right, Table 5)." %
      (ltr, tmp_path / "ltr" / "training_state" / "settings.json", TINY.config, ltr_config))
  checks.check_causal_attention(ltr, causal, ltr_config)  # the paper's way: no message
  # The other way round: a Google release's bidirectional weights under a causal config.
  with pytest.raises(UserInputError, match=r"^--init_checkpoint=%s was trained bidirectionally "
                     r"\(no causal_attention in %s\) but --bert_config_file=%s has "
                     r"causal_attention: true, so its weights would run under a left-to-right "
                     r"mask they never saw; pass --bert_config_file=%s, or start from a "
                     r"checkpoint pre-trained with --pretraining_objective=ltr\.$" %
                     (TINY.ckpt, TINY.config, ltr_config, TINY.config)):
    checks.check_causal_attention(TINY.ckpt, causal, ltr_config)
  # Only the config beside it, or only the settings (a copied folder): still known.
  only_config, _, _ = _ltr_run_folder(tmp_path / "config_only", settings=False)
  with pytest.raises(UserInputError, match="causal_attention: true in .*config_only/bert_config"):
    checks.check_causal_attention(only_config, plain, TINY.config)
  only_settings, _, _ = _ltr_run_folder(tmp_path / "settings_only", config=False)
  with pytest.raises(UserInputError, match='settings.json.*; set "causal_attention": true in it'):
    checks.check_causal_attention(only_settings, plain, TINY.config)
  # run_pretraining --pretraining_objective=ltr from a bidirectional checkpoint: the runner
  # makes the config causal itself (TINY.config is not), which is a warning, not an error.
  with caplog.at_level("WARNING"):
    checks.check_causal_attention(TINY.ckpt, causal, TINY.config)
  assert [r.getMessage() for r in caplog.records] == [
      "--init_checkpoint=%s was trained bidirectionally (no causal_attention in %s); this run "
      "makes the encoder left-to-right, so it starts from weights trained without that mask." %
      (TINY.ckpt, TINY.config)]
  empty = tmp_path / "bare"
  empty.mkdir()
  for suffix in (".index", ".data-00000-of-00001"):
    shutil.copy(TINY.ckpt + suffix, str(empty / ("bert_model.ckpt" + suffix)))
  checks.check_causal_attention(str(empty / "bert_model.ckpt"), causal, ltr_config)  # unknown


@pytest.mark.slow
def test_run_classifier_refuses_an_ltr_checkpoint_with_a_bidirectional_config(tmp_path):
  ltr, ltr_config, _ = _ltr_run_folder(tmp_path / "ltr")
  out = tmp_path / "out"
  result = run_script("run_classifier.py", "--task_name=MRPC",
                      "--bert_config_file=%s" % TINY.config, "--vocab_file=%s" % VOCAB_UNCASED,
                      "--data_dir=%s" % MRPC.parent, "--max_seq_length=32", "--do_train",
                      "--init_checkpoint=%s" % ltr, "--output_dir=%s" % out)
  assert result.returncode == 2, result.stderr[-2000:]
  last = result.stderr.strip().splitlines()[-1]
  assert last == (
      "error: --init_checkpoint=%s is a left-to-right model (causal_attention: true in %s) but "
      "--bert_config_file=%s has no causal_attention, so its weights would run bidirectionally; "
      "pass --bert_config_file=%s (the paper fine-tunes its LTR model left-to-right, Table 5)." %
      (ltr, tmp_path / "ltr" / "training_state" / "settings.json", TINY.config, ltr_config))
  assert "Traceback" not in result.stderr
  assert not out.exists() or os.listdir(out) == []


def _st_folder(tmp_path, max_seq_length):
  from test_text_embedder import write_st_folder
  return write_st_folder(tmp_path / "st", sbert={"max_seq_length": max_seq_length})


def test_sentence_bert_max_seq_length_past_the_position_table_is_a_warning(tmp_path, caplog):
  """sentence-transformers loads such a folder and embeds every text of up to 40 pieces as
  bert_tf does at 40 (a longer one fails there on the position table), so it is not an error:
  the folder's value is logged with the one used."""
  folder = _st_folder(tmp_path, 10000)
  with caplog.at_level("WARNING"):
    model = sentence_models.read_sentence_model(folder)
  assert model.max_seq_length == 40  # the tiny HF config's max_position_embeddings
  assert [r.getMessage() for r in caplog.records] == [
      "%s: max_seq_length 10000 exceeds max_position_embeddings 40 of %s; using 40 (longer "
      "texts are cut there; sentence-transformers fails on them)." %
      (os.path.join(folder, "sentence_bert_config.json"), os.path.join(folder, "config.json"))]
  caplog.clear()
  with caplog.at_level("WARNING"):
    assert sentence_models.read_sentence_model(_st_folder(tmp_path / "b", 40)).max_seq_length == 40
  assert not caplog.records


@pytest.mark.slow
def test_export_text_embedder_logs_the_capped_max_seq_length(tmp_path):
  folder = _st_folder(tmp_path, 10000)
  result = run_script("export_text_embedder.py", "--model_dir=%s" % folder,
                      "--export_dir=%s" % (tmp_path / "export"))
  assert result.returncode == 0, result.stderr[-2000:]
  assert ("sentence_bert_config.json: max_seq_length 10000 exceeds max_position_embeddings 40 of "
          "%s; using 40" % os.path.join(folder, "config.json")) in result.stderr
  metadata = json.loads((tmp_path / "export" / "assets.extra" / "bert_tf_export.json").read_text())
  assert metadata["max_seq_length"] == 40
