"""A SQuAD export served on questions and contexts (tests/test_export_squad.py).
argv: the JSON of {"q": questions, "c": contexts}, the export."""

import json

from serving import arguments_and_models
import tensorflow as tf

args, (model,) = arguments_and_models()
out = model.signatures["serving_default"](question=tf.constant(args["q"]),
                                          context=tf.constant(args["c"]))
print(json.dumps({"answer": [s.decode() for s in out["answer"].numpy()],
                  "start_char": out["start_char"].numpy().tolist(),
                  "end_char": out["end_char"].numpy().tolist(),
                  "score": out["score"].numpy().tolist(),
                  "is_impossible": out["is_impossible"].numpy().tolist()}))
