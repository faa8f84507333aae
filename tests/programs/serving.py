"""What a server's process has, for the serve_*.py programs: TensorFlow and tensorflow_text
(whose ops the text signatures need), bert_tf not imported (run with run_script(...,
isolated=True): it is not on the path)."""

import json
import sys

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the text ops of the SavedModels)


def arguments_and_models():
  """The JSON of argv[1] and the SavedModels of argv[2:], loaded; bert_tf stays out."""
  assert not any(m.startswith("bert_tf") for m in sys.modules)
  return json.loads(sys.argv[1]), [tf.saved_model.load(path) for path in sys.argv[2:]]
