"""The user's own labeled file (.csv, .tsv or .jsonl, the format from its extension) read into
rows, and the labels in it read as names, numbers or lists of names.

No TensorFlow here: a bad file is found, and named with its line and the fix, before any model
is built. CSV and TSV go through the csv module, so a quoted field may hold the delimiter, quotes
and newlines; the first row names the columns. A JSONL file holds one JSON object per line.
"""

import csv
import dataclasses
import io
import json
import math
import os
from typing import Any, Optional
import unicodedata

from bert_tf.errors import UserInputError
from bert_tf.utils import user_files

DELIMITERS = {".csv": ",", ".tsv": "\t", ".jsonl": None}
# A text field may be a whole document: the csv module's default limit (128 KiB a field) is
# not a property of the file, and its error would read as bad quoting.
FIELD_SIZE_LIMIT = 2 ** 31 - 1
PROBLEM_TYPES = ("single_label", "multi_label", "regression")


@dataclasses.dataclass(frozen=True)
class Columns:
  """Which column holds what (the --*_column flags) and how a multi-label field is split."""
  text: str = "text"
  text_b: Optional[str] = None
  label: str = "label"
  id: Optional[str] = None
  label_delimiter: str = "|"


def check_distinct_columns(columns):
  """The text, second text and label are three columns: one column named twice would train on
  the label as text, or on one text as a pair."""
  named = [(flag, getattr(columns, field)) for field, flag in _FLAGS.items()
           if field != "id" and getattr(columns, field) is not None]
  for i, (flag, name) in enumerate(named):
    for other, other_name in named[:i]:
      if name == other_name:
        raise UserInputError("%s=%s names the column %s names too; each of --text_column, "
                             "--text_b_column and --label_column names its own column." %
                             (flag, name, other))


@dataclasses.dataclass(frozen=True)
class Row:
  """One input row: its index in the file (0-based), the line it starts on, its texts, its
  label as the file holds it (None when the file has no label column) and its id."""
  row: int
  line: int
  text_a: str
  text_b: Optional[str]
  label: Any
  id: Any = None


def read_rows(path, columns, flag, needs_label=True):
  """The rows of the file `path` given by `flag` (e.g. "--train_file"); `needs_label`: the
  label column must be there (train and eval files; a predict file may lack it). The id
  column must be there only in a predict file (predictions.jsonl copies it)."""
  delimiter = file_format(path, flag)
  text = user_files.read_text(path, "Data file", "(check %s)" % flag)
  if not text.strip():
    raise UserInputError("%s=%s is empty; it needs %s." % (flag, path, _shape(delimiter, columns)))
  records = (_jsonl(path, text) if delimiter is None else
             _delimited(path, text, delimiter, columns, needs_label))
  if not records:
    raise UserInputError("%s=%s has no rows, only its header; add rows (%s)." % (
        flag, path, _shape(delimiter, columns)))
  if delimiter is None:  # a JSON line's keys are its own
    for line, record in records:
      _check_columns(path, line, list(record), columns, "key", needs_label)
  return [_row(path, index, line, record, columns)
          for index, (line, record) in enumerate(records)]


def file_format(path, flag):
  """The file's column delimiter from its extension (None: JSONL)."""
  extension = os.path.splitext(str(path))[1].lower()
  if extension not in DELIMITERS:
    raise UserInputError("%s=%s: the format is read from the extension, which must be .csv, "
                         ".tsv or .jsonl; rename the file." % (flag, path))
  return DELIMITERS[extension]


def _shape(delimiter, columns):
  names = [c for c in (columns.id, columns.text, columns.text_b, columns.label) if c]
  if delimiter is None:
    return "one JSON object a line, with the keys %s" % ", ".join(names)
  return "a first line naming the columns, e.g. %s" % delimiter.join(names)


