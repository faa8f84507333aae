"""create_pretraining_data: the original's records for the same corpus, flags and seed."""

import json
import random

import pytest
import tensorflow as tf

from bert_tf import example_codec, pretraining_data, tokenization
from bert_tf.errors import UserInputError
from conftest import FIXTURES, VOCAB_UNCASED
from helpers import run_script

DATA = FIXTURES / "pretraining_data"
CORPUS = str(DATA / "corpus.txt")


def _parsed(path):
  return [example_codec.parse_example(r.numpy()) for r in tf.data.TFRecordDataset(str(path))]


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case=True)


def _generate(tokenizer, output_files, **overrides):
  options = dict(max_seq_length=128, dupe_factor=2, short_seq_prob=0.1, masked_lm_prob=0.15,
                 max_predictions_per_seq=20, rng=pretraining_data.new_rng(12345))
  options.update(overrides)
  instances = pretraining_data.create_training_instances([CORPUS], tokenizer, **options)
  pretraining_data.write_instance_to_example_files(
      instances, tokenizer, options["max_seq_length"], options["max_predictions_per_seq"],
      [str(f) for f in output_files])
  return instances


def test_records_equal_the_originals(tokenizer, tmp_path):
  out = tmp_path / "a.tfrecord"
  _generate(tokenizer, [out])
  ours, original = _parsed(out), _parsed(DATA / "a_seq128.tfrecord")
  assert len(original) == 354
  assert ours == original
  first5 = json.loads((DATA / "a_seq128_first5.json").read_text())
  assert first5["total_records"] == len(ours)
  for record, want in zip(ours, first5["first5"]):
    for key in ("input_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"):
      assert record[key] == list(want[key]) if isinstance(want[key], list) else [want[key]]


def test_round_robin_over_output_files(tokenizer, tmp_path):
  files = [tmp_path / "x.tfrecord", tmp_path / "y.tfrecord", tmp_path / "z.tfrecord"]
  _generate(tokenizer, files)
  parts = [_parsed(f) for f in files]
  original = _parsed(DATA / "a_seq128.tfrecord")
  assert [len(p) for p in parts] == [118, 118, 118]
  assert parts[1] == original[1::3] and parts[2] == original[2::3]
  assert not list(tmp_path.glob("*.partial"))


def test_encoding_parses_like_a_protobuf_built_example():
  serialized = example_codec.encode_example([
      ("ids", example_codec.int64_feature([0, 1, 127, 128, 300000, 2 ** 40, -3])),
      ("w", example_codec.float_feature([1.0, 0.0, -2.5])),
      ("empty", example_codec.int64_feature([]))])
  want = tf.train.Example(features=tf.train.Features(feature={
      "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[0, 1, 127, 128, 300000,
                                                                   2 ** 40, -3])),
      "w": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 0.0, -2.5])),
      "empty": tf.train.Feature(int64_list=tf.train.Int64List(value=[]))}))
  assert tf.train.Example.FromString(serialized) == want


def test_whole_word_masking_masks_whole_words_and_stays_within_budget(tokenizer):
  instances = pretraining_data.create_training_instances(
      [CORPUS], tokenizer, 64, 1, 0.1, 0.15, 10, pretraining_data.new_rng(7),
      do_whole_word_mask=True)
  assert instances
  for inst in instances:
    assert len(inst.masked_lm_positions) <= 10
    assert inst.masked_lm_positions == sorted(inst.masked_lm_positions)
    masked = set(inst.masked_lm_positions)
    for p in masked:  # a masked "##" piece implies the piece before it is masked too
      if inst.masked_lm_labels[inst.masked_lm_positions.index(p)].startswith("##"):
        previous = p - 1  # the original groups across [SEP]: b may start with "##"
        while previous > 0 and inst.tokens[previous] in ("[CLS]", "[SEP]"):
          previous -= 1
        assert previous == 0 or previous in masked  # at the start it opens its own group
    assert inst.tokens[0] == "[CLS]" and inst.tokens.count("[SEP]") == 2
    assert len(inst.tokens) <= 64 and len(inst.tokens) == len(inst.segment_ids)


def test_masking_replacement_proportions_hand_checked():
  """80% [MASK], 10% kept, 10% random vocab word, over many draws."""
  rng = random.Random(0)
  vocab = ["[PAD]", "w1", "w2", "w3"]
  tokens = ["[CLS]"] + ["tok%d" % i for i in range(200)] + ["[SEP]"]
  counts = {"mask": 0, "kept": 0, "random": 0}
  for _ in range(200):
    out, positions, labels = pretraining_data.create_masked_lm_predictions(
        tokens, 0.15, 1000, vocab, rng)
    assert len(positions) == round(len(tokens) * 0.15)
    for p, label in zip(positions, labels):
      assert tokens[p] == label
      key = "mask" if out[p] == "[MASK]" else "kept" if out[p] == label else "random"
      counts[key] += 1
  total = sum(counts.values())
  assert abs(counts["mask"] / total - 0.8) < 0.02
  assert abs(counts["kept"] / total - 0.1) < 0.02
  assert abs(counts["random"] / total - 0.1) < 0.02


