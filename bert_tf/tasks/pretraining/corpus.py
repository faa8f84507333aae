"""Reading a pretraining corpus into word-piece documents, as the original reads it.

One sentence per line, a blank line between documents; lines that tokenize to
nothing are dropped. This is the first stage of `pretraining_data` and consumes no
randomness, so it lives apart from the RNG-faithful instance generation.

Differences from the original, none of which changes a record: a line of many
megabytes (a file without line breaks) is tokenized piece by piece, so memory stays
linear in its length, and it is reported, since an instance uses only
max_seq_length tokens of it; an input file without any text is an error instead of
silently contributing nothing. Files are opened through an `opener`, so the Beam
pipeline reads gs:// and other file systems. TensorFlow is not imported here.
"""

import logging
import os
import re

from bert_tf import tokenization
from bert_tf.errors import UserInputError
from bert_tf.utils import user_files
from bert_tf.utils.progress import Progress

_LOGGER = logging.getLogger(__name__)


def _open_local(path):
  return open(path, "rb")


def read_text_lines(input_file, opener=None):
  """Yields (stripped line, raw byte count); lines split on "\\n" as TF's GFile does.

  `opener(path)` returns a binary file object (default: the local file system; the
  Beam pipeline passes Beam's file systems, so gs:// etc. work on its workers).
  """
  try:
    with (opener or _open_local)(input_file) as f:
      number = 0
      for raw in f:
        number += 1
        size = len(raw)
        try:
          line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as e:
          raise UserInputError("Input file %s line %d is not UTF-8 (byte %d); convert the "
                               "corpus to UTF-8." % (input_file, number, e.start + 1)) from None
        del raw  # a line can be the whole file: not twice in memory while it is tokenized
        yield line, size
  except OSError as e:
    raise user_files.open_error(e, input_file, "Input file", "(check --input_file)") from None


def no_text_error(input_file):
  return UserInputError(
      "Input file %s has no text to make pretraining examples from (it is empty, or every "
      "line is blank or tokenizes to nothing); remove it from --input_file." % input_file)


def has_text(input_file, tokenizer, opener=None):
  """Whether any line of the file tokenizes to something; reads only up to that line.

  Such a file always yields records, so this is the cheap up-front check that no
  input file is empty.
  """
  lines = read_text_lines(input_file, opener)
  try:
    return any(pieces for line, _ in lines if line
               for pieces, _ in _tokenize_in_pieces(tokenizer, line))
  finally:
    lines.close()


def _size(path):
  try:
    return os.path.getsize(path)
  except OSError:
    return 0  # read_text_lines reports it


# FullTokenizer splits words at these characters whatever surrounds them (a space,
# tab or ideographic space, or a CJK ideograph, which it pads with spaces), so a
# line cut just before one of them tokenizes to the concatenation of its pieces.
_CUT_BEFORE = re.compile("[ \t\u3000\u4e00-\u9fff]")
_PIECE_CHARS = 1 << 16


def _tokenize_in_pieces(tokenizer, line):
  """Yields (word pieces, characters) of successive pieces of `line`; together exactly
  `tokenizer.tokenize(line)`. A long line is cut into pieces of about 64K characters,
  so its intermediate words (several times the text's size) never are all in memory."""
  if len(line) <= 2 * _PIECE_CHARS or not isinstance(tokenizer, tokenization.FullTokenizer):
    yield tokenizer.tokenize(line), len(line)
    return
  start = 0
  while start < len(line):
    cut = _CUT_BEFORE.search(line, start + _PIECE_CHARS)
    stop = cut.start() if cut else len(line)
    yield tokenizer.tokenize(line[start:stop]), stop - start
    start = stop


class _LongLines:
  """Warns about lines far longer than an instance holds (a file without line breaks,
  a paragraph per line at a short max_seq_length): the original keeps only
  max_seq_length tokens of such a line per instance and silently drops the rest."""

  MAX_WARNINGS = 10

  def __init__(self, max_seq_length):
    self.max_seq_length = max_seq_length
    self.usable = max_seq_length - 4  # [CLS] a [SEP] b [SEP], b at least one token
    self.count = self.cut = 0

  def check(self, input_file, number, length):
    if length <= 2 * (self.max_seq_length - 3):  # a bit too long loses a few, as always
      return
    self.count += 1
    self.cut += length - self.usable
    if self.count <= self.MAX_WARNINGS:
      _LOGGER.warning(
          "%s line %d has %d tokens, far more than an instance can use (at most %d at "
          "--max_seq_length=%d): at least %d of them are dropped each time the line is used. "
          "The input should hold one sentence per line (are line breaks missing?)", input_file,
          number, length, self.usable, self.max_seq_length, length - self.usable)

  def summarize(self):
    if self.count > self.MAX_WARNINGS:
      _LOGGER.warning(
          "%d lines in all are far longer than an instance can use at --max_seq_length=%d "
          "(%d more than shown above); at least %d of their tokens are dropped each time they "
          "are used", self.count, self.max_seq_length, self.count - self.MAX_WARNINGS, self.cut)


def iter_documents(input_files, tokenizer, progress_description=None, opener=None,
                   max_seq_length=None):
  """Yields word-piece documents: one sentence per line, a blank line ends a document.

  Lines that tokenize to nothing are dropped, and so are empty documents (like the
  original, a document may run on from one file into the next). A file without a
  single tokenized line raises UserInputError. With a progress description,
  progress in KiB read is printed to stderr. With `max_seq_length`, lines far
  longer than an instance can use are logged as warnings.
  """
  progress = None
  if progress_description:
    total = sum(_size(f) for f in input_files)
    progress = Progress(max(1, total // 1024), "KiB", progress_description)
  long_lines = _LongLines(max_seq_length) if max_seq_length else None
  pending_bytes = 0

  def advance(size):
    nonlocal pending_bytes
    pending_bytes += size
    if pending_bytes >= 1 << 20:
      progress.update(pending_bytes // 1024)
      pending_bytes %= 1024

  document = []
  for input_file in input_files:
    file_has_text = False
    for number, (line, size) in enumerate(read_text_lines(input_file, opener), 1):
      if not line:
        if document:
          yield document
        document = []
      tokens = []
      done = 0
      for piece, chars in _tokenize_in_pieces(tokenizer, line):
        tokens.extend(piece)
        if progress is not None and chars < len(line):  # progress within a long line
          advance(size * chars // len(line))
          done += size * chars // len(line)
      if progress is not None:
        advance(size - done)
      if tokens:
        document.append(tokens)
        file_has_text = True
        if long_lines is not None:
          long_lines.check(input_file, number, len(tokens))
    if not file_has_text:
      raise no_text_error(input_file)
  if long_lines is not None:
    long_lines.summarize()
  if document:
    yield document
  if progress is not None:
    progress.update(progress.total - progress.done)


def read_documents(input_files, tokenizer, progress_description=None, opener=None,
                   max_seq_length=None):
  """All documents of the corpus in memory, as the original holds them."""
  return list(iter_documents(input_files, tokenizer, progress_description, opener,
                             max_seq_length))
