"""Reading the user's text files (vocab, config, TSV/CSV/JSON data) with one-line errors.

Every reader of a file named by a flag goes through `read_text` (or `read_bytes`), so a missing
file, a folder where a file belongs, an unreadable file or bytes that are not UTF-8 give the same
kind of message: the file, what it is for, and the fix. A UTF-8 byte order mark at the
start (Windows editors write one) is dropped: it is never content, and left in place it
would become part of the first column name, token or JSON value.
No TensorFlow import at module level: the Beam launcher reads the vocab too.
"""

import errno

from bert_tf.errors import UserInputError, io_reason

_BOM = "\ufeff"


def _read_bytes(path):
  if "://" in path:  # gs://, s3://, hdfs:// ... as the original's tf.gfile
    import tensorflow as tf
    try:
      with tf.io.gfile.GFile(path, "rb") as f:
        return f.read()
    except tf.errors.NotFoundError:
      raise FileNotFoundError(errno.ENOENT, "not found", path) from None
    except tf.errors.OpError as e:
      raise OSError(errno.EIO, io_reason(e), path) from None
  with open(path, "rb") as f:
    return f.read()


def open_error(error, path, what, hint=""):
  """The UserInputError for an OSError raised opening or reading `path`."""
  suffix = " " + hint if hint else ""
  if isinstance(error, FileNotFoundError):
    return UserInputError("%s %s does not exist%s." % (what, path, suffix))
  if isinstance(error, IsADirectoryError):
    return UserInputError("%s %s is a folder, not a file%s." % (what, path, suffix))
  if isinstance(error, NotADirectoryError):
    return UserInputError("%s %s does not exist: part of its path is a file, not a folder%s." %
                          (what, path, suffix))
  if isinstance(error, PermissionError):
    return UserInputError("%s %s cannot be read: permission denied (check the file's "
                          "permissions)." % (what, path))
  return UserInputError("%s %s cannot be read: %s." % (what, path, error.strerror or error))


def read_bytes(path, what, hint=""):
  """The bytes of `path`; `what` names the file's role, e.g. "Vocab file", and `hint` is
  appended to the "does not exist" message, e.g. "(check --vocab_file)"."""
  try:
    return _read_bytes(str(path))
  except OSError as e:
    raise open_error(e, path, what, hint) from None


def read_text(path, what, hint=""):
  """The UTF-8 text of `path` (BOM dropped), read as `read_bytes` does."""
  data = read_bytes(path, what, hint)
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    line = data[:e.start].count(b"\n") + 1
    raise UserInputError("%s %s is not UTF-8 text (bad byte at line %d); save it as UTF-8." %
                         (what, path, line)) from None
  return text[1:] if text.startswith(_BOM) else text
