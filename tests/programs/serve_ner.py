"""A NER tagger's export served: its text signature (on texts and on none) and its ids
signature (tests/test_ner.py). argv: the JSON of {"texts"}, the export."""

import json

from serving import arguments_and_models
import tensorflow as tf

args, models = arguments_and_models()
serve = models[0].signatures["serving_default"]
out = {k: v.numpy().tolist() for k, v in serve(text=tf.constant(args["texts"])).items()}
empty = {k: v.shape.as_list() for k, v in serve(text=tf.constant([], tf.string)).items()}
ids = models[0].signatures["serve_ids"](input_word_ids=tf.constant([[101, 7592, 102]]),
    input_mask=tf.constant([[1, 1, 1]]), input_type_ids=tf.constant([[0, 0, 0]]))
print(json.dumps({"out": {k: [[x.decode() if isinstance(x, bytes) else x for x in row]
                               if isinstance(row, list) else row for row in v]
                          for k, v in out.items()},
                  "empty": empty, "logits": ids["logits"].shape.as_list()}))
