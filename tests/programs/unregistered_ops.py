"""In a process that loads no tensorflow_text, the op types of each SavedModel that plain
TensorFlow does not register (tests/test_serving_ops.py). argv: the SavedModels; prints
{path: [op types]}."""

import json
import sys

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
