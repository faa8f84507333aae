"""A pair classifier's export served on texts of any length (tests/test_classifier_windows.py).
argv: the JSON of {"a", "b": texts}, the export; prints the probabilities."""

import json

from serving import arguments_and_models
import tensorflow as tf

args, (model,) = arguments_and_models()
out = model.signatures["serving_default"](text_a=tf.constant(args["a"]),
                                          text_b=tf.constant(args["b"]))
print(json.dumps(out["probabilities"].numpy().tolist()))
