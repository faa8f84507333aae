"""The imports users write: every bert_tf name the README and docs/ show resolves, and the flat
paths of the first layout still import (as the moved module, with a DeprecationWarning)."""

import importlib
import os
import re
import sys
import warnings

import pytest

from bert_tf.utils import moved_modules
from helpers import ROOT

DOCS = ["README.md"] + [os.path.join("docs", n)
                        for n in sorted(os.listdir(os.path.join(ROOT, "docs")))
                        if n.endswith(".md")]
# `from bert_tf.x import a, b` in code blocks, and dotted names such as `bert_tf.x.Y` in prose.
FROM_IMPORT = re.compile(r"from (bert_tf(?:\.\w+)*) import ([\w, ]+)")
DOTTED = re.compile(r"(?<![\w./])(bert_tf(?:\.\w+)+)")


def shown_names():
  """{dotted name: first doc that shows it}."""
  names = {}
  for doc in DOCS:
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
      text = f.read()
    for module, imported in FROM_IMPORT.findall(text):
      for name in imported.split(","):
        names.setdefault(f"{module}.{name.strip()}", doc)
    for dotted in DOTTED.findall(text):
      names.setdefault(dotted, doc)
  return names


def resolve(dotted):
  """The object a dotted name reaches: the longest importable module, then attributes."""
  parts = dotted.split(".")
  for cut in range(len(parts), 0, -1):
    try:
      value = importlib.import_module(".".join(parts[:cut]))
    except ModuleNotFoundError:
      continue
    for attribute in parts[cut:]:
      value = getattr(value, attribute)
    return value
  raise ModuleNotFoundError(dotted)


def test_the_docs_show_names_to_check():
  names = shown_names()
  assert "bert_tf.modeling.BertModel" in names and "bert_tf.text.BertTextTokenizer" in names


@pytest.mark.parametrize("dotted", sorted(shown_names()))
def test_every_name_the_docs_show_resolves(dotted):
  old_path = dotted.split(".")[1] in moved_modules.MOVED and dotted.count(".") == 1
  with warnings.catch_warnings():
    # The docs show no deprecated path, except where they name the old paths themselves.
    warnings.simplefilter("ignore" if old_path else "error", DeprecationWarning)
    try:
      resolve(dotted)
    except (ImportError, AttributeError) as e:
      pytest.fail(f"{shown_names()[dotted]} shows {dotted}, which does not resolve: {e}")


@pytest.mark.parametrize("old", sorted(moved_modules.MOVED))
def test_an_old_flat_path_imports_the_moved_module_with_a_warning(old):
  new = importlib.import_module("bert_tf." + moved_modules.MOVED[old])
  sys.modules.pop("bert_tf." + old, None)
  with pytest.warns(DeprecationWarning, match=f"bert_tf.{old} moved to {new.__name__}"):
    module = importlib.import_module("bert_tf." + old)
  assert module is new
