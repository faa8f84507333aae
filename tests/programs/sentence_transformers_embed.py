"""sentence-transformers' own embeddings of a JSON file of texts, run by a peer Python that has
it (tests/test_text_embedder.py). argv: the model folder, the texts file, the .npy to write."""

import json
import sys

import numpy as np
from sentence_transformers import SentenceTransformer

texts = json.load(open(sys.argv[2], encoding="utf-8"))
model = SentenceTransformer(sys.argv[1], device="cpu")
np.save(sys.argv[3], model.encode(texts, batch_size=32))
