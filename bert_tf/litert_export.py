"""A bert_tf SavedModel's ids signature as a LiteRT model (.tflite), float32 or int8.

The raw-text signatures stay behind: their tokenizer's hash tables are no LiteRT ops. The ids
signature (`serve_ids`: input_word_ids, input_mask, input_type_ids) is re-saved alone, with
only the variables it reads, and converted to LiteRT builtin ops (XNNPACK runs them on any
x86 or ARM CPU). One request per call (one row; a multiple-choice example's rows, one per
choice); the length is fixed where MediaPipe serves the
model (it reads the length from the input shape), else any length up to max_seq_length.
A classifier's output is its `probabilities` (MediaPipe reports the output as the score).
`--quantize=int8` is LiteRT's dynamic-range quantization: int8 weights, float activations.

After converting, the .tflite answers a probe request beside the SavedModel and the largest
difference is reported; a float32 model that does not agree (1e-4) is not written.
"""

import dataclasses
import os
import shutil
import tempfile

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf import export
from bert_tf.errors import UserInputError

QUANTIZATIONS = ("none", "int8")
# Largest |difference| to the SavedModel a float32 .tflite may show on the probe request.
FLOAT32_AGREEMENT = 1e-4


@dataclasses.dataclass
class Conversion:
  """What `convert` wrote: the file, the export's task and metadata, the probe's agreement."""
  output_file: str
  task: str
  metadata: dict
  inputs: dict  # name -> shape signature (-1: any)
  outputs: list
  max_difference: float
  size_bytes: int


def read_export(export_dir):
  """The export's bert_tf_export.json, or an error naming what the folder is not."""
  export_dir = os.fspath(export_dir)
  if not tf.io.gfile.isdir(export_dir):
    raise UserInputError("--export_dir=%s does not exist (pass the folder a runner's "
                         "--export_dir or export_text_embedder.py wrote)." % export_dir)
  path = os.path.join(export_dir, export.METADATA_DIR, export.METADATA_FILE)
  if not tf.io.gfile.exists(path):
    raise UserInputError("%s is not a bert_tf export (no %s): pass a folder written by a "
                         "runner's --export_dir or export_text_embedder.py." %
                         (export_dir, os.path.join(export.METADATA_DIR, export.METADATA_FILE)))
  metadata = export.read_metadata(export_dir)
  if export.IDS_SIGNATURE not in metadata.get("signatures", {}):
    raise UserInputError("The export %s has no %s signature (exports of this bert_tf version "
                         "have one): export it again." % (export_dir, export.IDS_SIGNATURE))
  return metadata


def _outputs(task):
  """The LiteRT model's outputs from the ids signature's."""
  if task == "classification":
    return lambda out: {"probabilities": tf.nn.softmax(out["logits"], axis=-1)}
  return lambda out: dict(out)


def _ids_only_savedmodel(loaded, metadata, folder, seq_length):
  """Saves the ids signature alone (its variables, none of the tokenizer's tables)."""
  fn = loaded.signatures[export.IDS_SIGNATURE]
  # One request: one row, or one row per choice of a multiple-choice example.
  shape = [metadata.get("num_choices", 1), seq_length]
  specs = [tf.TensorSpec(shape, tf.int32, name=name) for name in export.IDS_INPUTS]
  module = tf.Module()
  module.variables_read = list(fn.variables)
  to_outputs = _outputs(metadata.get("task"))

  @tf.function(input_signature=specs)
  def serve_ids(input_word_ids, input_mask, input_type_ids):
    return to_outputs(fn(input_word_ids=input_word_ids, input_mask=input_mask,
                         input_type_ids=input_type_ids))

  module.serve_ids = serve_ids
  tf.saved_model.save(module, folder,
                      signatures={export.IDS_SIGNATURE: serve_ids.get_concrete_function()})


