"""BertTextTokenizer (in-graph) against the golden file and the Python FullTokenizer."""

import json
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import text, tokenization
from bert_tf.errors import UserInputError
from bert_tf.text import packing
from helpers import FIXTURES, VOCAB_UNCASED

GOLDEN = json.loads((FIXTURES / "tokenization" / "tokenization_golden.json").read_text("utf-8"))
VOCABS = {
    "vocab_uncased.txt": VOCAB_UNCASED,
    "vocab_cased_synthetic.txt": str(FIXTURES / "tokenization" / "vocab_cased_synthetic.txt"),
}
CONFIGS = [c["name"] for c in GOLDEN["configs"]]

# Golden texts whose in-graph result may differ from the original, per config,
# with the reason. Empty: every character decision is taken from Python's
# unicodedata (see bert_tf/text/unicode.py), so no ICU/RE2 Unicode-version gap remains.
KNOWN_DIFFERENCES = {name: {} for name in CONFIGS}


@pytest.fixture(scope="module")
def tokenizers():
  """config name -> (in-graph tokenizer, Python FullTokenizer)."""
  out = {}
  for c in GOLDEN["configs"]:
    vocab = VOCABS[c["vocab_file"]]
    out[c["name"]] = (text.BertTextTokenizer(vocab, c["do_lower_case"]),
                      tokenization.FullTokenizer(vocab, c["do_lower_case"]))
  return out


def _strings(ragged):
  return [[t.decode("utf-8") for t in row] for row in ragged.to_list()]


def _assert_same_as_python(graph_tok, python_tok, texts):
  """Basic tokens and ids of the graph tokenizer equal FullTokenizer's."""
  encoded = [t.encode("utf-8") if isinstance(t, str) else t for t in texts]
  words = _strings(graph_tok.basic_tokenize(tf.constant(encoded, tf.string)))
  ids = graph_tok.tokenize(tf.constant(encoded, tf.string)).to_list()
  mismatches = []
  for t, got_words, got_ids in zip(texts, words, ids):
    want_words = python_tok.basic_tokenizer.tokenize(t)
    want_ids = python_tok.convert_tokens_to_ids(python_tok.tokenize(t))
    if (got_words, got_ids) != (want_words, want_ids):
      mismatches.append((ascii(t), got_words, want_words))
  assert not mismatches, mismatches[:5]


@pytest.mark.parametrize("config", CONFIGS)
def test_golden_cases(tokenizers, config):
  tok, _ = tokenizers[config]
  texts = [case["text"] for case in GOLDEN["cases"]]
  words = _strings(tok.basic_tokenize(texts))
  pieces = _strings(tok.tokenize_to_pieces(texts))
  ids = tok.tokenize(texts)
  assert ids.dtype == tf.int32
  differing = {}
  for case, got_words, got_pieces, got_ids in zip(GOLDEN["cases"], words, pieces,
                                                  ids.to_list()):
    want = case["results"][config]
    if (got_words, got_pieces, got_ids) != (want["basic_tokens"], want["tokens"], want["ids"]):
      differing[case["text"]] = (got_pieces[:8], want["tokens"][:8])
  assert set(differing) == set(KNOWN_DIFFERENCES[config]), differing


