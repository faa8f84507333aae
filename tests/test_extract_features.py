"""extract_features.py: the original's JSONL layout, values, pairs and truncation, errors."""

import json
import os

import numpy as np
import pytest

from bert_tf import checkpoints, tokenization
from bert_tf.data import packing
from bert_tf.errors import UserInputError
from bert_tf.inference import feature_extraction
from bert_tf.modeling import BertModel
from helpers import (
  JSONL_ROUNDING,
  PRECISION_TOLERANCE,
  ROOT,
  TINY,
  VOCAB_UNCASED,
  assert_float32_close,
  run_script,
  tiny_config,
)


def test_record_format_hand_worked():
  line = feature_extraction.format_record(
      3, ["[CLS]", "caf\u00e9"], [-1, 0],
      [np.array([[0.1234567, -2.0000004], [1e-7, 5.5]], np.float32),
       np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)])
  assert line == (
      '{"linex_index": 3, "features": ['
      '{"token": "[CLS]", "layers": [{"index": -1, "values": [0.123457, -2.0]}, '
      '{"index": 0, "values": [1.0, 2.0]}]}, '
      '{"token": "caf\\u00e9", "layers": [{"index": -1, "values": [0.0, 5.5]}, '
      '{"index": 0, "values": [3.0, 4.0]}]}]}\n')


def test_read_examples_pairs_blank_lines_and_greedy_split(tmp_path):
  path = tmp_path / "in.txt"
  path.write_bytes(b"  one ||| two  \n\na ||| b ||| c\r\nno pair|||here\nlast")
  got = [(e.unique_id, e.text_a, e.text_b) for e in feature_extraction.read_examples(str(path))]
  assert got == [(0, "one", "two"), (1, "", None), (2, "a ||| b", "c"), (3, "no pair|||here", None),
                 (4, "last", None)]


def test_non_utf8_input_names_file_and_line(tmp_path):
  path = tmp_path / "latin1.txt"
  path.write_bytes(b"fine\ncaf\xe9\n")
  with pytest.raises(UserInputError, match=r"latin1.txt line 2 is not UTF-8"):
    feature_extraction.read_examples(str(path))


def test_layer_indexes_are_checked_like_python_list_indexing():
  assert feature_extraction.parse_layer_indexes("-1,-2,0,1", 2) == [-1, -2, 0, 1]
  for bad in ("2", "-3"):
    with pytest.raises(UserInputError, match="out of range for a 2-layer model"):
      feature_extraction.parse_layer_indexes(bad, 2)
  with pytest.raises(UserInputError, match="comma-separated integers"):
    feature_extraction.parse_layer_indexes("-1,last", 2)


def test_packing_truncates_the_longer_side_and_b_on_ties():
  tokenizer = tokenization.FullTokenizer(VOCAB_UNCASED)
  a, b = ["a"] * 5, ["b"] * 5
  packed = packing.pack_tokens(a, b, 9, tokenizer)  # 6 word pieces fit: 3 + 3
  assert packed.tokens == ["[CLS]"] + ["a"] * 3 + ["[SEP]"] + ["b"] * 3 + ["[SEP]"]
  assert packed.segment_ids == [0] * 5 + [1] * 4
  packed = packing.pack_tokens(["a"] * 7, ["b"] * 2, 9, tokenizer)
  assert packed.tokens.count("a") == 4 and packed.tokens.count("b") == 2
  packed = packing.pack_tokens(["a"] * 9, [], 6, tokenizer)  # empty b: single layout
  assert packed.tokens == ["[CLS]", "a", "a", "a", "a", "[SEP]"]
  packed = packing.pack_tokens(["a"], None, 5, tokenizer)
  assert packed.input_mask == [1, 1, 1, 0, 0] and packed.input_ids[-2:] == [0, 0]


