"""The predictions file of a run on the user's own file: <output_dir>/predictions.jsonl, one
JSON object a row, in input order, written whole or not at all."""

import json

import numpy as np
import tensorflow as tf


def prediction(problem_type, labels, values, threshold):
  """One row's answer from its outputs: {"label", "probabilities"} (single_label),
  {"labels", "probabilities"} (multi_label: the names over `threshold`), {"prediction"}."""
  if problem_type == "regression":
    return {"prediction": float(values)}
  probabilities = {name: float(p) for name, p in zip(labels, values)}
  if problem_type == "multi_label":
    chosen = [name for name, p in zip(labels, values) if p > threshold]
    return {"labels": chosen, "probabilities": probabilities}
  return {"label": labels[int(np.argmax(values))], "probabilities": probabilities}


def write_predictions(path, rows, problem_type, labels, values, threshold, with_id):
  """Writes `path`: per row {"row": its index in the file, "id" (`with_id`), ...prediction}."""
  with tf.io.gfile.GFile(path + ".tmp", "w") as writer:
    for row, row_values in zip(rows, values):
      line = {"row": row.row}
      if with_id:
        line["id"] = row.id
      line.update(prediction(problem_type, labels, row_values, threshold))
      writer.write(json.dumps(line, ensure_ascii=False) + "\n")
  tf.io.gfile.rename(path + ".tmp", path, overwrite=True)
