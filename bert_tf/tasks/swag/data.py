"""SWAG files -> SwagExamples: a context (sent1 and sent2, the start of the sentence the
endings complete) and four endings per row."""

import csv
import dataclasses
import io

from bert_tf.errors import UserInputError
from bert_tf.utils import user_files

NUM_CHOICES = 4
_COLUMNS = ("video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0",
            "ending1", "ending2", "ending3")


@dataclasses.dataclass
class SwagExample:
  swag_id: str
  context: str
  endings: list
  label: int = None


def read_swag_examples(input_file, has_labels):
  """SwagExamples from a SWAG CSV (header row; test files have no label column)."""
  text = user_files.read_text(input_file, "SWAG file", "(check --data_dir)")
  rows = list(csv.DictReader(io.StringIO(text, newline="")))
  if not rows:
    raise UserInputError("SWAG file %s has no rows." % input_file)
  missing = [c for c in _COLUMNS + (("label",) if has_labels else ()) if c not in rows[0]]
  if missing:
    raise UserInputError("SWAG file %s lacks column(s) %s." % (input_file, ", ".join(missing)))
  examples = []
  for number, row in enumerate(rows, 2):  # line 1 is the header
    endings = [row["ending%d" % i] for i in range(NUM_CHOICES)]
    if any(e is None or not e.strip() for e in endings):
      raise UserInputError("%s line %d: an ending is missing or empty." % (input_file, number))
    label = None
    if has_labels:
      try:
        label = int(row["label"])
      except (TypeError, ValueError):
        label = -1
      if not 0 <= label < NUM_CHOICES:
        raise UserInputError("%s line %d: label %r is not 0-%d." %
                             (input_file, number, row["label"], NUM_CHOICES - 1))
    context = " ".join(t for t in (row["sent1"], row["sent2"]) if t)
    swag_id = "%s-%s" % (row["video-id"], row["fold-ind"])
    examples.append(SwagExample(swag_id, context, endings, label))
  return examples
