"""Inputs a careless or unlucky user gives: each is read as the original reads it, or stops with
one message naming the file or flag, and leaves nothing half-written."""

import os
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf import example_codec, runner, user_files
from bert_tf.errors import UserInputError
from bert_tf.tasks import glue
from conftest import FIXTURES, TINY_CKPT, TINY_CONFIG, VOCAB_UNCASED

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
    runner.make_output_dir(str(a_file))
  runner.make_output_dir(str(tmp_path / "new" / "out"))
  assert os.listdir(tmp_path / "new" / "out") == []  # the write probe is gone

  def read_only(*unused_args, **unused_kwargs):
    raise tf.errors.PermissionDeniedError(None, None, "/ro/out/.probe; Read-only file system")

  monkeypatch.setattr(tf.io.gfile, "GFile", read_only)
  with pytest.raises(UserInputError, match="--output_dir=.* is not writable: .*Read-only file "
                     "system. Pick a folder you can write to."):
    runner.make_output_dir(str(tmp_path / "ro"))


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
    try:
      writer.write(b"record")
    finally:
      writer.abort()
  assert sorted(os.listdir(tmp_path)) == ["x.tf_record"]


@pytest.mark.slow
def test_runner_paths_checked_before_any_file_is_written(tmp_path):
  """Each case: exit 2, one line naming the path, no traceback, nothing in --output_dir."""
  base = [sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=MRPC",
          "--bert_config_file=%s" % TINY_CONFIG, "--vocab_file=%s" % VOCAB_UNCASED,
          "--data_dir=%s" % MRPC.parent, "--max_seq_length=32", "--do_train"]
  empty = tmp_path / "empty"
  empty.mkdir()
  cases = [
      (["--init_checkpoint=%s" % empty], "empty holds no checkpoint"),
      (["--init_checkpoint=%s" % TINY_CKPT, "--data_dir=%s" % MRPC],
       "train.tsv does not exist: part of its path is a file"),
      (["--init_checkpoint=%s" % TINY_CKPT, "--bert_config_file=%s" % empty],
       "BERT config file %s is a folder, not a file" % empty),
  ]
  for extra, message in cases:
    out = tmp_path / "out"
    result = subprocess.run(base + extra + ["--output_dir=%s" % out], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    assert message in result.stderr.strip().splitlines()[-1] and "Traceback" not in result.stderr
    assert not out.exists() or os.listdir(out) == []
