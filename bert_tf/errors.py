"""One exception type for problems in the user's input.

Runners catch `UserInputError` and print its message (which names the file, flag
or value and the fix) instead of a traceback from deep inside TensorFlow.
"""


class UserInputError(ValueError):
  """Bad input from the user: a missing or malformed file, a wrong flag value."""