def _delimited(path, text, delimiter, columns, needs_label):
  """[(line, {column: value})] of a CSV/TSV text; the header's names (spaces around them
  dropped) must be distinct. Strict quoting: a quote left open would otherwise swallow the
  rows after it into one field, silently."""
  csv.field_size_limit(max(csv.field_size_limit(), FIELD_SIZE_LIMIT))
  reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
  line = 1
  try:
    header = next(reader)
    while not any(header):  # blank lines before the header
      header, line = next(reader), reader.line_num
  except StopIteration:
    header = []
  except csv.Error as e:
    raise _quoting_error(path, line, reader.line_num, e, delimiter) from None
  header = [name.strip() for name in header]
  seen = set()
  for name in header:
    if name in seen:
      raise UserInputError("%s line %d: the column name %r appears twice in the header; rename "
                           "one." % (path, line, name))
    seen.add(name)
  _check_columns(path, line, header, columns, "column", needs_label)
  records = []
  while True:
    start = reader.line_num + 1
    try:
      fields = next(reader)
    except StopIteration:
      break
    except csv.Error as e:
      raise _quoting_error(path, start, reader.line_num, e, delimiter) from None
    if len(fields) <= 1 and not "".join(fields).strip():
      continue  # a blank line, or one of spaces
    if len(fields) != len(header):
      raise UserInputError("%s line %d has %d fields, the header %d (%s); quote a field that "
                           "holds %s (\"...\")." % (path, start, len(fields), len(header),
                                                    ", ".join(header), _name(delimiter)))
    records.append((start, dict(zip(header, fields))))
  return records


def _quoting_error(path, start, end, error, delimiter):
  lines = "line %d" % start if end <= start else "lines %d-%d" % (start, end)
  return UserInputError("%s %s: %s; fix the quoting (a field that starts with \" ends with \" "
                        "right before %s or the line's end; a quote inside it is \"\")." %
                        (path, lines, str(error).replace("\t", "\\t"), _name(delimiter)))


def _name(delimiter):
  return {",": "a comma", "\t": "a tab"}[delimiter]


class _DuplicateKey(Exception):
  """A key twice in one JSON object (json keeps the last one silently)."""


def _jsonl(path, text):
  """[(line, object)] of a JSONL text (blank lines skipped); a key may appear once a line."""

  def distinct(pairs):
    keys = [k for k, _ in pairs]
    for key in keys:
      if keys.count(key) > 1:
        raise _DuplicateKey(key)
    return dict(pairs)

  records = []
  for number, line in enumerate(text.split("\n"), 1):
    if not line.strip():
      continue
    try:
      record = json.loads(line, object_pairs_hook=distinct)
    except _DuplicateKey as e:
      raise UserInputError("%s line %d: the key %r appears twice in the object; rename one." %
                           (path, number, e.args[0])) from None
    except ValueError as e:
      raise UserInputError("%s line %d is not a JSON object (%s); write one object a line, "
                           "e.g. {\"text\": \"...\", \"label\": \"...\"}." % (path, number, e)
                           ) from None
    if not isinstance(record, dict):
      raise UserInputError("%s line %d is a JSON %s, not an object; write one object a line, "
                           "e.g. {\"text\": \"...\", \"label\": \"...\"}." %
                           (path, number, type(record).__name__))
    records.append((number, record))
  return records


_FLAGS = {"text": "--text_column", "text_b": "--text_b_column", "label": "--label_column",
          "id": "--id_column"}


def _check_columns(path, line, names, columns, what, needs_label=True):
  """Each column the flags name is among `names` (a header, or a JSON line's keys): the label
  with `needs_label`, the id without (a predict file)."""
  for field, flag in _FLAGS.items():
    name = getattr(columns, field)
    if name is None or name in names or (field == "label" and not needs_label) or (
        field == "id" and needs_label):
      continue
    raise UserInputError("%s line %d has no %s %r (its %ss: %s); pass %s=<one of them>, or "
                         "rename the %s." % (path, line, what, name, what,
                                             ", ".join(map(str, names)) or "none", flag, what))


def _row(path, index, line, record, columns):
  texts = [_text(path, line, record, name) if name else None
           for name in (columns.text, columns.text_b)]
  label = record.get(columns.label)
  return Row(index, line, texts[0], texts[1], label,
             record.get(columns.id) if columns.id else None)


