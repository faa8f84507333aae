"""An export's serving_default signature on texts (tests/test_classifier.py, test_swag.py);
prints its numeric outputs. argv: the JSON of {input name: texts}, the export."""

import json

from serving import arguments_and_models
import tensorflow as tf

args, (model,) = arguments_and_models()
out = model.signatures["serving_default"](**{k: tf.constant(v) for k, v in args.items()})
print(json.dumps({k: v.numpy().tolist() for k, v in out.items() if v.dtype != tf.string}))
