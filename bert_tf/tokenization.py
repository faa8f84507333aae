"""The original BERT tokenizer (FullTokenizer), pure Python, token-identical.

Public names and behaviour follow google-research/bert `tokenization.py`, including
its quirks (kept on purpose, because released checkpoints were trained with them):

* lower-casing is `str.lower()`, then NFD, then every `Mn` character is dropped, so
  Hangul syllables decompose into conjoining jamo and Devanagari/Hebrew/Thai marks
  vanish; NFD is not NFKD, so ligatures and fullwidth forms are kept;
* U+0000, U+FFFD and every Cc/Cf character are deleted without inserting a space;
* every ASCII non-alphanumeric character is punctuation, Unicode symbols are not;
* only CJK ideograph blocks are split per character (not kana, not Hangul);
* a word longer than 200 characters, or one with any unmatched piece, is `[UNK]`;
* `bytes` input is decoded as UTF-8 with invalid bytes silently dropped.

One addition, off by default: `strip_accents` (as in Hugging Face's BertTokenizer)
separates accent stripping from lower-casing, because stripping ruins scripts whose
letters carry marks (google-research/bert issues #130, #135): `strip_accents=False`
lower-cases but keeps every character (Hangul syllables stay syllables), `True`
strips accents even without lower-casing, and None is the original behaviour.

The implementation is faster than the original (per-character decisions are cached,
word pieces are memoised), but every output is the same.
"""

import collections
import re
import unicodedata

from bert_tf.errors import UserInputError
from bert_tf.utils import user_files

# Checkpoint folders of Google's releases whose casing is known.
_LOWER_CASED_MODELS = ("uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
                       "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12")
_CASED_MODELS = ("cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
                 "multi_cased_L-12_H-768_A-12")


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
  """Raises ValueError if `do_lower_case` contradicts a Google release's folder name."""
  if not init_checkpoint:
    return
  match = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
  if match is None:
    return
  model_name = match.group(1)
  if model_name in _LOWER_CASED_MODELS and not do_lower_case:
    actual, case_name, opposite = "False", "lowercased", "True"
  elif model_name in _CASED_MODELS and do_lower_case:
    actual, case_name, opposite = "True", "cased", "False"
  else:
    return
  raise ValueError(
      "You passed in `--do_lower_case=%s` with `--init_checkpoint=%s`. "
      "However, `%s` seems to be a %s model, so you "
      "should pass in `--do_lower_case=%s` so that the fine-tuning matches "
      "how the model was pre-training. If this error is wrong, please "
      "just comment out this check." % (actual, init_checkpoint, model_name, case_name,
                                        opposite))


def convert_to_unicode(text):
  """Returns `text` as str; bytes are read as UTF-8 and invalid bytes are dropped."""
  if isinstance(text, str):
    return text
  if isinstance(text, bytes):
    return text.decode("utf-8", "ignore")
  raise ValueError("Unsupported string type: %s" % (type(text)))


# In Python 3 the original's printable_text is the same function.
printable_text = convert_to_unicode


def load_vocab(vocab_file):
  """Reads a WordPiece vocab: one token per line, id = line number.

  Like the original, lines are split on "\\n" only and stripped of surrounding
  whitespace; a token that appears twice maps to its last line.
  """
  text = user_files.read_text(vocab_file, "Vocab file", "(check --vocab_file)")
  lines = text.split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  if not lines:
    raise UserInputError("Vocab file %s is empty." % vocab_file)
  vocab = collections.OrderedDict()
  for index, token in enumerate(lines):
    vocab[token.strip()] = index
  return vocab


def convert_by_vocab(vocab, items):
  """Maps tokens to ids or ids to tokens; an unknown item raises KeyError."""
  return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
  return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
  return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
  """Strips and splits on Python whitespace (which includes U+2028 and U+2029)."""
  return text.split()


def resolve_strip_accents(do_lower_case, strip_accents):
  """Whether accents are stripped: `strip_accents` if given, else the original's rule.

  The original strips accents exactly when it lower-cases (strip_accents=None).
  """
  if strip_accents is None:
    return bool(do_lower_case)
  return bool(strip_accents)


class FullTokenizer:
  """BasicTokenizer followed by WordpieceTokenizer over a vocab file.

  `strip_accents`: None strips accents exactly when lower-casing (the original);
  False keeps them while lower-casing; True strips them even without lower-casing.
  """

  def __init__(self, vocab_file, do_lower_case=True, strip_accents=None):
    self.vocab = load_vocab(vocab_file)
    if "[UNK]" not in self.vocab:
      raise UserInputError(
          "Vocab file %s has no [UNK] token: it is not a BERT WordPiece vocab." % vocab_file)
    self.inv_vocab = {v: k for k, v in self.vocab.items()}
    self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case,
                                          strip_accents=strip_accents)
    self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

  def tokenize(self, text):
    split_tokens = []
    wordpiece = self.wordpiece_tokenizer.tokenize_word
    for token in self.basic_tokenizer.tokenize(text):
      split_tokens.extend(wordpiece(token))
    return split_tokens

  @property
  def do_lower_case(self):
    return self.basic_tokenizer.do_lower_case

  @property
  def strip_accents(self):
    """The resolved setting (a bool), see `resolve_strip_accents`."""
    return self.basic_tokenizer.strip_accents

  def convert_tokens_to_ids(self, tokens):
    return convert_by_vocab(self.vocab, tokens)

  def convert_ids_to_tokens(self, ids):
    return convert_by_vocab(self.inv_vocab, ids)


