"""The docs' commands run as written, and runners.md's flags table names every flag.

A reader copies a command from README.md or docs/*.md and expects it to work; nothing else
notices when a flag is renamed or a file moves. test_doc_block runs every fenced shell and
Python block on the tiny checkpoint and small cuts of data/, through the explicit tables below
(what a reader substitutes, and the sizes cut for time), and fails naming the doc, the line of
the block's fence and the output's tail. A block that cannot run here (real weights, a server,
network, a peer package) says so in the doc, on the line before its fence:
`<!-- docs-test: skip (reason) -->` (docs/contributing.md). Blocks the docs chain (a run folder,
an export) are run once and shared: a block first runs the earlier shell blocks of its doc and
the blocks PREREQUISITES names. Python blocks of a doc run together in one process, after its
shell blocks, like a reader's session.
"""

import dataclasses
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from helpers import PROGRAMS, ROOT, TINY, VOCAB_UNCASED, run_script

DOCS = ["README.md"] + sorted(os.path.relpath(p, ROOT)
                              for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
# Blocks the suite leaves out for time (each is a process that loads TensorFlow, and the suite
# runs near its budget), where other tests run the same paths end to end: a whole doc, or
# (doc, a string of the block). BERT_TF_DOCS_TEST=all runs them too.
OVER_BUDGET = {
    "docs/beam_inference.md": "tests/test_beam_inference.py runs the pipeline on each export kind",
    "docs/huggingface.md": "tests/test_hf_checkpoints.py converts both ways, fine-tunes from HF",
    "docs/ner.md": "tests/test_ner.py runs both approaches and the export",
    "docs/sentence_embeddings.md": "tests/test_text_embedder.py runs the export and the pooling",
    "docs/tfhub.md": "tests/test_export_tfhub.py runs the encoder, preprocessor and hub.KerasLayer",
    ("docs/pretraining.md", "--pretraining_objective=ltr"):
        "tests/test_pretraining_objectives.py runs LTR pretraining and its fine-tuning",
    ("README.md", "--train_file=data/own_data"):
        "tests/test_own_data.py runs each problem type end to end, with its export",
}
SHELL, PYTHON = ("bash", "sh", "shell"), ("python",)
SKIP_MARK = re.compile(r"^<!-- docs-test: skip \((.+)\) -->$")
FENCE = re.compile(r"^```(\S*)\s*$")

# Text a reader replaces, and what the test puts there ({name}: a workspace path). Applied in
# order to every block before it runs; the shell blocks also get ENV.
SUBSTITUTIONS = [
    # Outputs go to the test's folder, not the machine's /tmp (first: the others are in /tmp).
    (re.compile(r"(?<![\w.])/tmp/"), "{out}/"),
    ("/path/to/uncased_L-12_H-768_A-12", "{release}"),  # a Google release (README, runners.md)
    ("/path/to/all-MiniLM-L6-v2", "{st_dir}"),           # a sentence-transformers folder
    # The repository's samples, cut to a few examples each (the files themselves exist).
    ("data/pretraining_corpus.txt", "{data}/pretraining_corpus.txt"),
    ("data/mrpc_sample", "{data}/mrpc_sample"),
    ("data/squad_sample.json", "{data}/squad_sample.json"),
    ("data/swag_sample", "{data}/swag_sample"),
    ("data/conll_sample", "{data}/conll_sample"),
]
# Sizes cut for time: the tiny model has 64 positions, and a step or an epoch of a few examples
# runs every line of the code a long run does.
SIZES = [
    (re.compile(r"\b((?:max_)?seq_length=)\d+"), r"\g<1>64"),
    (re.compile(r"(--doc_stride=)\d+"), r"\g<1>16"),
    # run_squad's default --max_query_length=64 needs a --max_seq_length above 67.
    (re.compile(r"(python run_squad\.py )"), r"\g<1>--max_query_length=16 "),
    (re.compile(r"(--train_batch_size=)\d+"), r"\g<1>4"),
    (re.compile(r"(--num_train_epochs=)[\d.]+"), r"\g<1>1"),
    (re.compile(r"(--num_train_steps=)\d+"), r"\g<1>2"),
    (re.compile(r"(--num_warmup_steps=)\d+"), r"\g<1>1"),
    (re.compile(r"model\.ckpt-20\b"), "model.ckpt-2"),  # the checkpoint of --num_train_steps
    (re.compile(r"(--dupe_factor=)\d+"), r"\g<1>1"),
    (re.compile(r"(--lstm_units=)\d+"), r"\g<1>8"),
    # The tiny model has 2 layers.
    (re.compile(r"--layers=-1,-2,-3,-4\b"), "--layers=-1,-2"),
    (re.compile(r"concat_last_four"), "last_hidden"),  # run_ner --features, and its file
]
# Environment variables the docs name ($BERT_DIR, ...), as workspace paths.
ENV = {"BERT_DIR": "{release}", "HF_DIR": "{hf_dir}", "ST_DIR": "{st_dir}"}
# CoNLL-2003 is cased: docs/ner.md's --do_lower_case=false needs a release named cased_*.
ENV_OF_DOC = {"docs/ner.md": {"BERT_DIR": "{cased_release}"}}
# Blocks of other docs a doc reads the outputs of: (doc, a string of the block).
PREREQUISITES = {
    "docs/beam_inference.md": [("README.md", "run_classifier.py")],
    "docs/huggingface.md": [("README.md", "run_classifier.py")],
    "docs/pretraining.md": [("README.md", "create_pretraining_data.py")],
    "docs/serving.md": [("README.md", "run_classifier.py")],
    "docs/tfhub.md": [("README.md", "export_tfhub.py")],
}
# Shell blocks that read what later blocks of their doc write: run after the doc's others.
RUN_LAST = [("docs/ner.md", "cat /tmp/ner/ner_labels.json")]
# Blocks run a second time as soon as the first run succeeds: the second run must succeed too
# and say what it reused (re-running a finished command is safe, issue 33).
RERUN = {("README.md", "run_classifier.py"): ["Kept the SavedModel in",
                                              "Already trained to step"]}


@dataclasses.dataclass(frozen=True)
class Block:
  doc: str
  line: int  # of the opening fence, 1-based
  lang: str
  text: str
  skip: str = ""  # the reason given in the doc, if skipped

  @property
  def name(self):
    return "%s:%d" % (self.doc, self.line)


def read_blocks(doc):
  """Every fenced block of `doc` with its language and the skip reason on the line before."""
  with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
    lines = f.read().split("\n")
  blocks, i = [], 0
  while i < len(lines):
    match = FENCE.match(lines[i])
    if not match:
      i += 1
      continue
    end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
    before = lines[i - 1].strip() if i else ""
    skip = SKIP_MARK.match(before)
    blocks.append(Block(doc, i + 1, match.group(1), "\n".join(lines[i + 1:end]) + "\n",
                        skip.group(1) if skip else ""))
    i = end + 1
  return blocks


def runnable_blocks():
  return [b for doc in DOCS for b in read_blocks(doc) if b.lang in SHELL + PYTHON]


def find_block(doc, needle):
  found = [b for b in read_blocks(doc) if b.lang in SHELL + PYTHON and needle in b.text]
  assert found, "no block of %s holds %r (the tables of tests/test_docs.py)" % (doc, needle)
  return found[0]


# ---------------------------------------------------------------------------------------------
# Quick checks of the docs' markup and of the tables above.


def test_skip_marks_precede_a_block_and_give_a_reason():
  for doc in DOCS:
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
      lines = f.read().split("\n")
    for i, line in enumerate(lines):
      if re.match(r"<!--\s*docs-test", line):  # not an indented or quoted example of one
        assert SKIP_MARK.match(line.strip()), "%s:%d: write <!-- docs-test: skip (reason) -->" % (
            doc, i + 1)
        assert i + 1 < len(lines) and FENCE.match(lines[i + 1]), (
            "%s:%d: the skip mark must be the line right before a fence" % (doc, i + 1))


def test_substitution_tables_name_text_the_docs_hold():
  """A stale entry would hide that a doc changed what the reader has to substitute."""
  text = "".join(b.text for b in runnable_blocks() if not b.skip)
  for old, _ in SUBSTITUTIONS + SIZES:
    assert (old.search(text) if hasattr(old, "search") else old in text), old
  keys = [k for v in PREREQUISITES.values() for k in v] + RUN_LAST + list(RERUN) + [
      k for k in OVER_BUDGET if isinstance(k, tuple)]
  for doc, needle in keys:
    find_block(doc, needle)
  assert all(k in DOCS for k in OVER_BUDGET if isinstance(k, str))


# ---------------------------------------------------------------------------------------------
# The workspace: a Google-release-shaped folder, HF and sentence-transformers folders, cuts of
# the samples, and a working folder where the scripts and data/ are links to the checkout.


def _copy_head(source, target, keep):
  """The first lines of `source` while keep(lines so far, line) holds."""
  os.makedirs(os.path.dirname(target), exist_ok=True)
  kept = []
  with open(source, encoding="utf-8") as f:
    for line in f:
      if not keep(kept, line):
        break
      kept.append(line)
  with open(target, "w", encoding="utf-8") as f:
    f.writelines(kept)


def _blank_lines(lines):
  return sum(1 for line in lines if not line.strip())


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
  root = tmp_path_factory.mktemp("docs")
  paths = {name: str(root / name) for name in ("out", "data", "work")}
  for name in ("out", "work"):
    os.makedirs(paths[name])
  for cased in ("", "cased_"):  # the checks read the casing from the folder's name
    release = root / ("%s_L-2_H-32_A-4" % (cased.rstrip("_") or "uncased"))
    shutil.copytree(TINY.dir, release)
    shutil.copy(VOCAB_UNCASED, release / "vocab.txt")
    paths[cased + "release"] = str(release)
  from bert_tf.checkpoints import conversion
  paths["hf_dir"] = str(root / "hf_bert")
  conversion.convert_to_hf(os.path.join(paths["release"], "bert_model.ckpt"), paths["hf_dir"])
  from test_text_embedder import write_st_folder
  paths["st_dir"] = write_st_folder(root / "st_model")

  data = os.path.join(ROOT, "data")
  for split in ("train", "dev", "test"):  # 8 examples each
    _copy_head(os.path.join(data, "mrpc_sample", split + ".tsv"),
               os.path.join(paths["data"], "mrpc_sample", split + ".tsv"),
               lambda kept, _: len(kept) < 9)
  for split in ("train", "val"):
    _copy_head(os.path.join(data, "swag_sample", split + ".csv"),
               os.path.join(paths["data"], "swag_sample", split + ".csv"),
               lambda kept, _: len(kept) < 9)
  for split in ("train", "dev", "test"):  # the first 12 sentences
    _copy_head(os.path.join(data, "conll_sample", split + ".txt"),
               os.path.join(paths["data"], "conll_sample", split + ".txt"),
               lambda kept, _: _blank_lines(kept) < 13)
  _copy_head(os.path.join(data, "pretraining_corpus.txt"),  # 6 documents
             os.path.join(paths["data"], "pretraining_corpus.txt"),
             lambda kept, _: _blank_lines(kept) < 6)
  with open(os.path.join(data, "squad_sample.json"), encoding="utf-8") as f:
    squad = json.load(f)
  article = squad["data"][0]
  article["paragraphs"] = article["paragraphs"][:1]
  article["paragraphs"][0]["qas"] = article["paragraphs"][0]["qas"][:4]
  with open(os.path.join(paths["data"], "squad_sample.json"), "w", encoding="utf-8") as f:
    json.dump(dict(squad, data=[article]), f)

  # The blocks run in `work`, so relative outputs stay out of the checkout.
  for name in os.listdir(ROOT):
    if name.endswith(".py") or name in ("data", "tests", "requirements.txt"):
      os.symlink(os.path.join(ROOT, name), os.path.join(paths["work"], name))
  return paths


def _substituted(text, paths):
  for old, new in SUBSTITUTIONS:
    new = new.format(**paths)
    text = old.sub(new.replace("\\", "\\\\"), text) if hasattr(old, "sub") else text.replace(
        old, new)
  for pattern, new in SIZES:
    text = pattern.sub(new, text)
  return text


def _env(doc, paths):
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2",
             PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
  for name, value in dict(ENV, **ENV_OF_DOC.get(doc, {})).items():
    env[name] = value.format(**paths)
  return env


# ---------------------------------------------------------------------------------------------
# Running blocks: each once, in its doc's order, sharing what the docs chain.


@dataclasses.dataclass
class Outcome:
  ok: bool
  output: str
  reached: tuple = ()  # Python blocks: the lines of the blocks that finished


_OUTCOMES = {}  # Block.name -> Outcome, for the module's tests


_NOISE = re.compile(r"^(WARNING: All log messages before absl|[IW]0000 ).*\n", re.M)


def _tail(output, chars=3000):
  """The end of `output` without TensorFlow's start-up lines."""
  return _NOISE.sub("", output)[-chars:]


def _run(command, block, paths, timeout=900):
  """A doc's block (bash, or its Python blocks written to a file) as a reader runs it: in the
  work folder with the doc's environment (_env), not a script of the checkout, so not through
  helpers.run_script."""
  result = subprocess.run(command, cwd=paths["work"], env=_env(block.doc, paths), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
  return result.returncode, result.stdout


def _shell(block, paths):
  code, output = _run(["bash", "-e", "-o", "pipefail", "-x", "-c",
                       _substituted(block.text, paths)], block, paths)
  return Outcome(code == 0, output)


def _python_group(blocks, paths):
  """The blocks as one script, a marker printed after each that finishes."""
  parts = ["import sys as _docs_test_sys\n"]
  for block in blocks:
    parts.append(_substituted(block.text, paths))
    parts.append("print('docs-test: finished line %d', file=_docs_test_sys.stderr, flush=True)\n"
                 % block.line)
  script = os.path.join(paths["out"], "%s.%d.py" % (blocks[0].doc.replace("/", "_"),
                                                    blocks[0].line))
  with open(script, "w", encoding="utf-8") as f:
    f.write("".join(parts))
  code, output = _run([sys.executable, script], blocks[0], paths)
  reached = tuple(int(n) for n in re.findall(r"docs-test: finished line (\d+)", output))
  return Outcome(code == 0, output, reached)


def _python_groups(doc):
  """A doc's Python blocks in processes: together, except a block that sets os.environ (it
  must come before TensorFlow loads) alone."""
  groups = [[]]
  for block in read_blocks(doc):
    if block.lang not in PYTHON or block.skip or _over_budget(block):
      continue
    if "os.environ[" in block.text:
      groups.extend([[block], []])
    else:
      groups[0].append(block)
  return [g for g in groups if g]


def _over_budget(block):
  """Why the suite leaves `block` out, or None (always None with BERT_TF_DOCS_TEST=all)."""
  if os.environ.get("BERT_TF_DOCS_TEST") == "all":
    return None
  return OVER_BUDGET.get(block.doc) or next(
      (why for key, why in OVER_BUDGET.items()
       if isinstance(key, tuple) and key[0] == block.doc and key[1] in block.text), None)


def _shell_order(doc):
  blocks = [b for b in read_blocks(doc) if b.lang in SHELL and not b.skip and not _over_budget(b)]
  last = [find_block(d, needle) for d, needle in RUN_LAST if d == doc]
  return [b for b in blocks if b not in last] + last


def _needs(block):
  """The blocks that must have run before `block`: other docs' first, then its doc's."""
  needs = [find_block(doc, needle) for doc, needle in PREREQUISITES.get(block.doc, [])]
  order = _shell_order(block.doc)
  if block.lang in SHELL:
    return needs + order[:order.index(block)]
  return needs + order


def _ensure(block, paths):
  """Runs `block` (after what it needs) once; its Outcome."""
  key = block.name
  if key in _OUTCOMES:
    return _OUTCOMES[key]
  for need in _needs(block):
    _ensure(need, paths)  # a failure is reported by its own test; this block may not need it
  if block.lang in SHELL:
    _OUTCOMES[key] = _shell(block, paths)
  else:
    group = next(g for g in _python_groups(block.doc) if block in g)
    outcome = _python_group(group, paths)
    for member in group:
      _OUTCOMES[member.name] = outcome
  return _OUTCOMES[key]


def _failure(block, outcome):
  """None if `block` worked, else what the test says."""
  if (block.line in outcome.reached) if block.lang in PYTHON else outcome.ok:
    return None
  if block.lang in PYTHON:
    group = next(g for g in _python_groups(block.doc) if block in g)
    first = next(b for b in group if b.line not in outcome.reached)
    if first != block:
      return "%s (python block) was not reached: %s, before it in the same process, failed" % (
          block.name, first.name)
  failed = [need.name for need in _needs(block) if not _OUTCOMES[need.name].ok]
  return "%s (%s block) stopped working%s; output's tail:\n%s" % (
      block.name, block.lang, " (after %s failed)" % ", ".join(failed) if failed else "",
      _tail(outcome.output))


@pytest.mark.slow
@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda b: b.name)
def test_doc_block(block, workspace):
  if block.skip:
    pytest.skip("%s: %s" % (block.name, block.skip))
  over = _over_budget(block)
  if over:
    pytest.skip("%s: over the suite's time budget, and %s (BERT_TF_DOCS_TEST=all runs it)" % (
        block.name, over))
  outcome = _ensure(block, workspace)
  message = _failure(block, outcome)
  if message:
    pytest.fail(message, pytrace=False)
  for (doc, needle), reused in RERUN.items():  # at once: the README promises it is safe
    if block == find_block(doc, needle):
      code, output = _run(["bash", "-e", "-o", "pipefail", "-c",
                           _substituted(block.text, workspace)], block, workspace)
      missing = [text for text in reused if text not in output]
      if code or missing:
        pytest.fail("%s, run again: exit %d, missing %s; output's tail:\n%s" % (
            block.name, code, missing, _tail(output)), pytrace=False)


# ---------------------------------------------------------------------------------------------
# runners.md's flags table against the flags each script defines, both ways.

SCRIPT_PATTERNS = ("run_*.py", "create_pretraining_data*.py", "extract_features.py", "export_*.py",
                   "convert_checkpoint.py")  # demo.py's three flags are in docs/demo.md
_FLAG = re.compile(r"`--(\w+)`(?:=(\S+?))?(?=[,;]?\s|[,;]?$)")


def _flags_in(text):
  return {name: default for name, default in _FLAG.findall(text)}


def flags_table():
  """{script: {flag: default written, or ""}} of runners.md's "Flags of every runner"."""
  with open(os.path.join(ROOT, "docs", "runners.md"), encoding="utf-8") as f:
    section = f.read().split("## Flags of every runner", 1)[1]
  shared = _flags_in(section.split("The shared flags of the training runners:", 1)[1]
                     .split("\n\n", 1)[0])
  table = {}
  for script, cell in re.findall(r"^\| `(\w+\.py)` \| (.+) \|$", section, re.M):
    base = re.match(r"those of `(\w+\.py)` except (.+?), plus (.+)$", cell)
    if base:  # the Beam script: another row's flags, less some, plus its own
      flags = {k: v for k, v in table[base.group(1)].items() if k not in _flags_in(base.group(2))}
      flags.update(_flags_in(base.group(3)))
    else:
      flags = _flags_in(cell)
      if "+ the shared flags" in cell:
        flags.update(shared)
    table[script] = flags
  return table


SCRIPTS = sorted({os.path.basename(p) for pattern in SCRIPT_PATTERNS
                  for p in glob.glob(os.path.join(ROOT, pattern))})
# predict_beam.py's flags are in docs/beam_inference.md, not in the runners' table.
GOLDEN_SCRIPTS = sorted(SCRIPTS + ["predict_beam.py"])
FLAGS_GOLDEN = os.path.join(ROOT, "tests", "fixtures", "flags_of_scripts.json")


@pytest.fixture(scope="module")
def defined_flags():
  """{script module: {flag: {"default", "help"}}} as the scripts define them today."""
  result = run_script(PROGRAMS + "flags_of_scripts.py",
                      *(s[:-len(".py")] for s in GOLDEN_SCRIPTS),
                      env={"TF_CPP_MIN_LOG_LEVEL": "2"})
  assert result.returncode == 0, _tail(result.stderr)
  return json.loads(result.stdout.strip().splitlines()[-1])


def test_scripts_flags_defaults_and_help_equal_the_golden(defined_flags):
  """A user's command lines and --helpfull keep working: every script's flags, defaults and
  help text equal tests/fixtures/flags_of_scripts.json (the modules defining them may move).
  A deliberate change rewrites the golden: python tests/programs/flags_of_scripts.py
  <the scripts' module names> with PYTHONPATH=.:tests, its last line into the file."""
  with open(FLAGS_GOLDEN, encoding="utf-8") as f:
    golden = json.load(f)
  problems = []
  for script in sorted(set(golden) | set(defined_flags)):
    old, new = golden.get(script, {}), defined_flags.get(script, {})
    problems += ["%s: --%s is gone" % (script, n) for n in sorted(set(old) - set(new))]
    problems += ["%s: --%s is new" % (script, n) for n in sorted(set(new) - set(old))]
    problems += ["%s --%s: %s was %r, is %r" % (script, n, key, old[n][key], new[n][key])
                 for n in sorted(set(old) & set(new)) for key in ("default", "help")
                 if old[n][key] != new[n][key]]
  assert not problems, "flags changed against %s:\n%s" % (FLAGS_GOLDEN, "\n".join(problems))


def test_runners_flags_table_names_every_flag_of_every_script(defined_flags):
  table = flags_table()
  scripts = SCRIPTS
  assert sorted(table) == scripts, "docs/runners.md's flags table has rows for %s, the scripts " \
      "are %s" % (sorted(table), scripts)
  defined = {script: {name: flag["default"] for name, flag in found.items()}
             for script, found in defined_flags.items()}
  problems = []
  for script in scripts:
    real, documented = defined[script[:-len(".py")]], table[script]
    problems += ["%s --%s is not in the table" % (script, name)
                 for name in sorted(set(real) - set(documented))]
    problems += ["%s has no flag --%s" % (script, name)
                 for name in sorted(set(documented) - set(real))]
    # A default the table states must be the flag's (a flag defaulting to None may document
    # the value it then takes).
    problems += ["%s --%s: the table says =%s, the default is %s" % (
        script, name, documented[name], real[name]) for name in sorted(set(real) & set(documented))
                 if documented[name] and real[name] is not None
                 and documented[name] != str(real[name])]
  assert not problems, "docs/runners.md, Flags of every runner:\n" + "\n".join(problems)
