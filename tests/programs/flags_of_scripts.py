"""The flags each script defines, with their defaults and help: the script's own and bert_tf's,
each script imported in turn (tests/test_docs.py checks docs/runners.md's table and the
golden tests/fixtures/flags_of_scripts.json against them). Which module defines a flag is
left out: --helpfull's headings follow the modules, and modules move.
argv: the scripts' module names; prints {script: {flag: {"default": d, "help": h}}}."""

import importlib
import json
import sys

from absl import flags

found = {}
for script in sys.argv[1:]:
  before = set(flags.FLAGS)
  importlib.import_module(script)
  new = set(flags.FLAGS) - before
  found[script] = {name: {"default": flags.FLAGS[name].default, "help": flags.FLAGS[name].help}
                   for name in new
                   if (flags.FLAGS.find_module_defining_flag(name) or "").split(".")[0]
                   in (script, "bert_tf")}
  for name in new:  # the next script defines its own
    delattr(flags.FLAGS, name)
print(json.dumps(found, default=str))