def _text(path, line, record, name):
  value = record[name]
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    value = json.dumps(value)
  if not isinstance(value, str):
    raise UserInputError("%s line %d: %r holds %s, not text; write a string there." %
                         (path, line, name, json.dumps(value)))
  if not value.strip():
    raise UserInputError("%s line %d: empty text in %r; fill it in or remove the row." %
                         (path, line, name))
  return value


# Labels.

def _kind(value):
  if isinstance(value, list):
    return "list"
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    return "number"
  return "text"


def _number(value):
  """The float of a finite number or numeric text, else None."""
  try:
    number = float(value)
  except (TypeError, ValueError, OverflowError):
    return None
  return number if math.isfinite(number) and not isinstance(value, bool) else None


def _is_empty(value):
  return value is None or (isinstance(value, str) and not value.strip())


def infer_problem_type(path, rows, delimiter):
  """(problem type, why) from the training file's label column (the log says why)."""
  labeled = [r for r in rows if not _is_empty(r.label)]
  kinds = {}
  for r in labeled:
    kinds.setdefault(_kind(r.label), r)
  if len(kinds) > 1:
    first, other = sorted(kinds.values(), key=lambda r: r.row)[:2]
    raise UserInputError("%s line %d: the label %s is a %s, but line %d's (%s) is a %s; write "
                         "every row's label the same way (a name, a number or a list)." % (
                             path, other.line, json.dumps(other.label), _kind(other.label),
                             first.line, json.dumps(first.label), _kind(first.label)))
  if "list" in kinds:
    return "multi_label", "the labels are JSON lists (line %d)" % kinds["list"].line
  split = next((r for r in labeled if isinstance(r.label, str) and delimiter in r.label), None)
  if split:
    return "multi_label", "line %d's label %r holds --label_delimiter=%s" % (
        split.line, split.label, delimiter)
  numbers = [(r, _number(r.label)) for r in labeled]
  fraction = next((r for r, n in numbers if n is not None and n != int(n)), None)
  other = next((r for r, n in numbers if n is None), None)
  if fraction and other:  # scores with a gap ("NA", NaN) would train as a class per score
    raise UserInputError("%s line %d: the label %s is not a number, but line %d's (%s) has a "
                         "fraction, as a regression's scores do; fix line %d or remove it, or "
                         "pass --problem_type=single_label if the labels are names." % (
                             path, other.line, json.dumps(other.label), fraction.line,
                             fraction.label, other.line))
  if labeled and not other:
    if fraction:
      return "regression", "every label is a number and line %d's (%s) has a fraction" % (
          fraction.line, fraction.label)
    return "single_label", ("every label is a whole number, read as a label name (pass "
                            "--problem_type=regression for scores)")
  return "single_label", "the labels are names"


def _name_of(path, row, value):
  """A label's name; one with a line break would split its eval_results.txt lines."""
  name = value.strip() if isinstance(value, str) else json.dumps(value)
  if "\n" in name or "\r" in name:
    raise UserInputError("%s line %d: the label %s holds a line break; a label name is one "
                         "line." % (path, row.line, json.dumps(name)))
  return name


def label_value(path, row, problem_type, delimiter):
  """The row's label as the model reads it: a name (single_label), a tuple of names
  (multi_label: an empty list or field is no label) or a float (regression)."""
  value = row.label
  if problem_type == "multi_label":
    if _is_empty(value):
      return ()
    items = value if isinstance(value, list) else value.split(delimiter)
    if any(isinstance(item, (list, dict)) or item is None for item in items):
      raise UserInputError("%s line %d: the label list %s holds more than names; list label "
                           "names, e.g. [\"a\", \"b\"]." % (path, row.line, json.dumps(value)))
    names = [_name_of(path, row, item) for item in items]
    return tuple(dict.fromkeys(n for n in names if n))
  if _is_empty(value):
    raise UserInputError("%s line %d: empty label; fill it in or remove the row (an empty "
                         "label means no label only with --problem_type=multi_label)." %
                         (path, row.line))
  if isinstance(value, dict):
    raise UserInputError("%s line %d: the label %s is a JSON object; write a name, a number or "
                         "a list of names." % (path, row.line, json.dumps(value)))
  if isinstance(value, list):
    raise UserInputError("%s line %d: the label %s is a list, but --problem_type=%s wants one "
                         "%s a row; pass --problem_type=multi_label." % (
                             path, row.line, json.dumps(value), problem_type,
                             "number" if problem_type == "regression" else "name"))
  if problem_type == "regression":
    number = _number(value)
    if number is None:
      raise UserInputError("%s line %d: the label %s is not a number, and regression needs one "
                           "in every row; fix it (or, when training on names, pass "
                           "--problem_type=single_label)." % (path, row.line, json.dumps(value)))
    return number
  return _name_of(path, row, value)


