"""Runner plumbing: absl entry point that turns UserInputError and preemption into clean exits."""

import sys

from absl import app, logging

from bert_tf.errors import Preempted, UserInputError


def run(main):
  """`app.run(main)`: a UserInputError is one message and exit 2; a preempted run
  (state saved) says so and exits 128 + the signal number, as if killed by it."""

  def guarded(argv):
    try:
      return main(argv)
    except UserInputError as e:
      logging.flush()
      print("error: %s" % e, file=sys.stderr)
      sys.exit(2)
    except Preempted as e:
      logging.flush()
      print("stopped: %s" % e, file=sys.stderr)
      sys.exit(e.exit_code)

  app.run(guarded)


def require_flags(flag_values, *names):
  """Like flags.mark_flag_as_required, but checked in main so --helpfull still works."""
  missing = [n for n in names if flag_values[n].value in (None, "")]
  if missing:
    raise UserInputError("missing required flag(s): %s" % ", ".join("--" + n for n in missing))