def test_output_values_are_the_encoder_layers(tmp_path):
  tokenizer = tokenization.FullTokenizer(VOCAB_UNCASED)
  encoder = BertModel(tiny_config())
  checkpoints.load_checkpoint(TINY.ckpt, encoder)
  examples = [feature_extraction.InputExample(0, "Hello, world!", "The café is open."),
              feature_extraction.InputExample(1, "x " * 40),
              feature_extraction.InputExample(2, "")]
  out = tmp_path / "out.jsonl"
  count = feature_extraction.extract_features(encoder, tokenizer, examples, str(out), [-1, 0],
                                              max_seq_length=16, batch_size=2)
  assert count == 3 and not (tmp_path / "out.jsonl.partial").exists()
  records = [json.loads(line) for line in out.read_text().splitlines()]
  assert [r["linex_index"] for r in records] == [0, 1, 2]
  assert [f["token"] for f in records[2]["features"]] == ["[CLS]", "[SEP]"]
  assert len(records[1]["features"]) == 16  # truncated to max_seq_length
  for example, record in zip(examples, records):
    packed = feature_extraction.convert_example(example, 16, tokenizer)
    assert [f["token"] for f in record["features"]] == packed.tokens
    layers = encoder({"input_word_ids": np.array([packed.input_ids]),
                      "input_mask": np.array([packed.input_mask]),
                      "input_type_ids": np.array([packed.segment_ids])})["encoder_outputs"]
    # Rounded to 6 decimals, from batches of two (other shapes, so other kernels than one row).
    for i, feature in enumerate(record["features"]):
      assert [layer["index"] for layer in feature["layers"]] == [-1, 0]
      for values, want in zip(feature["layers"], (layers[-1][0, i], layers[0][0, i])):
        assert_float32_close(values["values"], want, ulps=16, atol=JSONL_ROUNDING)
  missing = tmp_path / "no" / "out.jsonl"
  with pytest.raises(UserInputError, match=r"^Output folder .*no does not exist \(check "
                                           r"--output_file\)\.$"):
    feature_extraction.extract_features(encoder, tokenizer, examples, str(missing), [-1],
                                        max_seq_length=16, batch_size=2)


class _LengthEmbedder:
  """A stand-in TextEmbedder: each text's vector is [len(text_a), len(text_b), 1/3]."""

  def __init__(self):
    self.calls = []

  def embed(self, texts, batch_size, texts_b=None):
    self.calls.append((list(texts), batch_size, texts_b))
    return np.array([[len(a), len(b or ""), 1 / 3] for a, b in
                     zip(texts, texts_b or [None] * len(texts))], np.float32)


def test_sentence_embeddings_are_one_whole_line_per_example(tmp_path):
  examples = [feature_extraction.InputExample(4, "ab", "cde"),
              feature_extraction.InputExample(5, "f"),
              feature_extraction.InputExample(6, "ghij")]
  out, embedder = tmp_path / "out.jsonl", _LengthEmbedder()
  assert feature_extraction.write_sentence_embeddings(embedder, examples, str(out), 2) == 3
  assert not (tmp_path / "out.jsonl.partial").exists()
  assert [json.loads(line) for line in out.read_text().splitlines()] == [
      {"linex_index": 4, "embedding": [2.0, 3.0, 0.333333]},
      {"linex_index": 5, "embedding": [1.0, 0.0, 0.333333]},
      {"linex_index": 6, "embedding": [4.0, 0.0, 0.333333]}]
  # Pairs anywhere: every batch passes second segments ("" for a single text).
  assert [c[2] for c in embedder.calls] == [["cde", ""], [""]]
  for bad, error in [(tmp_path / "no" / "out.jsonl", "Output folder "),
                     (out, "--batch_size must be positive, got 0.")]:
    with pytest.raises(UserInputError, match=error):
      feature_extraction.write_sentence_embeddings(embedder, examples, str(bad),
                                                   0 if bad == out else 2)


