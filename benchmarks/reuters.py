"""Reuters-21578 ModApte files for the benchmarks that fine-tune on real text (own_data,
long_documents): reading the TSVs, writing JSONL inputs, scoring a topic, and reading a
run_classifier log's training time. It defines flags only when asked (`define_data_flags`),
so that every benchmark can import it."""

import json
import os
import re
import sys

from absl import flags

TOPICS = ("grain", "corn")


def define_data_flags():
  """--reuters_train and --reuters_test, the ModApte files a benchmark reads."""
  flags.DEFINE_string("reuters_train", None, "Reuters-21578 ModApte training TSV (header "
                      "`grain corn text`, one article a row).")
  flags.DEFINE_string("reuters_test", None, "The ModApte test TSV (same columns).")


def read_reuters(path):
  """[(text, {topic: bool})] of a ModApte TSV."""
  with open(path, encoding="utf-8") as f:
    lines = [line.rstrip("\r\n") for line in f if line.strip()]
  header = lines[0].split("\t")
  missing = [c for c in TOPICS + ("text",) if c not in header]
  if missing:
    sys.exit("%s: no column %s in the header %s." % (path, ", ".join(missing), header))
  rows = []
  for number, line in enumerate(lines[1:], 2):
    fields = line.split("\t")
    if len(fields) != len(header):
      sys.exit("%s line %d: %d fields, not %d." % (path, number, len(fields), len(header)))
    rows.append((fields[header.index("text")],
                 {t: fields[header.index(t)] == "1" for t in TOPICS}))
  return rows


def write_jsonl(path, rows):
  """Writes the JSON lines whole (a temporary file renamed), so that runs of another
  invocation on the same --work_dir never read a half-written file."""
  temporary = "%s.%d.tmp" % (path, os.getpid())
  with open(temporary, "w", encoding="utf-8") as f:
    f.writelines(json.dumps(row) + "\n" for row in rows)
  os.replace(temporary, path)


def scores(gold, predicted):
  """(F1, accuracy) of one topic's gold and predicted booleans (F1 0 with no positive at all,
  as scikit-learn's zero_division=0)."""
  tp = sum(g and p for g, p in zip(gold, predicted))
  wrong = sum(g != p for g, p in zip(gold, predicted))
  f1 = 2 * tp / (2 * tp + wrong) if tp or wrong else 0.0
  return f1, 1 - wrong / len(gold)


def log_seconds(line):
  """Seconds since midnight of an absl log line (`I1126 17:33:50.043098 ...`)."""
  match = re.match(r"[IWEF]\d{4} (\d\d):(\d\d):(\d\d\.\d+)", line)
  return int(match.group(1)) * 3600 + int(match.group(2)) * 60 + float(match.group(3))


def training_seconds(log_path):
  """Seconds from run_classifier's "Running training" line to its last "step N:" line."""
  start = end = None
  with open(log_path, encoding="utf-8", errors="replace") as f:
    for line in f:
      line = line.rsplit("\r", 1)[-1]
      if "***** Running training" in line:
        start = log_seconds(line)
      elif start is not None and re.search(r"\] step \d+: loss", line):
        end = log_seconds(line)
  if start is None or end is None:
    return None
  return (end - start) % 86400
