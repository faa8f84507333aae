"""The import layers of docs/contributing.md, checked on every import of bert_tf/ and the scripts.

The table in the doc's "## The layers" is the one source: these tests parse it, so moving a
module means editing the doc, and an import that breaks the layering fails the quick loop
(imports inside functions count, as the doc says) naming the file, the line and both layers.
"""

import ast
import fnmatch
import os

from helpers import ROOT

DOC = "docs/contributing.md"


def layer_table(root):
  """[(layer, [pattern, ...])], highest layer first, from the code block under '## The layers'.

  A row starts at column 0 with the layer's name; its modules run up to the first colon (the
  rest of the row, continuation lines included, describes the layer). A name without a folder
  is in the folder of the name before it; a folder (ending in '/') stands for every module under
  it.
  """
  with open(os.path.join(root, *DOC.split("/")), encoding="utf-8") as f:
    text = f.read()
  assert "\n## The layers\n" in text, f"{DOC} has no '## The layers' section"
  section = text.split("\n## The layers\n", 1)[1].split("\n## ", 1)[0]
  assert section.count("```") >= 2, f"{DOC}: '## The layers' has no ``` block with the table"
  rows, described, folder = [], True, ""
  for line in section.split("```")[1].splitlines()[1:]:
    if not line.strip():
      continue
    if not line[0].isspace():
      name, _, line = line.partition(" ")
      rows.append((name, []))
      described, folder = False, ""
    if described:
      continue
    modules, colon, _ = line.partition(":")
    described = bool(colon)
    for entry in (e.strip() for e in modules.split(",")):
      if not entry:
        continue
      path = entry if "/" in entry.rstrip("/") else folder + entry
      folder = path.rstrip("/").rpartition("/")[0] + "/" if "/" in path.rstrip("/") else ""
      rows[-1][1].append(path)
  return rows


def _matches(path, pattern):
  if pattern.endswith("/"):
    return path.startswith(pattern)
  return fnmatch.fnmatchcase(path, pattern) and path.count("/") == pattern.count("/")


def python_files(root):
  """Every module the layering covers, as paths from the root: bert_tf/**.py and ./*.py."""
  paths = []
  for folder, dirs, names in os.walk(os.path.join(root, "bert_tf")):
    dirs[:] = sorted(d for d in dirs if d != "__pycache__")
    paths += [os.path.relpath(os.path.join(folder, n), root).replace(os.sep, "/")
              for n in sorted(names) if n.endswith(".py")]
  return paths + sorted(n for n in os.listdir(root) if n.endswith(".py"))


def module_name(path):
  name = path[:-len(".py")].replace("/", ".")
  return name[:-len(".__init__")] if name.endswith(".__init__") else name


def _known(name, modules):
  """The longest dotted prefix of `name` that is one of `modules` (None: another package's)."""
  while name and name not in modules:
    name = name.rpartition(".")[0]
  return name or None


def imports(root, path, modules):
  """[(line, module)] for every import in `path` of one of `modules`, at any depth."""
  with open(os.path.join(root, path), encoding="utf-8") as f:
    tree = ast.parse(f.read(), filename=path)
  me = module_name(path)
  package = me if path.endswith("__init__.py") else me.rpartition(".")[0]
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      targets = {_known(alias.name, modules) for alias in node.names}
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:  # from . import x, from ..y import z
        parent = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
        base = f"{parent}.{base}" if base else parent
      # `from package import module` imports the module and runs the package's __init__ (so
      # it counts as importing both); `from module import name` imports the module.
      targets = {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules
                 else _known(base, modules) for alias in node.names}
      if any(f"{base}.{alias.name}" in modules for alias in node.names):
        targets.add(_known(base, modules))
    else:
      continue
    found += [(node.lineno, t) for t in sorted(targets - {None, me})]
  return found


def _layers_of(root):
  """({module: layer index}, [problem]) for every module: in exactly one row of the table."""
  table = layer_table(root)
  layer, problems = {}, []
  for path in python_files(root):
    rows = [i for i, (_, patterns) in enumerate(table) if any(_matches(path, p) for p in patterns)]
    if not rows:
      problems.append(f"{path}: in no layer of the table in {DOC} ('## The layers')")
    elif len(rows) > 1:
      problems.append(f"{path}: in several layers of {DOC}: "
                      + ", ".join(table[i][0] for i in rows))
    else:
      layer[module_name(path)] = rows[0]
  return table, layer, problems


def _import_graph(root):
  """[(path, line, importer, imported)] over the covered modules."""
  paths = python_files(root)
  modules = {module_name(p) for p in paths}
  return [(path, line, module_name(path), target)
          for path in paths for line, target in imports(root, path, modules)]


def missing_modules(root):
  return _layers_of(root)[2]


def stale_entries(root):
  """Table entries that match no module: a module renamed or removed without the doc."""
  paths = python_files(root)
  return [f"{DOC}: layer {name}: {pattern} matches no module"
          for name, patterns in layer_table(root) for pattern in patterns
          if not any(_matches(path, pattern) for path in paths)]


def upward_imports(root):
  table, layer, _ = _layers_of(root)
  return [f"{path}:{line}: {src} ({table[layer[src]][0]}) imports {dst} "
          f"({table[layer[dst]][0]}), a higher layer"
          for path, line, src, dst in _import_graph(root)
          if src in layer and dst in layer and layer[dst] < layer[src]]


