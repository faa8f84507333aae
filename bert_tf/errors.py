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
