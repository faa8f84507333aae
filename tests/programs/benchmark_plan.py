"""The benchmarks of a plan run one after another in this process (tests/test_benchmarks.py
runs two side by side, each paying TensorFlow's start-up once). argv: the plan, a JSON list of
{"name", "module", "argv", "out", "error"}."""

import importlib
import json
import os
import sys
import time
import traceback


def _run_plan(plan_file):
  """Runs each planned benchmark's main in this process; a failure is written to the entry's
  error file and the next one runs. Each benchmark module (and benchmarks.common) is imported
  afresh, so that it defines its flags on a FlagValues without the previous one's."""
  from absl import flags
  with open(plan_file, encoding="utf-8") as f:
    plan = json.load(f)
  for entry in plan:
    for module in [m for m in sys.modules if m.split(".")[0] == "benchmarks"]:
      del sys.modules[module]
    defined = flags.FLAGS.flags_by_module_dict()
    for name in {flag.name for module, module_flags in defined.items()
                 if module.split(".")[0] == "benchmarks" for flag in module_flags}:
      delattr(flags.FLAGS, name)
    start = time.perf_counter()
    try:
      benchmark = importlib.import_module(entry["module"])
      benchmark.main(flags.FLAGS([entry["module"]] + entry["argv"]))
    except BaseException:  # pylint: disable=broad-except  (SystemExit too: its reason)
      with open(entry["error"], "w", encoding="utf-8") as f:
        f.write(traceback.format_exc())
    used = os.times()
    print("%s: %.1f s (CPU of the run so far, sides included: %.1f s)" % (
        entry["name"], time.perf_counter() - start,
        used.user + used.system + used.children_user + used.children_system), file=sys.stderr)


if __name__ == "__main__":
  _run_plan(sys.argv[1])
