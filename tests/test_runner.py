"""The shared runner skeleton: every runner gets every up-front check, before any work.

Each case runs a real runner script and expects exit status 2, one message naming the
flag or file, no traceback, and no feature file, checkpoint or export written.
"""

import os
import subprocess
import sys

import pytest

from conftest import FIXTURES, TINY_CKPT, TINY_CONFIG, VOCAB_UNCASED

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = ["--bert_config_file=%s" % TINY_CONFIG, "--vocab_file=%s" % VOCAB_UNCASED,
         "--init_checkpoint=%s" % TINY_CKPT]
RUNNERS = {
    "run_classifier.py": ["--task_name=MRPC", "--data_dir=%s" % (FIXTURES / "classifier_data" /
                                                                 "MRPC"), "--max_seq_length=32"],
    "run_squad.py": ["--train_file=%s" % (FIXTURES / "squad" / "squad_v1_tiny.json"),
                     "--max_seq_length=64", "--max_query_length=16", "--doc_stride=32"],
    "run_swag.py": ["--data_dir=%s" % (FIXTURES / "swag"), "--max_seq_length=32"],
}


def _run(script, tmp_path, *args):
  out = tmp_path / "out"
  result = subprocess.run([sys.executable, os.path.join(ROOT, script), *MODEL, *RUNNERS[script],
                           "--output_dir=%s" % out, "--do_train", "--train_batch_size=4",
                           *args], capture_output=True, text=True, timeout=300)
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
     "--max_seq_length=65 exceeds max_position_embeddings=64"),
    ("run_swag.py", ["--max_seq_length=65"], "--max_seq_length=65 exceeds"),
    ("run_classifier.py", ["--max_seq_length=2"], "--max_seq_length=2 is too small"),
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
  (data / "train.tsv").write_bytes((FIXTURES / "classifier_data" / "MRPC" / "train.tsv").read_bytes())
  result, written = _run("run_classifier.py", tmp_path, "--do_eval", "--data_dir=%s" % data)
  assert result.returncode == 2 and "dev.tsv does not exist" in result.stderr
  assert written == []


@pytest.mark.slow
def test_a_vocab_larger_than_the_config_is_refused(tmp_path):
  small = tmp_path / "bert_config.json"
  small.write_text(open(TINY_CONFIG).read().replace('"vocab_size": 30522', '"vocab_size": 1000'))
  result, written = _run("run_squad.py", tmp_path, "--bert_config_file=%s" % small)
  assert result.returncode == 2
  assert "has 30522 tokens but vocab_size=1000" in result.stderr
  assert written == []
