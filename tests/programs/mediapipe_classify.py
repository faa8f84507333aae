"""MediaPipe's TextClassifier on a .tflite model, run by a Python with mediapipe
(tests/test_litert.py). argv: the model, the JSON of the texts, optionally the score threshold
(default: the metadata's); prints each text's {category: score}."""

import json
import sys

from mediapipe.tasks import python as mp_python
from mediapipe.tasks.python import text as mp_text

threshold = float(sys.argv[3]) if len(sys.argv) > 3 else None  # None: the metadata's
options = mp_text.TextClassifierOptions(
    base_options=mp_python.BaseOptions(model_asset_path=sys.argv[1]), max_results=-1,
    score_threshold=threshold)
with mp_text.TextClassifier.create_from_options(options) as classifier:
  out = []
  for text in json.loads(sys.argv[2]):
    categories = classifier.classify(text).classifications[0].categories
    out.append({c.category_name: c.score for c in categories})
print(json.dumps(out))
