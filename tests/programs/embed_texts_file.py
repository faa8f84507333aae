"""A text embedder's export over a JSON file of texts, 32 at a time; the embeddings saved
with numpy (tests/test_text_embedder.py). argv: the JSON of {"texts": the file, "out": the
.npy}, the export."""

import json

import numpy as np
from serving import arguments_and_models
import tensorflow as tf

args, models = arguments_and_models()
texts = json.load(open(args["texts"], encoding="utf-8"))
vectors = [models[0](tf.constant(texts[i:i + 32])).numpy() for i in range(0, len(texts), 32)]
np.save(args["out"], np.concatenate(vectors))
print(json.dumps({}))