# Characters that exercise each step, including those where TensorFlow's ICU/RE2
# tables (Unicode 13, 15, 16) and Python's unicodedata (14.0) disagree.
_POOLS = {
    "ascii": [chr(c) for c in range(0x20, 0x7F)],
    "control": [chr(c) for c in list(range(0x20)) + list(range(0x7F, 0xA0))],
    "latin": [chr(c) for c in range(0xA0, 0x250)],
    "greek": ([chr(c) for c in range(0x370, 0x400)] + ["\u03a3"] * 20 +
              ["'", ".", ":", "\u00b7", "\u2019", "\u0301", "\u02b0", "\u0345"]),
    "cjk": [chr(c) for c in list(range(0x4E00, 0x4E40)) + list(range(0xF900, 0xF910)) +
            list(range(0x2F800, 0x2F810)) +
            [0x3400, 0x20000, 0x2A6DF, 0x2B740, 0x9FFF, 0x3005, 0x3041, 0x30A2, 0x2F00]],
    "hangul": [chr(c) for c in list(range(0xAC00, 0xAC20)) + list(range(0x1100, 0x1110)) +
               list(range(0x3131, 0x3140))],
    "format": [chr(c) for c in [0xAD, 0x600, 0x61C, 0x6DD, 0x200B, 0x200C, 0x200D, 0x200E,
                                0x2060, 0xFEFF, 0xFFF9, 0x110BD, 0x1D173, 0xE0001, 0xE0020,
                                0x13430, 0x13439, 0xFFFD]],
    "marks": [chr(c) for c in list(range(0x300, 0x370)) +
              [0x5B0, 0x5C1, 0x93C, 0x94D, 0xE31, 0xE48, 0x20DD, 0x488,
               # Non-Mn marks that survive accent stripping (canonical order shows).
               0x1D165, 0x1D166, 0x1D16D, 0x1D16E, 0x302E, 0x302F, 0x1B44, 0x1715, 0x16FF0]],
    "space": [chr(c) for c in [0x20, 0x9, 0xA, 0xD, 0xB, 0xC, 0x1C, 0x85, 0xA0, 0x1680, 0x2000,
                               0x2001, 0x2009, 0x202F, 0x205F, 0x3000, 0x2028, 0x2029]],
    # Case pairs new in Unicode 14 (tf.strings.lower misses them), characters
    # new in 15/16 (RE2 classes / tf-text NFD know them, Python 14.0 does not).
    "new": [chr(c) for c in [0x2C2F, 0xA7C0, 0xA7D0, 0xA7D6, 0x10570, 0x10594, 0x105C9,
                             0x11383, 0x16121, 0x16D68, 0x11B00, 0x11F43, 0xECE, 0x10EFD,
                             0x1E4EC]],
    "misc": [chr(c) for c in [0x130, 0x131, 0xDF, 0x1C5, 0xFB01, 0xFF21, 0xFF41, 0xFF01,
                              0x2160, 0x24B6, 0x1E9E, 0x2126, 0x212B, 0x1F600, 0xFE0F, 0x20AC,
                              0xE000, 0x10FFFD, 0x378, 0xE0100]],
}


def _random_texts(seed, count):
  rng = random.Random(seed)
  names = sorted(_POOLS) + ["any"]
  texts = []
  for _ in range(count):
    chars = []
    for _ in range(rng.randint(0, 30)):
      pool = rng.choice(names)
      if pool == "any":  # any code point but a surrogate
        cp = rng.randrange(0x10F800)
        chars.append(chr(cp + 0x800 if cp >= 0xD800 else cp))
      else:
        chars.append(rng.choice(_POOLS[pool]))
    texts.append("".join(chars))
  return texts


@pytest.mark.parametrize("config", CONFIGS)
def test_random_unicode_matches_python(tokenizers, config):
  _assert_same_as_python(*tokenizers[config], _random_texts(seed=1234, count=300))


def test_hand_made_texts_match_python(tokenizers):
  texts = [
      "",
      "   ",
      "\u200b",
      # Final sigma: decided per word, skipping case-ignorable characters.
      "ΟΔΟΣ ΣΑΣ Σ ΑΣ' Α'Σ'Β ΑΣ中 Α中Σ ΑΣ\u200bΒ ΑΣ\x07Β ΣΣ ΑΣ.Β",
      # Canonical order of marks that survive accent stripping.
      "\U0001d16d\U0001d165 a\u302e\u1b44 \u0301\u1715\u16ff0",
      "İstanbul ǅ ﬁ Ｆｕｌｌ Straße ẞ \u2126 \u212b",
      "\U00010570\U00010594 \u2c2f \ua7c0 \U000105c9 \U00011383",
      "a\u2028b\u2029c\u3000d\xa0e\x85f\x0bg\x1ch",
      "x" * 200 + " " + "y" * 201 + " " + "é" * 201 + " " + "é" * 200,
      "[CLS] [UNK] ##ing ## ###",
  ]
  for config in CONFIGS:
    _assert_same_as_python(*tokenizers[config], texts)


