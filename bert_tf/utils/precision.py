"""Inference precision: float32 (the faithful default), bfloat16 compute, or int8 weights.

Training precision is the runners' `--mixed_precision`; this module is about models that only
run forward (the exports, the TF-Hub encoder, extract_features). `for_inference(model, p)`
gives a model with `model`'s weights that computes in `p`:

- "float32": `model` itself, untouched (every faithfulness golden is a float32 number).
- "bfloat16": a copy built under Keras' `bfloat16` policy: the matmuls in bfloat16,
  LayerNorm, softmax, the heads' biases and the outputs in float32, as in training under
  `--mixed_precision=bfloat16`. Its weights are stored in bfloat16: these are the values
  mixed precision would cast its float32 weights to at every call, so the outputs are
  bit-identical to a `mixed_bfloat16` model's, without a cast of every weight (the whole
  word-embedding table included) per forward pass, a large share of a short request's time.
  It pays only where TensorFlow runs bfloat16 matmuls on oneDNN (CPUs with AVX-512; fast
  with AVX512-BF16 or AMX, see bert_tf.utils.cpu).
- "int8": a float32 copy whose Dense layers (attention projections, feed-forward, pooler)
  hold int8 weights with one scale per output column and quantize their inputs per token
  at run time (Keras' dynamic-range `quantize("int8")`). Embeddings, LayerNorm and the task
  heads' own matmuls stay float32, as in ONNX Runtime's dynamic int8 quantization.

A copy is made because Keras fixes a layer's compute dtype when it is built; the caller's
float32 model stays usable (e.g. to export again at another precision).
"""

from absl import flags
import keras

from bert_tf.errors import UserInputError

PRECISIONS = ("float32", "bfloat16", "int8")
# Lengths a dynamic-length model is cut to under XLA round up to a multiple of this, so XLA
# compiles a handful of shapes (8 up to length 128) instead of one per length.
XLA_LENGTH_BUCKET = 16
PRECISION_HELP = ("Inference precision: float32 (faithful, default), bfloat16 (bfloat16 matmuls; "
                  "fast only on CPUs with AVX512-BF16/AMX or on accelerators), or int8 (int8 "
                  "Dense weights, dynamic-range). See docs/performance.md for the measured "
                  "agreement with float32.")

_ATTRIBUTE = "inference_precision"


def define_flag(what, flag_values=flags.FLAGS):
  """--inference_precision of a script: `what` names what computes in it."""
  flags.DEFINE_enum("inference_precision", "float32", list(PRECISIONS),
                    "What %s computes in. %s" % (what, PRECISION_HELP), flag_values=flag_values)


def check(precision):
  """`precision` if it is one of PRECISIONS, else a UserInputError naming them."""
  if precision not in PRECISIONS:
    raise UserInputError("Unknown inference precision %r: use one of %s." %
                         (precision, ", ".join(PRECISIONS)))
  return precision


def of(model):
  """The inference precision a model computes in ("float32" unless made by for_inference)."""
  return getattr(model, _ATTRIBUTE, "float32")


def prefers_xla(precision):
  """Whether a forward pass in `precision` runs faster compiled by XLA than by TensorFlow's
  graph executor (the default of extract_features' --jit_compile), as
  benchmarks.encoder_throughput measured it (figures: docs/performance.md, inference
  precision):

  - int8: TensorFlow's graph kernels have no fast int8 matmul (Eigen's); XLA's is fast.
  - float32: XLA gains little or nothing at one fixed shape, and a run of variable-length
    batches compiles each new length.
  - bfloat16: oneDNN's AMX kernels are faster than XLA's.
  """
  return check(precision) == "int8"


def keras_policy(precision):
  """The Keras dtype policy a model of `precision` is built under (None: float32)."""
  return "bfloat16" if check(precision) == "bfloat16" else None


def finish(model, precision):
  """Makes a model built under keras_policy(precision), weights loaded, compute in
  `precision`: quantizes its Dense layers for "int8", and records the precision. Returns it."""
  if check(precision) == "int8":
    quantize_dense_int8(model)
  if precision != "float32":
    setattr(model, _ATTRIBUTE, precision)
  return model


def for_inference(model, precision):
  """A model with `model`'s weights computing in `precision` (see the module docstring).

  `model` is any bert_tf model with `get_config`/`from_config` (a TaskModel or a BertModel)
  whose weights are float32 variables (set_weights rounds them for a bfloat16 copy).
  Returns `model` itself for "float32". A dynamic-length TaskModel's copy in a precision
  that prefers XLA cuts each batch to a multiple of XLA_LENGTH_BUCKET.
  """
  check(precision)
  if precision == "float32" or of(model) == precision:
    return model
  if of(model) != "float32":
    raise UserInputError("This model already computes in %s; make the %s model from the "
                         "float32 one." % (of(model), precision))
  config = model.get_config()
  config["dtype"] = keras_policy(precision) or "float32"
  if prefers_xla(precision) and config.get("length_bucket") == 1:
    # A serving process that compiles the int8 copy with XLA (e.g. TF_XLA_FLAGS
    # auto-clustering, docs/serving.md) then compiles a few lengths; the numbers do not move.
    config["length_bucket"] = XLA_LENGTH_BUCKET
  copy = type(model).from_config(config)
  _build_like(copy, model)
  copy.set_weights(model.get_weights())
  return finish(copy, precision)


def _build_like(copy, model):
  """Builds `copy`'s variables (a BertModel is built by its first call, a TaskModel in its
  constructor) so that set_weights can fill them in order."""
  if not copy.built or len(copy.weights) != len(model.weights):
    copy.build()
  if len(copy.weights) != len(model.weights):
    raise ValueError("Cannot copy %s: %d weights, its copy has %d." %
                     (type(model).__name__, len(model.weights), len(copy.weights)))


def quantize_dense_int8(model):
  """Quantizes every Dense layer of `model` to int8 in place; returns their count.

  The encoder's projections and the pooler are Dense leaves: Keras's own, or bert_tf's
  `layers.Dense`, which changes only the training call (Keras calls the quantized form
  itself). Quantizing layer by layer, rather than `model.quantize` (which takes exact
  `keras.layers.Dense` only), leaves bert_tf's other layers alone instead of warning about
  each.
  """
  count = 0
  for layer in model._flatten_layers(include_self=False):  # pylint: disable=protected-access
    if isinstance(layer, keras.layers.Dense):
      layer.quantize("int8")
      count += 1
  if not count:
    raise ValueError("%s has no Dense layer to quantize." % type(model).__name__)
  return count
