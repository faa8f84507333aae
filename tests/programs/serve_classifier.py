"""A pair classifier's export served: its text and ids signatures (tests/test_export.py).
argv: the JSON of {"a", "b": texts, "ids": the ids signature's inputs}, the export."""

import json

from serving import arguments_and_models
import tensorflow as tf

args, (model,) = arguments_and_models()
text = model.signatures["serving_default"](text_a=tf.constant(args["a"]),
                                           text_b=tf.constant(args["b"]))
ids = model.signatures["serve_ids"](**{k: tf.constant(v, tf.int32)
                                       for k, v in args["ids"].items()})
print(json.dumps({"probabilities": text["probabilities"].numpy().tolist(),
                  "label_ids": text["label_ids"].numpy().tolist(),
                  "labels": [s.decode() for s in text["labels"].numpy()],
                  "logits": ids["logits"].numpy().tolist()}))