def with_labels(path, rows, problem_type, delimiter):
  """`rows` with each label read as `label_value` does."""
  return [dataclasses.replace(r, label=label_value(path, r, problem_type, delimiter))
          for r in rows]


def names_in(rows, problem_type):
  """Every label name of rows read by `with_labels`, in order of first appearance."""
  if problem_type == "regression":
    return []
  names = (n for r in rows for n in (r.label if problem_type == "multi_label" else [r.label]))
  return list(dict.fromkeys(names))


def first_lines(rows, problem_type):
  """{label name: the line it first appears on} of rows read by `with_labels`."""
  lines = {}
  for r in rows:
    for name in (r.label if problem_type == "multi_label" else [r.label]):
      lines.setdefault(name, r.line)
  return lines


def check_name_clashes(path, rows, problem_type):
  """Two names that are one number written two ways ("1" and "1.0" or "01") would train as two
  labels: refused. Returns the names that differ only in case or inner spaces ("Pos" and "pos":
  maybe meant, maybe a typo; the caller warns), as "'Pos' (line 2) and 'pos' (line 5), ...",
  or None."""
  if problem_type == "regression":
    return None
  lines = first_lines(rows, problem_type)
  by_number, by_case = {}, {}
  for name, line in lines.items():
    number = _number(name)
    if number is not None and by_number.setdefault(number, name) != name:
      first = by_number[number]
      raise UserInputError(
          "%s: the labels %r (line %d) and %r (line %d) are one number written two ways, and "
          "would be two labels; write every row's label the same way (or pass "
          "--problem_type=regression for scores)." % (path, first, lines[first], name, line))
    key = unicodedata.normalize("NFKC", " ".join(name.split())).casefold()
    by_case.setdefault(key, []).append(name)
  variants = [names for names in by_case.values() if len(names) > 1]
  if not variants:
    return None
  return ", ".join(" and ".join("%r (line %d)" % (n, lines[n]) for n in names)
                   for names in variants)


def label_order(names, given=None):
  """The run's label order: --labels (`given`) when set, else the names sorted (as numbers
  when every name is a whole number, so 2 comes before 10)."""
  if given:
    return list(given)
  if all(_is_whole(n) for n in names):
    return sorted(names, key=lambda n: (int(n), n))
  return sorted(names)


def _is_whole(name):
  try:
    return str(int(name)) == name
  except ValueError:
    return False


def from_flag(values):
  """The names of --labels (None when unset), distinct and non-empty."""
  if not values:
    return None
  names = [v.strip() for v in values]
  if any(not n for n in names) or len(set(names)) != len(names):
    raise UserInputError("--labels=%s must list distinct, non-empty names." % ",".join(values))
  return names


def unknown_labels(path, rows, problem_type, labels, given=False):
  """The names of `rows` (read by with_labels) not among `labels`, as "'name' (line n), ...";
  None when all are known. `given`: `labels` is --labels, and an unknown name is an error."""
  known, unknown = set(labels), {}
  for r in rows:
    for name in (r.label if problem_type == "multi_label" else [r.label]):
      if name not in known:
        unknown.setdefault(name, r.line)
  if not unknown:
    return None
  listed = ", ".join("%r (line %d)" % item for item in unknown.items())
  if given:
    raise UserInputError("%s names labels not in --labels=%s: %s; add them there, or fix the "
                         "rows." % (path, ",".join(labels), listed))
  return listed