def _probe(metadata, shape_signature, seed=0):
  """A request like a real one: [CLS], ids, [SEP], then padding where the length is fixed."""
  rng = np.random.RandomState(seed)
  length = shape_signature[-1] if shape_signature[-1] > 0 else 24
  real = min(length, 20)
  vocab = metadata.get("vocab_size") or metadata.get("bert_config", {}).get("vocab_size", 1000)
  shape = [shape_signature[0], length]
  ids = np.zeros(shape, np.int32)
  ids[:, :real] = rng.randint(1000 if vocab > 2000 else 5, vocab, size=(shape[0], real))
  mask = np.zeros(shape, np.int32)
  mask[:, :real] = 1
  types = np.zeros(shape, np.int32)
  types[:, real // 2:real] = 1 if metadata.get("text_pair") else 0
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def interpreter(model_path_or_bytes, num_threads=None):
  """A LiteRT interpreter (XNNPACK by default) of a .tflite path or its bytes."""
  from ai_edge_litert.interpreter import Interpreter
  if isinstance(model_path_or_bytes, bytes):
    return Interpreter(model_content=model_path_or_bytes, num_threads=num_threads)
  return Interpreter(model_path=os.fspath(model_path_or_bytes), num_threads=num_threads)


def convert(export_dir, output_file, quantize="none", seq_length=None):
  """Writes the .tflite of `export_dir`'s ids signature to `output_file`; returns a
  Conversion. `seq_length` fixes the input length (None: any length)."""
  if quantize not in QUANTIZATIONS:
    raise UserInputError("--quantize=%s is not one of %s." % (quantize, ", ".join(QUANTIZATIONS)))
  metadata = read_export(export_dir)
  max_length = metadata.get("max_seq_length")
  if seq_length is not None and not (2 <= seq_length <= (max_length or seq_length)):
    raise UserInputError("--seq_length=%d must be between 2 and the export's max_seq_length %s."
                         % (seq_length, max_length))
  output_file = os.fspath(output_file)
  parent = os.path.dirname(os.path.abspath(output_file))
  if not os.path.isdir(parent):
    raise UserInputError("Folder %s (for --output_file) does not exist." % parent)
  import tensorflow_text  # noqa: F401  (the export's text signatures need its ops to load)
  loaded = tf.saved_model.load(os.fspath(export_dir))
  folder = tempfile.mkdtemp(prefix="bert_tf_litert_")
  try:
    _ids_only_savedmodel(loaded, metadata, folder, seq_length)
    converter = tf.lite.TFLiteConverter.from_saved_model(folder, [export.IDS_SIGNATURE])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantize == "int8":
      converter.optimizations = [tf.lite.Optimize.DEFAULT]
    try:
      model = converter.convert()
    except Exception as e:  # the converter raises ConverterError and others, with long logs
      first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
      raise UserInputError("LiteRT cannot convert the %s signature of %s: %s" %
                           (export.IDS_SIGNATURE, export_dir, first)) from None
  finally:
    shutil.rmtree(folder, ignore_errors=True)
  runner_ = interpreter(model).get_signature_runner(export.IDS_SIGNATURE)
  details = runner_.get_input_details()
  inputs = {name: list(details[name]["shape_signature"]) for name in export.IDS_INPUTS}
  probe = _probe(metadata, inputs["input_word_ids"])
  got = runner_(**probe)
  want = _outputs(metadata.get("task"))(
      {k: v for k, v in loaded.signatures[export.IDS_SIGNATURE](
          **{k: tf.constant(v) for k, v in probe.items()}).items()})
  difference = max(float(np.max(np.abs(np.asarray(got[k]) - np.asarray(v))))
                   for k, v in want.items())
  if quantize == "none" and difference > FLOAT32_AGREEMENT:
    raise UserInputError("The LiteRT model of %s differs from the SavedModel by %.3g on a probe "
                         "request (over %g); nothing was written." %
                         (export_dir, difference, FLOAT32_AGREEMENT))
  tmp = output_file + ".tmp"
  with open(tmp, "wb") as f:
    f.write(model)
  os.replace(tmp, output_file)
  logging.info("Wrote %s (%.1f MB, %s): inputs %s, outputs %s; largest difference to the "
               "SavedModel on a probe request %.3g", output_file, len(model) / 1e6, quantize,
               inputs, sorted(got), difference)
  return Conversion(output_file, metadata.get("task"), metadata, inputs, sorted(got),
                    difference, len(model))


def export_vocab(export_dir, vocab_file=None):
  """The vocab of an export: --vocab_file, else the copy a bert_tf export keeps."""
  path = vocab_file or os.path.join(os.fspath(export_dir), export.METADATA_DIR,
                                    export.VOCAB_FILE)
  if not os.path.isfile(path):
    raise UserInputError("The export %s keeps no %s (older exports do not): pass "
                         "--vocab_file=the vocab.txt it was exported with." %
                         (export_dir, export.VOCAB_FILE))
  return path
