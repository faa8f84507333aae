"""FullTokenizer against the original's outputs on every golden text x 3 configs."""

import json

import pytest

from bert_tf import tokenization
from bert_tf.errors import UserInputError
from conftest import FIXTURES, VOCAB_UNCASED

GOLDEN = json.loads((FIXTURES / "tokenization" / "tokenization_golden.json").read_text("utf-8"))
VOCABS = {
    "vocab_uncased.txt": VOCAB_UNCASED,
    "vocab_cased_synthetic.txt": str(FIXTURES / "tokenization" / "vocab_cased_synthetic.txt"),
}


def _tokenizers():
  return {
      c["name"]: tokenization.FullTokenizer(VOCABS[c["vocab_file"]], c["do_lower_case"])
      for c in GOLDEN["configs"]
  }


@pytest.fixture(scope="module")
def tokenizers():
  return _tokenizers()


@pytest.mark.parametrize("config", [c["name"] for c in GOLDEN["configs"]])
def test_full_tokenizer_matches_original_on_every_case(tokenizers, config):
  tokenizer = tokenizers[config]
  assert len(GOLDEN["cases"]) >= 100
  mismatches = []
  for case in GOLDEN["cases"]:
    want = case["results"][config]
    basic = tokenizer.basic_tokenizer.tokenize(case["text"])
    tokens = tokenizer.tokenize(case["text"])
    ids = tokenizer.convert_tokens_to_ids(tokens)
    if (basic, tokens, ids) != (want["basic_tokens"], want["tokens"], want["ids"]):
      mismatches.append((case["text"][:40], tokens[:8], want["tokens"][:8]))
  assert not mismatches


def test_hand_worked_quirks():
  tok = tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case=True)
  # Hangul decomposes into jamo under lower-casing.
  assert tok.tokenize("한") == ["ᄒ", "##ᅡ", "##ᆫ"]
  # Cf characters are deleted without a space; U+2028 still splits words.
  assert tok.basic_tokenizer.tokenize("zero\u200bwidth a\u2028b") == ["zerowidth", "a", "b"]
  # Every ASCII non-alphanumeric is punctuation; € is not.
  assert tok.basic_tokenizer.tokenize("a$b €85") == ["a", "$", "b", "€85"]
  # 200 characters are still split; 201 become [UNK].
  assert tok.tokenize("a" * 201) == ["[UNK]"]
  assert tok.tokenize("a" * 200) != ["[UNK]"]
  # bytes are UTF-8 with invalid bytes dropped.
  assert tok.tokenize(b"caf\xc3\xa9 \xff") == ["cafe"]


def test_validate_case_matches_checkpoint_messages():
  cases = json.loads((FIXTURES / "tokenization" /
                      "validate_case_matches_checkpoint.json").read_text("utf-8"))
  assert len(cases) == 18
  for case in cases:
    if case["error"] is None:
      tokenization.validate_case_matches_checkpoint(case["do_lower_case"], case["init_checkpoint"])
    else:
      with pytest.raises(ValueError) as err:
        tokenization.validate_case_matches_checkpoint(case["do_lower_case"],
                                                      case["init_checkpoint"])
      assert str(err.value) == case["error"]


def test_load_vocab_layout(tmp_path):
  path = tmp_path / "v.txt"
  path.write_bytes(b"[PAD]\n tok \r\n\nx\ntok\nlast")
  vocab = tokenization.load_vocab(str(path))
  assert list(vocab.items()) == [("[PAD]", 0), ("tok", 4), ("", 2), ("x", 3), ("last", 5)]


def test_vocab_errors_name_the_file(tmp_path):
  with pytest.raises(UserInputError, match="missing.txt does not exist"):
    tokenization.load_vocab(str(tmp_path / "missing.txt"))
  bad = tmp_path / "latin1.txt"
  bad.write_bytes(b"[UNK]\ncaf\xe9\n")
  with pytest.raises(UserInputError, match=r"latin1.txt is not UTF-8 text \(bad byte at line 2\)"):
    tokenization.load_vocab(str(bad))
  empty = tmp_path / "empty.txt"
  empty.write_bytes(b"")
  with pytest.raises(UserInputError, match="empty.txt is empty"):
    tokenization.load_vocab(str(empty))
  no_unk = tmp_path / "no_unk.txt"
  no_unk.write_text("a\nb\n")
  with pytest.raises(UserInputError, match="no_unk.txt has no \\[UNK\\] token"):
    tokenization.FullTokenizer(str(no_unk))
