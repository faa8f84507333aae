"""tests/test_hooks.py's program: builds each runner's hooks as runner.main does (the
script's own flags parsed, the RunOptions checked, `hooks_class(task_flags, options)`), calls
check(options) and reads every split asked for, tries to assign attributes, and prints what
it saw as one JSON line.

It runs in a process of its own: every script defines the shared flags, so each script is
imported in turn and its flags removed before the next (a process may define a flag once).

  python tests/hooks_probe.py '[["case", "run_x", "bert_tf.tasks.x.hooks:XHooks", [args]]]'
"""

import importlib
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import bert_tf  # noqa: F401,E402  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags  # noqa: E402

from bert_tf import runner  # noqa: E402
from bert_tf.runner import shared_flags  # noqa: E402
from bert_tf.runner.shared_flags import RunOptions  # noqa: E402

FLAGS = flags.FLAGS


def state(value, depth=0):
  """`value` as plain data, following the attributes of bert_tf's objects (a RunLabels, ...)
  so that a change inside one shows."""
  if isinstance(value, (str, int, float, bool, type(None))):
    return value
  if isinstance(value, dict):
    return {repr(k): state(v, depth + 1) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [state(v, depth + 1) for v in value]
  if isinstance(value, (set, frozenset)):
    return sorted(repr(v) for v in value)
  if depth < 6 and type(value).__module__.startswith("bert_tf") and hasattr(value, "__dict__"):
    return {type(value).__name__: state(vars(value), depth + 1)}
  return repr(value)


def assignment_error(hooks, name):
  """The AttributeError's message of `hooks.<name> = ...`, or None if it was accepted."""
  try:
    setattr(hooks, name, "set after construction")
  except AttributeError as error:
    return str(error)
  return None


def probe(script, hooks_path, args):
  module_name, _, class_name = hooks_path.partition(":")
  try:
    hooks_class = getattr(importlib.import_module(module_name), class_name)
  except (ImportError, AttributeError) as error:
    return {"missing": repr(error)}
  defined = set(FLAGS)
  module = importlib.import_module(script)
  try:
    FLAGS([script] + args)
    options = RunOptions.from_flags(FLAGS)
    options.check()
    hooks = hooks_class(shared_flags.task_flags(module), options)
    built = state(vars(hooks))
    hooks.check(options)
    checked = state(vars(hooks))
    run = runner.Run(options, None, None)  # what reading needs: the options
    read = {split: len(hooks.read_examples(run, split)) for split, action in runner.SPLITS
            if getattr(options, action)}
    return {"class": type(hooks).__name__, "built": built, "checked": checked,
            "read": read, "after_reading": state(vars(hooks)),
            "new_attribute": assignment_error(hooks, "counts"),
            "existing_attribute": assignment_error(hooks, "flags"),
            "still": state(vars(hooks)) == built}
  finally:
    FLAGS.unparse_flags()
    for name in [n for n in FLAGS if n not in defined]:
      delattr(FLAGS, name)
    del sys.modules[script]


def main(cases):
  print(json.dumps({case: probe(script, hooks_path, args)
                    for case, script, hooks_path, args in json.loads(cases)}))


if __name__ == "__main__":
  main(sys.argv[1])