# Every non-default combination, plus the defaults spelt out explicitly.
STRIP_ACCENTS_COMBINATIONS = [(True, False), (False, True), (True, True), (False, False)]
KOREAN_AND_ACCENTED = [
    "한국어 안녕하세요. 서울은 BTS의 노래", "한", "\u1112\u1161\u11ab 가\u0301",
    "Café naïve RÉSUMÉ ΟΔΟΣ", "CAFE\u0301 \u00c9\u0323\u0302 Ǆ ǅ İ", "नमस्ते שָׁלוֹם ภาษาไทย",
]


@pytest.mark.parametrize("do_lower_case,strip_accents", STRIP_ACCENTS_COMBINATIONS)
def test_strip_accents_matches_python(do_lower_case, strip_accents):
  graph_tok = text.BertTextTokenizer(VOCAB_UNCASED, do_lower_case, strip_accents)
  python_tok = tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case, strip_accents)
  assert graph_tok.strip_accents is python_tok.strip_accents is strip_accents
  texts = KOREAN_AND_ACCENTED + [c["text"] for c in GOLDEN["cases"]]
  _assert_same_as_python(graph_tok, python_tok, texts + _random_texts(seed=4321, count=300))


@pytest.mark.parametrize("do_lower_case,strip_accents", STRIP_ACCENTS_COMBINATIONS)
def test_graph_mode_takes_the_ascii_and_unicode_branches_like_python(do_lower_case,
                                                                    strip_accents):
  """Inside a tf.function the Unicode tables run only for batches with a non-ASCII row
  (an un-lowered branch, eager mode decides in Python): all-ASCII, mixed and
  all-non-ASCII batches, and the packed single-sentence inputs, all match FullTokenizer."""
  graph_tok = text.BertTextTokenizer(VOCAB_UNCASED, do_lower_case, strip_accents)
  python_tok = tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case, strip_accents)
  spec = [tf.TensorSpec([None], tf.string)]
  tokenize = tf.function(graph_tok.tokenize, input_signature=spec)
  encode = tf.function(lambda t: graph_tok.encode(t, seq_length=16), input_signature=spec)
  unicode_texts = KOREAN_AND_ACCENTED + _random_texts(seed=99, count=60)
  ascii_texts = ["Hello, World!", "THE QUICK brown fox", "", "  tabs\tand\nnew lines  ",
                 "don't stop-me now..."]
  for batch in (ascii_texts, unicode_texts, ascii_texts + unicode_texts, ascii_texts[:1], []):
    want = [python_tok.convert_tokens_to_ids(python_tok.tokenize(t)) for t in batch]
    encoded = tf.constant([t.encode("utf-8") for t in batch], tf.string)
    assert tokenize(encoded).to_list() == want, batch[:3]
    got = {k: v.numpy().tolist() for k, v in encode(encoded).items()}
    for i, ids in enumerate(want):
      features = _reference_features(ids, None, 16, python_tok.vocab["[CLS]"],
                                     python_tok.vocab["[SEP]"])
      assert {k: v[i] for k, v in got.items()} == features, batch[i]


@pytest.mark.parametrize("config", GOLDEN["configs"], ids=lambda c: c["name"])
def test_explicit_default_strip_accents_keeps_golden_ids(config):
  tok = text.BertTextTokenizer(VOCABS[config["vocab_file"]], config["do_lower_case"],
                               strip_accents=config["do_lower_case"])
  got = tok.tokenize([case["text"] for case in GOLDEN["cases"]]).to_list()
  assert got == [case["results"][config["name"]]["ids"] for case in GOLDEN["cases"]]