def _is_whitespace(char):
  """Space, tab, newline, carriage return and category Zs."""
  if char in " \t\n\r":
    return True
  return unicodedata.category(char) == "Zs"


def _is_control(char):
  """Categories Cc and Cf, except tab, newline and carriage return."""
  if char in "\t\n\r":
    return False
  return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
  """Every ASCII non-alphanumeric character, and Unicode category P*."""
  cp = ord(char)
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp):
  """CJK Unified/Compatibility Ideographs (incl. Ext A-E); not kana or Hangul."""
  return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or
          0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or
          0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class _CleanTable(dict):
  """`str.translate` table doing `_clean_text` and `_tokenize_chinese_chars` at once.

  Each code point's replacement is decided on first sight and remembered.
  """

  def __missing__(self, cp):
    char = chr(cp)
    if cp == 0 or cp == 0xFFFD or _is_control(char):
      value = None
    elif _is_whitespace(char):
      value = " "
    elif _is_chinese_char(cp):
      value = " %s " % char
    else:
      value = cp
    self[cp] = value
    return value


class _PunctuationTable(dict):
  """Code point -> whether it is punctuation, decided on first sight."""

  def __missing__(self, cp):
    value = _is_punctuation(chr(cp))
    self[cp] = value
    return value


_CLEAN_TABLE = _CleanTable()
_PUNCTUATION = _PunctuationTable()
_ASCII_PUNCTUATION_SPLIT = re.compile(r"[!-/:-@\[-`{-~]|[^!-/:-@\[-`{-~]+")


class BasicTokenizer:
  """Cleans text, splits CJK characters, lower-cases/strips accents, splits punctuation.

  `strip_accents` None follows `do_lower_case` (the original); the attribute holds
  the resolved bool.
  """

  def __init__(self, do_lower_case=True, strip_accents=None):
    self.do_lower_case = do_lower_case
    self.strip_accents = resolve_strip_accents(do_lower_case, strip_accents)

  def tokenize(self, text):
    text = convert_to_unicode(text).translate(_CLEAN_TABLE)
    split_tokens = []
    for token in text.split():
      if self.do_lower_case:
        token = token.lower()
      if self.strip_accents and not token.isascii():
        token = self._run_strip_accents(token)
      split_tokens.extend(self._run_split_on_punc(token))
    # The original re-joins with spaces and splits again; that only drops empty
    # pieces (stripping accents can empty a token) and splits on whitespace that
    # lower-casing or NFD produced.
    return " ".join(split_tokens).split()

  def _run_strip_accents(self, text):
    """NFD, then drop nonspacing marks (category Mn)."""
    text = unicodedata.normalize("NFD", text)
    return "".join(c for c in text if unicodedata.category(c) != "Mn")

  def _run_split_on_punc(self, text):
    """Each punctuation character becomes its own token."""
    if text.isascii():
      return _ASCII_PUNCTUATION_SPLIT.findall(text)
    # Slices, not `output[-1] += char`: that copies the word per character, quadratic
    # in a long word (a line of Japanese or Thai without spaces is one word).
    output = []
    start = 0
    for i, char in enumerate(text):
      if _PUNCTUATION[ord(char)]:
        if start < i:
          output.append(text[start:i])
        output.append(char)
        start = i + 1
    if start < len(text):
      output.append(text[start:])
    return output

  def _tokenize_chinese_chars(self, text):
    """Adds whitespace around any CJK ideograph."""
    return "".join(" %s " % c if _is_chinese_char(ord(c)) else c for c in text)

  def _is_chinese_char(self, cp):
    return _is_chinese_char(cp)

  def _clean_text(self, text):
    """Deletes NUL, U+FFFD and Cc/Cf characters; maps whitespace to a space."""
    output = []
    for char in text:
      cp = ord(char)
      if cp == 0 or cp == 0xFFFD or _is_control(char):
        continue
      output.append(" " if _is_whitespace(char) else char)
    return "".join(output)


class WordpieceTokenizer:
  """Greedy longest-match-first WordPiece over a vocab, `##` marking continuations."""

  def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
    self.vocab = vocab
    self.unk_token = unk_token
    self.max_input_chars_per_word = max_input_chars_per_word
    # No vocab entry is longer than this many characters (after "##"), so longer
    # candidate substrings need not be looked up.
    self._max_piece_chars = max((len(t) for t in vocab), default=0)
    self._cache = {}

  def tokenize(self, text):
    """Splits whitespace-separated words of `text` into word pieces."""
    output_tokens = []
    for token in whitespace_tokenize(convert_to_unicode(text)):
      output_tokens.extend(self.tokenize_word(token))
    return output_tokens

  def tokenize_word(self, word):
    pieces = self._cache.get(word)
    if pieces is None:
      pieces = self._split_word(word)
      if len(self._cache) < 1_000_000:
        self._cache[word] = pieces
    return pieces

  def _split_word(self, word):
    if len(word) > self.max_input_chars_per_word:
      return [self.unk_token]
    vocab = self.vocab
    pieces = []
    start = 0
    while start < len(word):
      prefix = "##" if start > 0 else ""
      end = min(len(word), start + self._max_piece_chars)
      while end > start:
        piece = prefix + word[start:end]
        if piece in vocab:
          break
        end -= 1
      else:
        return [self.unk_token]
      pieces.append(piece)
      start = end
    return pieces