def import_cycles(root):
  """One cycle per strongly connected group of bert_tf modules, each import as file:line."""
  where, graph = {}, {}
  for path, line, src, dst in _import_graph(root):
    if src.startswith("bert_tf") and dst.startswith("bert_tf"):
      where.setdefault((src, dst), f"{path}:{line}")
      graph.setdefault(src, set()).add(dst)
  # Tarjan's strongly connected components.
  index, low, stack, on_stack, groups = {}, {}, [], set(), []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for nxt in sorted(graph.get(node, ())):
      if nxt not in index:
        visit(nxt)
        low[node] = min(low[node], low[nxt])
      elif nxt in on_stack:
        low[node] = min(low[node], index[nxt])
    if low[node] == index[node]:
      group = set()
      while True:
        member = stack.pop()
        on_stack.discard(member)
        group.add(member)
        if member == node:
          break
      if len(group) > 1:
        groups.append(group)

  for node in sorted(graph):
    if node not in index:
      visit(node)
  problems = []
  for group in groups:
    start = min(group)
    paths, frontier = {start: [start]}, [start]
    while frontier and start not in paths[start][1:]:
      node = frontier.pop(0)
      for nxt in sorted(graph[node] & group):
        if nxt == start:
          paths[start] = paths[node] + [start]
          break
        if nxt not in paths:
          paths[nxt] = paths[node] + [nxt]
          frontier.append(nxt)
    cycle = paths[start]
    others = sorted(group - set(cycle))
    problems.append("import cycle: " + "; ".join(
        f"{where[a, b]} {a} imports {b}" for a, b in zip(cycle, cycle[1:]))
        + (f" (and more cycles through {', '.join(others)})" if others else ""))
  return problems


def _report(problems):
  return "\n".join(problems)


def test_every_module_is_in_exactly_one_layer():
  problems = missing_modules(ROOT)
  assert not problems, _report(problems)


def test_every_table_entry_names_a_module():
  problems = stale_entries(ROOT)
  assert not problems, _report(problems)


def test_no_module_imports_a_higher_layer():
  problems = upward_imports(ROOT)
  assert not problems, _report(problems)


def test_no_import_cycle_among_bert_tf_modules():
  problems = import_cycles(ROOT)
  assert not problems, _report(problems)


def test_the_checks_find_planted_violations(tmp_path):
  """A small tree with one violation of each kind: each check names it, and only it."""
  (tmp_path / "docs").mkdir()
  (tmp_path / "docs" / "contributing.md").write_text(
      "# Contributing\n\n## The layers\n\nText.\n\n```\n"
      "scripts   run_*.py: the scripts\n"
      "top       bert_tf/top.py,\n"
      "          pkg/: a package, then a module\n"
      "low       bert_tf/__init__.py, low.py, other.py, gone.py: the\n"
      "          bottom, nothing.py (after the colon: not a module)\n"
      "```\n\n## Style\n", encoding="utf-8")
  files = {
      "run_x.py": "import bert_tf.top\n",
      "bert_tf/__init__.py": "",
      "bert_tf/top.py": "from bert_tf import low\nfrom bert_tf.pkg import a\n",
      "bert_tf/pkg/__init__.py": "",
      "bert_tf/pkg/a.py": "from . import b\nfrom ..low import f\n",
      "bert_tf/pkg/b.py": "import os\nimport bert_tf.pkg.a\n",
      "bert_tf/low.py": "from bert_tf.errors import E\n\ndef f():\n  from bert_tf.pkg import g\n",
      "bert_tf/other.py": "import bert_tf.low\n",
      "bert_tf/stray.py": "import numpy\n",
  }
  for name, text in files.items():
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(text, encoding="utf-8")
  assert [row[0] for row in layer_table(tmp_path)] == ["scripts", "top", "low"]
  assert layer_table(tmp_path)[1][1] == ["bert_tf/top.py", "bert_tf/pkg/"]
  assert missing_modules(tmp_path) == [
      "bert_tf/stray.py: in no layer of the table in docs/contributing.md ('## The layers')"]
  assert stale_entries(tmp_path) == ["docs/contributing.md: layer low: bert_tf/gone.py matches "
                                     "no module"]
  assert upward_imports(tmp_path) == [
      "bert_tf/low.py:4: bert_tf.low (low) imports bert_tf.pkg (top), a higher layer"]
  assert import_cycles(tmp_path) == [
      "import cycle: bert_tf/pkg/a.py:1 bert_tf.pkg.a imports bert_tf.pkg.b; bert_tf/pkg/b.py:2 "
      "bert_tf.pkg.b imports bert_tf.pkg.a"]
  # A module that a cycle reaches through another cycle is named too.
  (tmp_path / "bert_tf" / "pkg" / "__init__.py").write_text("import bert_tf.pkg.a\n")
  assert import_cycles(tmp_path) == [
      "import cycle: bert_tf/low.py:4 bert_tf.low imports bert_tf.pkg; bert_tf/pkg/__init__.py:1 "
      "bert_tf.pkg imports bert_tf.pkg.a; bert_tf/pkg/a.py:2 bert_tf.pkg.a imports bert_tf.low "
      "(and more cycles through bert_tf.pkg.b)"]


def test_the_top_of_bert_tf_holds_only_the_public_modules():
  """The issue's rule for the package's face: folders for the layers, and at the top only the
  modules users import by name (the original's three and a few of ours), at most 12."""
  top = sorted(n for n in os.listdir(os.path.join(ROOT, "bert_tf"))
               if n.endswith(".py") and n != "__init__.py")
  assert top == ["config.py", "errors.py", "heads.py", "layers.py", "modeling.py",
                 "optimization.py", "pooling.py", "tokenization.py"]