def test_strip_accents_false_keeps_hangul_syllables(tmp_path):
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "한국어", "안녕", "##하세요", "서울", "##은", "##의",
           "노래", "bts", "ᄒ", "##ᅡ", "##ᆫ", "café", "cafe", "."]
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
  texts = ["한국어 안녕하세요. 서울은 BTS의 노래", "한 Café"]
  kept = text.BertTextTokenizer(str(path), do_lower_case=True, strip_accents=False)
  assert kept.tokenize(texts).to_list() == [[4, 5, 6, 17, 7, 8, 11, 9, 10], [1, 15]]
  original = text.BertTextTokenizer(str(path), do_lower_case=True)
  # Jamo miss the syllable entries: a word with any unmatched piece is [UNK].
  assert original.tokenize(texts).to_list() == [[1, 1, 17, 1, 1, 1], [12, 13, 14, 16]]
  for lower, strip_accents in STRIP_ACCENTS_COMBINATIONS + [(True, None), (False, None)]:
    _assert_same_as_python(text.BertTextTokenizer(str(path), lower, strip_accents),
                           tokenization.FullTokenizer(str(path), lower, strip_accents),
                           texts + KOREAN_AND_ACCENTED)


def test_word_length_limit_counts_characters_not_bytes(tmp_path):
  vocab = ["[PAD]", "[UNK]", "𝔞", "##𝔞", "ж", "##ж"]
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
  graph_tok = text.BertTextTokenizer(str(path), do_lower_case=False)
  python_tok = tokenization.FullTokenizer(str(path), do_lower_case=False)
  # 200 four-byte characters are 800 bytes and still split; 201 are [UNK].
  texts = ["𝔞" * 200, "𝔞" * 201, "ж" * 200, "ж" * 201, "𝔞" * 199 + "ж"]
  _assert_same_as_python(graph_tok, python_tok, texts)
  assert graph_tok.tokenize(["𝔞" * 200]).to_list() == [[2] + [3] * 199]
  assert graph_tok.tokenize(["𝔞" * 201]).to_list() == [[1]]


def test_invalid_utf8_is_dropped_like_python(tokenizers):
  pieces = [b"\xe2\x82", b"\xac", b"\xed\xa0\x80", b"\xc0\x80", b"\xf0\x80\x80\x80",
            b"\xf4\x90\x80\x80", b"\xff", b"\xfe", b"a", b"B", b" ", b"\xc3", b"\xa9",
            b"\xf0\x9f\x98", b"\x80", b"\xe0\x80\xaf", b"\xef\xbf\xbd", b"\x00", b"\xce\xa3"]
  rng = random.Random(7)
  texts = [b"caf\xc3\xa9 \xff", b"\xff\xfe", b"\xed\xa0\x80abc"]
  texts += [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
            for _ in range(200)]
  for config in CONFIGS:
    _assert_same_as_python(*tokenizers[config], texts)
  tok, _ = tokenizers["uncased_vocab__lower_true"]
  assert _strings(tok.tokenize_to_pieces([b"caf\xc3\xa9 \xff"])) == [["cafe"]]


def test_vocab_list_and_mapping(tmp_path):
  lines = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "foo", "##bar", "foo", "", "##", "baz"]
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  python_tok = tokenization.FullTokenizer(str(path), do_lower_case=True)
  texts = ["foobar baz", "FOO bazbar", "qux", "foo##bar"]
  for source in (str(path), path, lines, python_tok.vocab):
    graph_tok = text.BertTextTokenizer(source, do_lower_case=True)
    assert graph_tok.vocab_size == len(lines)
    _assert_same_as_python(graph_tok, python_tok, texts)
  # A repeated token keeps its last line, like the original's load_vocab.
  assert graph_tok.tokenize(["foo"]).to_list() == [[6]]
  with pytest.raises(UserInputError, match="UNK"):
    text.BertTextTokenizer(["[CLS]", "foo"])


def test_split_patterns_split_raw_text_like_basic_tokenizer(tokenizers):
  """The public patterns alone split text with nothing to clean or lower-case into the
  BasicTokenizer's words (the NER export splits raw text with them, to keep offsets)."""
  tok, python_tok = tokenizers["uncased_vocab__lower_true"]
  texts = ["hello, world!", "tab\tand  spaces\u3000x", "中文字符(a-b)", "", "   ",
           "it's 3.5%... ¿que? \u2028end"]
  split_pattern, keep_pattern = tok.split_patterns
  words = tf_text.regex_split(tf.constant(texts), split_pattern, keep_pattern)
  assert _strings(words) == [python_tok.basic_tokenizer.tokenize(t) for t in texts]
  with pytest.raises(AttributeError):
    tok.split_patterns = ("", "")


