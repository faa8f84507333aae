"""The exceptions a runner turns into a clean exit instead of a traceback.

`UserInputError`: its message names the file, flag or value and the fix.
`Preempted`: training stopped on a signal after saving its state.
"""

import signal


class UserInputError(ValueError):
  """Bad input from the user: a missing or malformed file, a wrong flag value."""


class Preempted(Exception):
  """Training stopped on SIGTERM/SIGINT after saving its state; the same command resumes it."""

  def __init__(self, signum, step, state_dir):
    self.exit_code = 128 + signum  # the shell's code for "terminated by this signal"
    super().__init__(
        "preempted by %s after step %d; the training state is saved in %s. Run the same "
        "command again to resume." % (signal.Signals(signum).name, step, state_dir))


def io_reason(error):
  """The reason of a file-system error, for a one-line message that names the path itself:
  TensorFlow's "<path>; No space left on device [Op:SaveV2]" gives "No space left on device"."""
  message = getattr(error, "message", None) or getattr(error, "strerror", None) or str(error)
  return message.splitlines()[0].split("; ")[-1].split(" [Op:")[0]
