"""The tensorflow-text ops the exports need: exactly the two the README names for TF Serving."""

import json
import subprocess
import sys

import pytest

from bert_tf import checkpoints
from bert_tf.export import tfhub
from bert_tf.tasks import glue, squad
from bert_tf.tasks.glue.export import export_classifier
from bert_tf.tasks.squad import export as squad_export
from helpers import TINY_CKPT, TINY_CONFIG, VOCAB_UNCASED, tiny_config

pytestmark = pytest.mark.slow

# Lists, in a process that loads no tensorflow-text, the op types of each SavedModel that plain
# TensorFlow does not register.
_UNREGISTERED_OPS = """
import json, sys
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry
result = {}
for path in sys.argv[1:]:
  model = saved_model_pb2.SavedModel()
  with open(path + "/saved_model.pb", "rb") as f:
    model.ParseFromString(f.read())
  ops = set()
  for graph in model.meta_graphs:
    ops |= {node.op for node in graph.graph_def.node}
    for function in graph.graph_def.library.function:
      ops |= {node.op for node in function.node_def}
  result[path] = sorted(op for op in ops if op_def_registry.get(op) is None)
print(json.dumps(result))
"""


def test_exports_need_only_the_two_documented_tensorflow_text_ops(tmp_path):
  classifier = glue.ClassifierModel(tiny_config(), num_labels=2)
  checkpoints.load_checkpoint(TINY_CKPT, classifier.encoder)
  span = squad.SquadModel(tiny_config())
  checkpoints.load_checkpoint(TINY_CKPT, span.encoder)
  paths = {
      "classifier": export_classifier(str(tmp_path / "classifier"), classifier, VOCAB_UNCASED,
                                      True, 32, ["0", "1"], text_pair=True),
      "squad": squad_export.export_squad(str(tmp_path / "squad"), span, VOCAB_UNCASED, True, 64,
                                         32, 16, 30, 20),
  }
  paths["encoder"], paths["preprocessor"] = tfhub.export_from_checkpoint(
      TINY_CONFIG, VOCAB_UNCASED, TINY_CKPT, True, str(tmp_path / "encoder"),
      str(tmp_path / "preprocessor"), seq_length=32)
  out = subprocess.run([sys.executable, "-c", _UNREGISTERED_OPS, *map(str, paths.values())],
                       capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  unregistered = json.loads(out.stdout.strip().splitlines()[-1])
  text_ops = ["FastWordpieceTokenizeWithOffsets", "RegexSplitWithOffsets"]
  assert {name: unregistered[str(path)] for name, path in paths.items()} == {
      "classifier": text_ops, "squad": text_ops, "preprocessor": text_ops, "encoder": []}