def _truncate_seq_pair(tokens_a, tokens_b, max_length):
  """The original's loop, kept verbatim as the reference."""
  while True:
    total_length = len(tokens_a) + len(tokens_b)
    if total_length <= max_length:
      break
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def test_truncation_formula_equals_the_original_loop():
  grid = [(la, lb, m) for la in range(31) for lb in range(31) for m in range(26)]
  la, lb, m = (np.array(column) for column in zip(*grid))
  keep_a, keep_b = packing.truncated_lengths(la, lb, m)
  for (a, b, max_length), got_a, got_b in zip(grid, keep_a.numpy(), keep_b.numpy()):
    tokens_a, tokens_b = list(range(a)), list(range(b))
    _truncate_seq_pair(tokens_a, tokens_b, max_length)
    assert (got_a, got_b) == (len(tokens_a), len(tokens_b)), (a, b, max_length)


def _reference_features(tokens_a, tokens_b, seq_length, cls_id, sep_id):
  """The original convert_single_example on ids (tokens_b None if there is no text_b)."""
  tokens_a = list(tokens_a)
  tokens_b = None if tokens_b is None else list(tokens_b)
  if tokens_b:
    _truncate_seq_pair(tokens_a, tokens_b, seq_length - 3)
  elif len(tokens_a) > seq_length - 2:
    tokens_a = tokens_a[0:(seq_length - 2)]
  input_ids = [cls_id] + tokens_a + [sep_id]
  segment_ids = [0] * len(input_ids)
  if tokens_b:
    input_ids += tokens_b + [sep_id]
    segment_ids += [1] * (len(tokens_b) + 1)
  input_mask = [1] * len(input_ids)
  padding = [0] * (seq_length - len(input_ids))
  return {"input_word_ids": input_ids + padding, "input_mask": input_mask + padding,
          "input_type_ids": segment_ids + padding}


@pytest.mark.parametrize("seq_length", [3, 4, 5, 8, 16])
def test_pack_inputs_matches_convert_single_example(seq_length):
  rng = random.Random(seq_length)
  rows_a = [[rng.randrange(5, 100) for _ in range(rng.randint(0, 20))] for _ in range(200)]
  rows_b = [[rng.randrange(5, 100) for _ in range(rng.randint(0, 20))] for _ in range(200)]
  rows_b[:20] = [[]] * 20
  for segments_b in (None, rows_b):
    got = packing.pack_inputs(
        tf.ragged.constant(rows_a, tf.int32, row_splits_dtype=tf.int32),
        None if segments_b is None else tf.ragged.constant(segments_b, tf.int64),
        seq_length, cls_id=101, sep_id=102)
    for key, value in got.items():
      assert value.dtype == tf.int32 and value.shape == (200, seq_length)
    got = {k: v.numpy().tolist() for k, v in got.items()}
    for i, a in enumerate(rows_a):
      want = _reference_features(a, None if segments_b is None else segments_b[i],
                                 seq_length, 101, 102)
      assert {k: v[i] for k, v in got.items()} == want, (a, segments_b and segments_b[i])


def test_encode_matches_python_pipeline(tokenizers):
  tok, python_tok = tokenizers["uncased_vocab__lower_true"]
  texts_a = ["Hello, world!", "", "A fairly long first sentence that will need cutting.",
             "short", "   ", "Ελληνικά Καλημέρα"]
  texts_b = ["", "only b here", "and a second sentence, also long, to cut too", "   ",
             "b", "中文分词测试"]
  got = tok.encode(texts_a, texts_b, seq_length=12)
  got = {k: v.numpy().tolist() for k, v in got.items()}
  for i, (a, b) in enumerate(zip(texts_a, texts_b)):
    ids_a = python_tok.convert_tokens_to_ids(python_tok.tokenize(a))
    ids_b = python_tok.convert_tokens_to_ids(python_tok.tokenize(b)) if b else None
    want = _reference_features(ids_a, ids_b, 12, python_tok.vocab["[CLS]"],
                               python_tok.vocab["[SEP]"])
    assert {k: v[i] for k, v in got.items()} == want, (a, b)
  # An empty text gives [CLS] [SEP].
  single = tok([""], seq_length=4)
  assert single["input_word_ids"].numpy().tolist() == [[101, 102, 0, 0]]
  assert single["input_mask"].numpy().tolist() == [[1, 1, 0, 0]]


