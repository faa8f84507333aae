"""Every per-character decision of the Python tokenizer, as tables for the in-graph one.

Why no ICU normalisation or `\\p{..}` classes in `bert_tf.text`: each library ships its own
Unicode version (with TF 2.21 / tf-text 2.21: `tf.strings.lower` is Unicode 13 and misses
the 14.0 case pairs, `tensorflow_text.normalize_utf8` is Unicode 16 and decomposes
characters that Python 14.0 leaves alone, RE2's classes are Unicode 15), and
`tensorflow_text`'s own BERT normaliser uses NFKC case folding, which the original does
not. So the decisions are taken here from the running Python's `unicodedata`, through the
predicates of `bert_tf.tokenization` itself, and the tokenizer embeds them as constants:
RE2 classes of explicit code point ranges (`char_class`) and code point maps.
"""

import functools
import unicodedata

from bert_tf import tokenization

MAX_CODE_POINT = 0x10FFFF
FINAL_SIGMA = "\u03c2"


class UnicodeTables:
  """Per-character decisions of the Python tokenizer, as code point sets and maps."""

  def __init__(self):
    # pylint: disable=protected-access
    chinese = {cp for cp in range(MAX_CODE_POINT + 1) if tokenization._is_chinese_char(cp)}
    self.deleted, self.spaces, self.cased, self.ignorable = [], [], [], []
    split_kept = set(chinese)
    # (do_lower_case, strip_accents) -> {code point: what the Python tokenizer
    # turns it into, as code points, where that differs}: lower() and/or NFD.
    self.char_maps = {(True, True): {}, (True, False): {}, (False, True): {}}
    self.mark_props = {}  # code point -> combining class | 256 if Mn
    for cp in range(MAX_CODE_POINT + 1):
      char = chr(cp)
      category = unicodedata.category(char)
      # Unassigned, private-use and surrogate code points are in no class below
      # and unchanged by lower() and NFD.
      if category in ("Cn", "Co", "Cs"):
        continue
      if cp == 0 or cp == 0xFFFD or tokenization._is_control(char):
        self.deleted.append(cp)
        continue
      # What survives cleaning and splits words in `text.split()`: Zs, \t\n\r and
      # U+2028/U+2029 (the other Python whitespace is Cc, deleted above).
      is_space = tokenization._is_whitespace(char) or char.isspace()
      if is_space:
        self.spaces.append(cp)
      elif tokenization._is_punctuation(char):
        split_kept.add(cp)
      combining = unicodedata.combining(char)
      if combining or category == "Mn":
        self.mark_props[cp] = combining | (256 if category == "Mn" else 0)
      lowered = char.lower()
      for key, mapped in (((True, True), unicodedata.normalize("NFD", lowered)),
                          ((True, False), lowered),
                          ((False, True), unicodedata.normalize("NFD", char))):
        if mapped != char:
          self.char_maps[key][cp] = [ord(c) for c in mapped]
      if is_space or cp in chinese:
        continue  # Word boundaries in the original, so never sigma context.
      # Python's capital-sigma rule, probed through str.lower() itself:
      # "AΣc" gives ς iff c is case-ignorable or not cased; "AΣcA" gives ς iff c
      # is neither.
      if ("A\u03a3" + char).lower()[1] != FINAL_SIGMA:
        self.cased.append(cp)
      elif ("A\u03a3" + char + "A").lower()[1] != FINAL_SIGMA:
        self.ignorable.append(cp)
    self.split_kept = sorted(split_kept)


@functools.lru_cache(maxsize=None)
def unicode_tables():
  """Built once per process: it visits every code point."""
  return UnicodeTables()


def _ranges(code_points):
  """Sorted code points -> list of inclusive (first, last) runs."""
  runs = []
  for cp in sorted(code_points):
    if runs and runs[-1][1] == cp - 1:
      runs[-1][1] = cp
    else:
      runs.append([cp, cp])
  return runs


def char_class(code_points, negate=False):
  """An RE2 character class listing `code_points` as explicit \\x{..} ranges."""
  runs = _ranges(code_points)
  if not runs:
    return r"[\x{0}-\x{10FFFF}]" if negate else r"[^\x{0}-\x{10FFFF}]"
  body = "".join(r"\x{%X}" % a if a == b else r"\x{%X}-\x{%X}" % (a, b) for a, b in runs)
  return "[%s%s]" % ("^" if negate else "", body)
