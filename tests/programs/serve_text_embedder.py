"""A text embedder's export served: called, by its signature, on no text (tests/
test_text_embedder.py). argv: the JSON of {"texts"}, the export."""

import json

from serving import arguments_and_models
import tensorflow as tf

args, models = arguments_and_models()
model = models[0]
texts = tf.constant(args["texts"])
serve = model.signatures["serving_default"]
out = {"call": model(texts).numpy().tolist(),
       "signature": serve(sentences=texts)["embedding"].numpy().tolist(),
       "empty": model(tf.constant([], tf.string)).shape.as_list(),
       "variables": len(model.variables), "trainable": len(model.trainable_variables)}
print(json.dumps(out))