@pytest.mark.slow
def test_command_line_writes_jsonl_and_reports_errors_cleanly(tmp_path):
  inputs = tmp_path / "input.txt"
  inputs.write_text("Who was Jim Henson ? ||| Jim Henson was a puppeteer\n")
  out = tmp_path / "features.jsonl"
  common = ["--vocab_file=%s" % VOCAB_UNCASED, "--bert_config_file=%s" % TINY.config,
            "--init_checkpoint=%s" % TINY.ckpt, "--max_seq_length=16"]
  result = run_script("extract_features.py", "--input_file=%s" % inputs,
                      "--output_file=%s" % out, "--layers=-1", *common)
  assert result.returncode == 0, result.stderr
  record = json.loads(out.read_text())
  assert [f["token"] for f in record["features"]][:4] == ["[CLS]", "who", "was", "jim"]
  assert len(record["features"][0]["layers"][0]["values"]) == 32

  # int8 weights: close to float32, not equal.
  int8_out = tmp_path / "int8.jsonl"
  result = run_script("extract_features.py", "--input_file=%s" % inputs,
                      "--output_file=%s" % int8_out, "--layers=-1",
                      "--inference_precision=int8", *common)
  assert result.returncode == 0, result.stderr
  int8 = json.loads(int8_out.read_text())
  ours, theirs = ([f["layers"][0]["values"] for f in r["features"]] for r in (int8, record))
  diff = np.abs(np.array(ours) - np.array(theirs))
  tolerance = PRECISION_TOLERANCE["int8"]
  assert 0 < diff.max() < tolerance["sequence_output"]
  assert diff.mean() < tolerance["mean_sequence"]

  result = run_script("extract_features.py", "--input_file=%s" % (tmp_path / "missing.txt"),
                      "--output_file=%s" % out, "--layers=-1", *common)
  assert result.returncode == 2
  assert "missing.txt does not exist" in result.stderr and "Traceback" not in result.stderr
  result = run_script("extract_features.py", "--input_file=%s" % inputs,
                      "--output_file=%s" % out, "--layers=5", *common)
  assert result.returncode == 2 and "out of range for a 2-layer model" in result.stderr


@pytest.mark.slow
def test_command_line_matches_the_original_scripts_output(tmp_path):
  """Golden JSONL written by the original extract_features.py (see fixtures README)."""
  golden_dir = os.path.join(ROOT, "tests", "fixtures", "extract_features")
  out = tmp_path / "features.jsonl"
  result = run_script("extract_features.py",
                      "--input_file=%s" % os.path.join(golden_dir, "input.txt"),
                      "--output_file=%s" % out, "--vocab_file=%s" % VOCAB_UNCASED,
                      "--bert_config_file=%s" % TINY.config, "--init_checkpoint=%s" % TINY.ckpt,
                      "--do_lower_case=True", "--layers=-1,0,-2", "--max_seq_length=16",
                      "--batch_size=3")
  assert result.returncode == 0, result.stderr
  with open(os.path.join(golden_dir, "original_layers-1,0,-2_seq16.jsonl")) as f:
    golden = f.read().splitlines()
  ours = out.read_text().splitlines()
  assert len(ours) == len(golden) == 8
  for our_line, golden_line in zip(ours, golden):
    mine, theirs = json.loads(our_line), json.loads(golden_line)
    assert list(mine) == list(theirs) == ["linex_index", "features"]
    assert mine["linex_index"] == theirs["linex_index"]
    assert [f["token"] for f in mine["features"]] == [f["token"] for f in theirs["features"]]
    for a, b in zip(mine["features"], theirs["features"]):
      assert [l["index"] for l in a["layers"]] == [l["index"] for l in b["layers"]]
      for la, lb in zip(a["layers"], b["layers"]):  # both rounded to 6 decimals
        assert_float32_close(la["values"], lb["values"], ulps=16, atol=2 * JSONL_ROUNDING)