def test_words_and_tensor_seq_length(tokenizers):
  """tokenize_words keeps the words; pack_inputs takes them and a tensor seq_length."""
  tok, python_tok = tokenizers["uncased_vocab__lower_true"]
  texts_a = ["Hello, world!", "a fairly long sentence that gets cut", "naïve"]
  texts_b = ["", "second one", "b"]
  words = tok.tokenize_words(texts_a)
  assert words.ragged_rank == 2 and words.dtype == tf.int32
  assert words.to_list() == [
      [python_tok.convert_tokens_to_ids(python_tok.wordpiece_tokenizer.tokenize(w))
       for w in python_tok.basic_tokenizer.tokenize(t)] for t in texts_a]
  assert words.merge_dims(1, 2).to_list() == tok.tokenize(texts_a).to_list()
  pack = tf.function(lambda a, b, n: packing.pack_inputs(a, b, n, tok.cls_id,
                                                               tok.sep_id))
  for seq_length in (3, 8, 12):
    want = tok.encode(texts_a, texts_b, seq_length=seq_length)
    got = pack(words, tok.tokenize_words(texts_b), tf.constant(seq_length))
    for key, value in got.items():
      np.testing.assert_array_equal(value, want[key])
  with pytest.raises(tf.errors.InvalidArgumentError, match="no room"):
    pack(words, tok.tokenize_words(texts_b), tf.constant(2))


@pytest.mark.slow
def test_tf_function_tf_data_and_saved_model(tmp_path):
  vocab = tmp_path / "vocab.txt"
  shutil.copy(VOCAB_UNCASED, vocab)
  tok = text.BertTextTokenizer(str(vocab), do_lower_case=True)
  a = tf.constant(["Héllo ΟΔΟΣ wörld", "x", ""])
  b = tf.constant(["", "the second sentence is long enough to be cut", "b"])
  want = tok.encode(a, b, seq_length=16)

  class Exported(tf.Module):

    def __init__(self, tokenizer):
      super().__init__()
      self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    def encode(self, text_a, text_b):
      return self.tokenizer.encode(text_a, text_b, seq_length=16)

  module = Exported(tok)
  for key, value in module.encode(a, b).items():
    np.testing.assert_array_equal(value, want[key])

  batched = tf.data.Dataset.from_tensor_slices((a, b)).batch(2).map(
      lambda x, y: tok(x, y, seq_length=16))
  got = np.concatenate([f["input_word_ids"] for f in batched.as_numpy_iterator()])
  np.testing.assert_array_equal(got, want["input_word_ids"])
  # Unbatched elements are scalars; the features then have no batch axis.
  single = tf.data.Dataset.from_tensor_slices((a, b)).map(
      lambda x, y: tok.encode(x, y, seq_length=16))
  got = np.stack([f["input_type_ids"] for f in single.as_numpy_iterator()])
  np.testing.assert_array_equal(got, want["input_type_ids"])

  # The SavedModel carries the vocabulary and tables: no vocab file needed.
  tf.saved_model.save(module, str(tmp_path / "saved"))
  vocab.unlink()
  loaded = tf.saved_model.load(str(tmp_path / "saved"))
  for key, value in loaded.encode(a, b).items():
    np.testing.assert_array_equal(value, want[key])


def test_rejects_bad_shapes_and_lengths(tokenizers):
  tok, _ = tokenizers["uncased_vocab__lower_true"]
  with pytest.raises(ValueError, match="1-D"):
    tok.tokenize([["a"]])
  with pytest.raises(ValueError, match="seq_length"):
    tok.encode(["a"], ["b"], seq_length=2)
  assert tok.tokenize("Hello").numpy().tolist() == [7592]
