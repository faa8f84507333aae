"""One request's weight matmuls alone, as benchmarks/matmul_chain.py times them: per layer the
query, key, value and attention-output projections (hidden x hidden) and the FFN (hidden x
intermediate, intermediate x hidden), each a matmul plus its bias, with distinct weights, on a
few rows. `tensorflow` runs in a fresh process whose environment picks the kernels; `ort` in
a Python with onnxruntime and onnx.
"""

import time

from benchmarks import sides


def _weights(layers, hidden, intermediate):
  """[(kernel, bias)] per matmul, layer by layer, seeded: both sides read the same numbers."""
  import numpy as np
  rng = np.random.default_rng(0)
  shapes = [(hidden, hidden)] * 4 + [(hidden, intermediate), (intermediate, hidden)]
  return [((rng.standard_normal(s) * 0.05).astype(np.float32),
           (rng.standard_normal(s[1]) * 0.05).astype(np.float32))
          for _ in range(layers) for s in shapes]


def _p50_ms(call, calls):
  import numpy as np
  for _ in range(20):
    call()
  seconds = []
  for _ in range(calls):
    start = time.perf_counter()
    call()
    seconds.append(time.perf_counter() - start)
  return float(np.median(seconds) * 1e3)


def tensorflow(rows, layers, hidden, intermediate, calls, constants, jit_compile, inter, intra):
  """p50 ms of the chain in a tf.function (weights as variables, or graph constants), and its
  first output row (every setting and side computes the same chain)."""
  import numpy as np
  import tensorflow as tf
  if inter:
    tf.config.threading.set_inter_op_parallelism_threads(inter)
  if intra:
    tf.config.threading.set_intra_op_parallelism_threads(intra)
  make = tf.constant if constants else tf.Variable
  weights = [(make(k), make(b)) for k, b in _weights(layers, hidden, intermediate)]
  x0 = tf.constant(np.random.default_rng(1).standard_normal((rows, hidden)).astype(np.float32))

  def dense(x, index):
    kernel, bias = weights[index]
    return tf.nn.bias_add(tf.matmul(x, kernel), bias)

  def chain(x):
    for layer in range(layers):
      first = 6 * layer
      mixed = dense(x, first) + dense(x, first + 1) + dense(x, first + 2)
      x = dense(dense(dense(mixed, first + 3), first + 4), first + 5) * 0.01 + x
    return x

  run = tf.function(chain, jit_compile=jit_compile)
  return {"p50_ms": _p50_ms(lambda: run(x0).numpy(), calls),
          "row": run(x0).numpy()[0].tolist(), "version": "tensorflow " + tf.__version__}


def ort(rows, layers, hidden, intermediate, calls, threads):
  """The same chain as an ONNX graph of MatMul and Add nodes in ONNX Runtime's CPU provider."""
  import numpy as np
  import onnx
  from onnx import TensorProto, helper, numpy_helper
  import onnxruntime
  weights = _weights(layers, hidden, intermediate)
  initializers = [numpy_helper.from_array(np.array(0.01, np.float32), "scale")]
  nodes = []

  def dense(x, index, out):
    kernel, bias = weights[index]
    initializers.extend([numpy_helper.from_array(kernel, "k%d" % index),
                         numpy_helper.from_array(bias, "b%d" % index)])
    nodes.extend([helper.make_node("MatMul", [x, "k%d" % index], [out + "_mm"]),
                  helper.make_node("Add", [out + "_mm", "b%d" % index], [out])])
    return out

  x = "x"
  for layer in range(layers):
    first, p = 6 * layer, "l%d_" % layer
    q, k, v = (dense(x, first + i, p + n) for i, n in enumerate("qkv"))
    nodes.extend([helper.make_node("Add", [q, k], [p + "qk"]),
                  helper.make_node("Add", [p + "qk", v], [p + "mixed"])])
    out = dense(dense(dense(p + "mixed", first + 3, p + "a"), first + 4, p + "h"), first + 5,
                p + "o")
    nodes.extend([helper.make_node("Mul", [out, "scale"], [p + "scaled"]),
                  helper.make_node("Add", [p + "scaled", x], [p + "x"])])
    x = p + "x"
  graph = helper.make_graph(
      nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, hidden])],
      [helper.make_tensor_value_info(x, TensorProto.FLOAT, [None, hidden])], initializers)
  model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
  model.ir_version = 8
  options = onnxruntime.SessionOptions()
  options.intra_op_num_threads = threads
  session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                         providers=["CPUExecutionProvider"])
  x0 = np.random.default_rng(1).standard_normal((rows, hidden)).astype(np.float32)
  return {"p50_ms": _p50_ms(lambda: session.run(None, {"x": x0}), calls),
          "row": session.run(None, {"x": x0})[0][0].tolist(),
          "version": "onnxruntime %s, onnx %s" % (onnxruntime.__version__, onnx.__version__)}


if __name__ == "__main__":
  sides.main({"tensorflow": tensorflow, "ort": ort})
