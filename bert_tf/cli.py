"""Runner plumbing: absl entry point that turns UserInputError into a clean message."""

import sys

from absl import app, logging

from bert_tf.errors import UserInputError


def run(main):
  """`app.run(main)`, printing a UserInputError as one message and exiting with 2."""

  def guarded(argv):
    try:
      return main(argv)
    except UserInputError as e:
      logging.flush()
      print("error: %s" % e, file=sys.stderr)
      sys.exit(2)

  app.run(guarded)


def require_flags(flag_values, *names):
  """Like flags.mark_flag_as_required, but checked in main so --helpfull still works."""
  missing = [n for n in names if flag_values[n].value in (None, "")]
  if missing:
    raise UserInputError("missing required flag(s): %s" % ", ".join("--" + n for n in missing))
