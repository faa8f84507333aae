"""The driver of helpers.ScriptSession: command lines of one script of the checkout run one
after another in this process, each through the script's own entry point (cli.run(main)), its
exit code and output captured as a process of its own would have them.

argv: the checkout, the script (from it), a folder for the outputs, the prefix of the answer
line. Reads a command line (JSON) per line of stdin; answers each with a line: the prefix and
the JSON of [exit code, stdout file, stderr file]."""

import importlib.util
import json
import os
import sys
import traceback


def load(root, script):
  """The script as a module (its main run by cli.run) and whether it passes its own flags
  parser (Beam's scripts)."""
  path = os.path.join(root, script)
  source = open(path, encoding="utf-8").read()
  parser = source.rstrip().endswith('\n  cli.run(main, flags_parser=parse_flags)')
  assert parser or source.rstrip().endswith('if __name__ == "__main__":\n  cli.run(main)'), (
      script + " no longer ends with cli.run(main): run it in a process of its own")
  name = os.path.splitext(os.path.basename(script))[0]
  spec = importlib.util.spec_from_file_location(name, path)
  module = sys.modules[name] = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return path, module, parser


def run_case(path, module, parser, args, names):
  """One command line, stdout and stderr (fds 1, 2) written to `names`; its exit code."""
  from absl import flags, logging

  from bert_tf.utils import cli
  flags.FLAGS.unparse_flags()
  flags.FLAGS["verbosity"].value = 0  # INFO, as app.run sets it when it first parses flags
  sys.argv = [path, *args]
  sys.stdout.flush()
  sys.stderr.flush()
  saved = {fd: os.dup(fd) for fd in (1, 2)}
  for fd in (1, 2):
    target = os.open(names[fd], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(target, fd)
    os.close(target)
  code = 0
  try:
    cli.run(module.main, **({"flags_parser": module.parse_flags} if parser else {}))
  except SystemExit as e:
    if isinstance(e.code, str):
      print(e.code, file=sys.stderr)
    code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
  except BaseException:  # an uncaught error: what Python prints, and exit 1
    traceback.print_exc()
    code = 1
  logging.flush()
  sys.stdout.flush()
  sys.stderr.flush()
  for fd in (1, 2):
    os.dup2(saved[fd], fd)
    os.close(saved[fd])
  return code


def main():
  root, script, folder, done = sys.argv[1:5]
  sys.path.insert(0, root)
  path, module, parser = load(root, script)
  for count, line in enumerate(sys.stdin):
    names = {fd: os.path.join(folder, "%d.%d" % (count, fd)) for fd in (1, 2)}
    code = run_case(path, module, parser, json.loads(line), names)
    print(done + json.dumps([code, names[1], names[2]]), flush=True)


if __name__ == "__main__":
  main()