def test_streaming_mode_with_one_big_shard_equals_the_faithful_mode(tokenizer, tmp_path):
  out = tmp_path / "s.tfrecord"
  pretraining_data.write_sharded([CORPUS], [str(out)], 10_000, tokenizer, 128, 2, 0.1, 0.15, 20,
                                 pretraining_data.new_rng(12345))
  assert _parsed(out) == _parsed(DATA / "a_seq128.tfrecord")
  small = tmp_path / "small.tfrecord"
  count = pretraining_data.write_sharded([CORPUS], [str(small)], 5, tokenizer, 128, 1, 0.1, 0.15,
                                         20, pretraining_data.new_rng(1))
  records = _parsed(small)
  assert count == len(records) > 100
  assert all(len(r["input_ids"]) == 128 and len(r["masked_lm_ids"]) == 20 for r in records)


def test_non_utf8_corpus_names_the_line(tokenizer, tmp_path):
  bad = tmp_path / "bad.txt"
  bad.write_bytes(b"Good line.\n\nAnother caf\xe9.\n")
  with pytest.raises(UserInputError, match=r"bad.txt line 3 is not UTF-8"):
    pretraining_data.read_documents([str(bad)], tokenizer)


@pytest.mark.slow
def test_command_line_with_original_flags(tmp_path):
  out = tmp_path / "a.tfrecord"
  result = run_script("create_pretraining_data.py", "--input_file=%s" % CORPUS,
                      "--output_file=%s" % out, "--vocab_file=%s" % VOCAB_UNCASED,
                      "--do_lower_case=True", "--max_seq_length=128",
                      "--max_predictions_per_seq=20", "--masked_lm_prob=0.15", "--dupe_factor=2",
                      "--random_seed=12345", "--short_seq_prob=0.1", "--do_whole_word_mask=False")
  assert result.returncode == 0, result.stderr
  assert "writing: 354/354 records" in result.stderr
  assert _parsed(out) == _parsed(DATA / "a_seq128.tfrecord")
  result = run_script("create_pretraining_data.py",
                      "--input_file=%s" % (tmp_path / "nothing*.txt"), "--output_file=%s" % out,
                      "--vocab_file=%s" % VOCAB_UNCASED)
  assert result.returncode == 2 and "No file matches --input_file pattern" in result.stderr


def test_a_file_without_text_is_an_error_naming_it(tokenizer, tmp_path):
  empty = tmp_path / "empty.txt"
  empty.write_bytes(b"")
  blank = tmp_path / "blank.txt"
  blank.write_text("\n  \n\u200b\n\n", encoding="utf-8")  # a zero-width space tokenizes to nothing
  for bad in (empty, blank):
    with pytest.raises(UserInputError, match=r"Input file %s has no text to make pretraining "
                       r"examples from .* remove it from --input_file\." % bad):
      pretraining_data.read_documents([CORPUS, str(bad)], tokenizer)
    assert not pretraining_data.has_text(str(bad), tokenizer)
  assert pretraining_data.has_text(CORPUS, tokenizer)
  # Streaming mode has written records of the good file by then: they are removed too.
  out = tmp_path / "s.tfrecord"
  with pytest.raises(UserInputError, match="blank.txt has no text"):
    pretraining_data.write_sharded([CORPUS, str(blank)], [str(out)], 5, tokenizer, 128, 1, 0.1,
                                   0.15, 20, pretraining_data.new_rng(1))
  assert sorted(p.name for p in tmp_path.iterdir()) == ["blank.txt", "empty.txt"]


@pytest.mark.slow
def test_command_line_stops_on_a_file_without_text_and_writes_nothing(tmp_path):
  empty = tmp_path / "empty.txt"
  empty.write_bytes(b"\n\n")
  out = tmp_path / "out"
  out.mkdir()
  for extra in ([], ["--documents_per_shard=3"]):
    result = run_script("create_pretraining_data.py", "--input_file=%s,%s" % (CORPUS, empty),
                        "--output_file=%s" % (out / "a.tfrecord"),
                        "--vocab_file=%s" % VOCAB_UNCASED, "--dupe_factor=1", *extra)
    assert result.returncode == 2, result.stderr
    errors = [l for l in result.stderr.splitlines() if l.startswith("error: ")]
    assert errors == ["error: Input file %s has no text to make pretraining examples from (it is "
                      "empty, or every line is blank or tokenizes to nothing); remove it from "
                      "--input_file." % empty]
    assert "Traceback" not in result.stderr
    assert not list(out.iterdir())
