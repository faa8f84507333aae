"""The style and bug rules a machine checks: ruff with pyproject.toml's [tool.ruff] rules over
the checkout, so a long line or an unused import fails the quick loop rather than a review."""

import ast
import glob
import os

from helpers import ROOT, run_script

CONFIG = os.path.join(ROOT, "pyproject.toml")
# What the rules cover: the package, the tests, the benchmarks, the scripts and the data tools.
FOLDERS = ("bert_tf", "tests", "benchmarks")
FILE_PATTERNS = ("*.py", os.path.join("data", "*.py"))


def _ruff(*paths, cwd=ROOT):
  """`ruff check` of `paths` with the project's rules: (exit code, one line per violation)."""
  result = run_script("ruff", "check", "--config", CONFIG, "--no-cache", "--output-format",
                      "concise", *paths, cwd=cwd, timeout=120)
  assert result.returncode in (0, 1), f"ruff did not run:\n{result.stdout}{result.stderr}"
  lines = [line for line in result.stdout.splitlines() if line.count(":") >= 3]
  return result.returncode, lines


def test_checkout_meets_the_lint_rules():
  paths = [f for f in FOLDERS if os.path.isdir(os.path.join(ROOT, f))]
  for pattern in FILE_PATTERNS:
    paths += sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))
  code, violations = _ruff(*paths)
  assert code == 0 and not violations, (
      f"{len(violations)} lint violations (ruff check; see [tool.ruff] in pyproject.toml):\n"
      + "\n".join(violations))


def test_rules_catch_long_lines_unused_names_and_undefined_names(tmp_path):
  """The config selects the rules it claims: a file with one violation of each is reported."""
  bad = tmp_path / "bad.py"
  bad.write_text(
      "import os\n"                                          # F401: unused import
      "\n"
      "\n"
      "def f():\n"
      "  unused = 1\n"                                       # F841: unused variable
      "  return undefined_name\n"                            # F821: undefined name
      "\n"
      "\n"
      f"X = '{'x' * 95}'\n"                                  # E501: 101 columns
      "\n"
      "\n"
      "def g(items=[]):\n"                                   # B006: mutable default
      "  return items\n", encoding="utf-8")
  code, violations = _ruff(str(bad), cwd=tmp_path)
  assert code == 1
  assert sorted(line.split()[1] for line in violations) == [
      "B006", "E501", "F401", "F821", "F841"], violations
  # 2-space indentation is the style, so it is not a violation (the file above uses it).
  assert not any(line.split()[1].startswith(("E1", "W1")) for line in violations)


# Loading any of these loads TensorFlow, which reads its environment once, when it loads.
TENSORFLOW_MODULES = ("tensorflow", "tensorflow_text", "tensorflow_hub", "keras", "tf_keras")


def tensorflow_before_bert_tf(source):
  """Line of the first top-level TensorFlow import that precedes `import bert_tf` (whose
  __init__ sets TensorFlow's environment defaults), or None: import sorting must not move
  `import bert_tf` below it (the `# isort: skip` on that line keeps it in place)."""
  first = None
  for node in ast.parse(source).body:
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
      if "bert_tf" in names:
        return first
    elif isinstance(node, ast.ImportFrom) and node.level == 0:
      names = [node.module]
    else:
      continue
    if first is None and any(name.split(".")[0] in TENSORFLOW_MODULES for name in names):
      first = node.lineno
  return None


def test_bert_tf_sets_the_environment_before_tensorflow_loads():
  files = [os.path.join(ROOT, "tests", "conftest.py")]
  for pattern in ("*.py", os.path.join("benchmarks", "*.py")):
    files += glob.glob(os.path.join(ROOT, pattern))
  late = {}
  for path in files:
    with open(path, encoding="utf-8") as f:
      line = tensorflow_before_bert_tf(f.read())
    if line:
      late[os.path.relpath(path, ROOT)] = line
  assert not late, "TensorFlow imported before `import bert_tf` (file: line): %s" % late
  assert tensorflow_before_bert_tf("import tensorflow as tf\nimport bert_tf  # noqa\n") == 1
