"""MediaPipe Tasks' TextClassifier, in --mediapipe_python: a .tflite with MediaPipe's metadata
answering raw text with its own BERT tokenizer."""

import json

from benchmarks import sides, timing


def classify(workload_file, path):
  """timing.serving_workloads of the classifier, one classify call per text, and its
  probabilities of the timed texts."""
  import mediapipe
  from mediapipe.tasks import python as mp_python
  from mediapipe.tasks.python import text as mp_text
  with open(workload_file, encoding="utf-8") as f:
    workload = json.load(f)
  classifier = mp_text.TextClassifier.create_from_options(mp_text.TextClassifierOptions(
      base_options=mp_python.BaseOptions(model_asset_path=path), max_results=-1))

  def one(text):
    scores = {c.category_name: c.score
              for c in classifier.classify(text).classifications[0].categories}
    return [scores["0"], scores["1"]]

  call = lambda texts: [one(text) for text in texts]
  return dict(timing.serving_workloads(call, workload),
              probabilities=timing.answers(call, workload),
              version="mediapipe " + mediapipe.__version__)


if __name__ == "__main__":
  sides.main({"classify": classify})
