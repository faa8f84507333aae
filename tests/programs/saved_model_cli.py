"""TensorFlow's `saved_model_cli` after importing tensorflow_text, whose ops the text signatures
need and which the plain command does not import. argv: saved_model_cli's."""

import sys

from tensorflow.python.tools.saved_model_cli import main
import tensorflow_text  # noqa: F401  (registers the text ops)

if __name__ == "__main__":
  sys.argv[0] = "saved_model_cli"
  sys.exit(main())
