"""CoNLL-2003 files as distributed, read into documents of tagged sentences.

The format: one word per line, whitespace-separated columns with the word first and
the NER tag last (the four-column originals and two-column files alike); a blank
line between sentences; `-DOCSTART-` lines between documents. A file with one column
(words only, e.g. text to tag) reads with no tags.

Tags come in IOB1 (the original CoNLL-2003 encoding: I- opens a chunk, B- only
separates two adjacent chunks of one type) or IOB2/BIO (every chunk opens with B-).
Training uses IOB2 labels; `detect_scheme` tells which one a file uses, so that
predictions are written back in the file's own scheme.
"""

import dataclasses
import os
import re

from bert_tf.errors import UserInputError
from bert_tf.utils import user_files

DOCSTART = "-DOCSTART-"
_COLUMNS = re.compile(r"[ \t]+")
SCHEMES = ("iob1", "iob2")
# The file names of each split: the usual ones, then the original CoNLL-2003 names.
SPLIT_FILES = {"train": ("train.txt", "eng.train"),
               "dev": ("dev.txt", "valid.txt", "eng.testa"),
               "test": ("test.txt", "eng.testb")}
# The file each split of a run reads: training, --do_eval and --do_predict.
RUN_SPLITS = {"train": "train", "eval": "dev", "predict": "test"}


@dataclasses.dataclass
class Sentence:
  words: list
  tags: list = None  # None: the file has no tag column
  line: int = 0  # the file line of its first word, for messages


@dataclasses.dataclass
class Document:
  sentences: list
  guid: str = ""

  @property
  def words(self):
    return [w for s in self.sentences for w in s.words]


def split_file(data_dir, split):
  """The path of a split's file in --data_dir (any of its usual names), or an error."""
  for name in SPLIT_FILES[split]:
    path = os.path.join(data_dir, name)
    if os.path.isfile(path):
      return path
  raise UserInputError("No %s file in --data_dir=%s: expected one of %s." %
                       (split, data_dir, ", ".join(SPLIT_FILES[split])))


def read_conll(path):
  """[Document] of a CoNLL file; sentences keep their words and tags as written."""
  text = user_files.read_text(path, "CoNLL file", "(check --data_dir)")
  documents, sentences, words, tags = [], [], [], []
  columns, start = None, 0

  def end_sentence():
    nonlocal words, tags
    if words:
      sentences.append(Sentence(words, tags if columns and columns > 1 else None, start))
    words, tags = [], []

  def end_document():
    nonlocal sentences
    end_sentence()
    if sentences:
      documents.append(Document(sentences, "%s-%d" % (os.path.basename(path), len(documents))))
    sentences = []

  # Lines end at "\n" (or "\r\n") only, columns are split at spaces and tabs only: a form feed
  # or another separator character inside a line is part of a word, as the CoNLL tools read it.
  for number, line in enumerate(text.split("\n"), 1):
    fields = _COLUMNS.split(line.rstrip("\r").strip(" \t")) if line.strip(" \t\r") else []
    if not fields:
      end_sentence()
      continue
    if fields[0] == DOCSTART:
      end_document()
      continue
    if columns is None:
      columns = len(fields)
    elif len(fields) != columns:
      raise UserInputError("%s line %d has %d column(s), the lines before it %d; every word "
                           "line needs the same columns (word first, tag last)." %
                           (path, number, len(fields), columns))
    if not words:
      start = number
    words.append(fields[0])
    if columns > 1:
      tags.append(fields[-1])
  end_document()
  if not documents:
    raise UserInputError("CoNLL file %s holds no words." % path)
  for document in documents:
    for sentence in document.sentences:
      for i, tag in enumerate(sentence.tags or ()):
        if tag != "O" and not (tag[:2] in ("B-", "I-") and len(tag) > 2):
          raise UserInputError("%s line %d: tag %r is not O, B-TYPE or I-TYPE." %
                               (path, sentence.line + i, tag))
  return documents


def _chunk_type(tag):
  return tag[2:] if tag != "O" else None


def detect_scheme(documents):
  """"iob1" if some chunk opens with I- (after O or another type), else "iob2"."""
  for document in documents:
    for sentence in document.sentences:
      previous = "O"
      for tag in sentence.tags or ():
        if tag.startswith("I-") and _chunk_type(previous) != _chunk_type(tag):
          return "iob1"
        previous = tag
  return "iob2"


def to_iob2(tags):
  """IOB1 (or IOB2) tags -> IOB2: an I- that opens a chunk becomes B-."""
  out, previous = [], "O"
  for tag in tags:
    if tag.startswith("I-") and _chunk_type(previous) != _chunk_type(tag):
      tag = "B-" + tag[2:]
    out.append(tag)
    previous = tag
  return out


def from_iob2(tags, scheme):
  """IOB2 tags -> `scheme`; for IOB1, B- stays only where a chunk follows one of its type."""
  if scheme == "iob2":
    return list(tags)
  out, previous = [], "O"
  for tag in tags:
    original = tag
    if tag.startswith("B-") and _chunk_type(previous) != _chunk_type(tag):
      tag = "I-" + tag[2:]
    out.append(tag)
    previous = original
  return out


def label_list(documents):
  """The IOB2 labels of the training documents: "O" first, then sorted by type, B before I."""
  labels = {tag for d in documents for s in d.sentences for tag in to_iob2(s.tags or [])}
  types = sorted({_chunk_type(t) for t in labels if t != "O"})
  return ["O"] + [prefix + t for t in types for prefix in ("B-", "I-")]
