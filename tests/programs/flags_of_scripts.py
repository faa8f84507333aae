"""The flags each script defines, with their defaults: the script's own and bert_tf's, each
script imported in turn (tests/test_docs.py checks docs/runners.md's table against them).
argv: the scripts' module names; prints {script: {flag: default}}."""

import importlib
import json
import sys

from absl import flags

found = {}
for script in sys.argv[1:]:
  before = set(flags.FLAGS)
  importlib.import_module(script)
  new = set(flags.FLAGS) - before
  found[script] = {name: flags.FLAGS[name].default for name in new
                   if (flags.FLAGS.find_module_defining_flag(name) or "").split(".")[0]
                   in (script, "bert_tf")}
  for name in new:  # the next script defines its own
    delattr(flags.FLAGS, name)
print(json.dumps(found, default=str))
