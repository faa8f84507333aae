"""FullTokenizer against the original's outputs on every golden text x 3 configs."""

import json

import pytest

from bert_tf import tokenization
from bert_tf.errors import UserInputError
from helpers import FIXTURES, VOCAB_UNCASED

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


@pytest.mark.parametrize("config", [c for c in GOLDEN["configs"]], ids=lambda c: c["name"])
def test_explicit_default_strip_accents_keeps_golden_results(config):
  """strip_accents=None and strip_accents=do_lower_case are both the original."""
  for strip_accents in (None, config["do_lower_case"]):
    tokenizer = tokenization.FullTokenizer(VOCABS[config["vocab_file"]], config["do_lower_case"],
                                           strip_accents=strip_accents)
    assert tokenizer.strip_accents is config["do_lower_case"]
    for case in GOLDEN["cases"]:
      assert tokenizer.tokenize(case["text"]) == case["results"][config["name"]]["tokens"]


def test_resolve_strip_accents():
  assert [tokenization.resolve_strip_accents(lower, strip)
          for lower in (True, False) for strip in (None, True, False)] == [
              True, True, False, False, True, False]


# A multilingual-style vocab: Hangul syllables (what a Korean vocab holds), the
# jamo the original's accent stripping produces, and accented/plain Latin words.
KOREAN_LATIN_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "한국어", "안녕", "##하세요", "서울", "##은", "##의",
    "노래", "bts", "BTS", "ᄒ", "##ᅡ", "##ᆫ", "##ᄀ", "##ᅮ", "##ᆨ", "##ᄋ", "##ᅥ", "café", "cafe",
    "naïve", "naive", "résumé", "resume", "Café", "Cafe", "RÉSUMÉ", "RESUME", "ς", "ο", "##δ",
    "##ο", "##ς", "οδος", ".",
]


@pytest.fixture
def korean_vocab(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(KOREAN_LATIN_VOCAB) + "\n", encoding="utf-8")
  return str(path)


def test_strip_accents_false_keeps_hangul_syllables(korean_vocab):
  text = "한국어 안녕하세요. 서울은 BTS의 노래"
  kept = tokenization.FullTokenizer(korean_vocab, do_lower_case=True, strip_accents=False)
  assert kept.tokenize(text) == ["한국어", "안녕", "##하세요", ".", "서울", "##은", "bts", "##의",
                                 "노래"]
  assert kept.tokenize("한국어").count("[UNK]") == 0
  # The original (and strip_accents=True) decompose syllables into jamo, which
  # then miss the vocab's syllable entries.
  for strip_accents in (None, True):
    original = tokenization.FullTokenizer(korean_vocab, True, strip_accents)
    assert original.basic_tokenizer.tokenize("한국어") == ["\u1112\u1161\u11ab\u1100\u116e"
                                                         "\u11a8\u110b\u1165"]
    assert original.tokenize("한국어") == ["ᄒ", "##ᅡ", "##ᆫ", "##ᄀ", "##ᅮ", "##ᆨ", "##ᄋ",
                                        "##ᅥ"]
    assert original.tokenize("안녕") == ["[UNK]"]
  # Without lower-casing, True strips (decomposes) too; None and False keep.
  assert tokenization.FullTokenizer(korean_vocab, False, True).tokenize("한") == [
      "ᄒ", "##ᅡ", "##ᆫ"]
  for strip_accents in (None, False):
    assert tokenization.FullTokenizer(korean_vocab, False, strip_accents).tokenize(
        "BTS의 노래") == ["BTS", "##의", "노래"]


def test_strip_accents_on_accented_latin(korean_vocab):
  text = "Café naïve RÉSUMÉ ΟΔΟΣ"
  want = {
      (True, None): ["cafe", "naive", "resume", "οδος"],
      (True, True): ["cafe", "naive", "resume", "οδος"],
      (True, False): ["café", "naïve", "résumé", "οδος"],
      (False, None): ["Café", "naïve", "RÉSUMÉ", "ΟΔΟΣ"],
      (False, True): ["Cafe", "naive", "RESUME", "ΟΔΟΣ"],
      (False, False): ["Café", "naïve", "RÉSUMÉ", "ΟΔΟΣ"],
  }
  for (lower, strip_accents), words in want.items():
    tokenizer = tokenization.FullTokenizer(korean_vocab, lower, strip_accents)
    assert tokenizer.basic_tokenizer.tokenize(text) == words, (lower, strip_accents)
    assert tokenizer.do_lower_case is lower
  # Kept accents are kept as written: decomposed input stays decomposed.
  kept = tokenization.BasicTokenizer(do_lower_case=True, strip_accents=False)
  assert kept.tokenize("CAFE\u0301") == ["cafe\u0301"]
  assert tokenization.BasicTokenizer(do_lower_case=False, strip_accents=True).tokenize(
      "CAFE\u0301 \u00c9") == ["CAFE", "E"]


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
