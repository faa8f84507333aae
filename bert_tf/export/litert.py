"""A bert_tf SavedModel's ids signature as a LiteRT model (.tflite), float32 or int8.

The raw-text signatures stay behind: their tokenizer's hash tables are no LiteRT ops. The ids
signature (`serve_ids`: input_word_ids, input_mask, input_type_ids) is re-saved alone, with
only the variables it reads, and converted to LiteRT builtin ops (XNNPACK runs them on any
x86 or ARM CPU). One request per call (one row; a multiple-choice example's rows, one per
choice); the length is fixed where MediaPipe serves the
model (it reads the length from the input shape), else any length up to max_seq_length.
The outputs are the SavedModel's answers: a classifier's `probabilities` (softmax), a
multi-label classifier's `probabilities` (a sigmoid per label), a regression's `predictions`
(MediaPipe reports a classifier's output as its scores). The .tflite carries its own record
(`TFLITE_METADATA`, a Model.metadata entry beside the converter's): the export's
bert_tf_export.json, less its SavedModel signatures, with the label names in output order, a
multi-label threshold, and what each output holds (`read_tflite_metadata`).
`--quantize=int8` is LiteRT's dynamic-range quantization: int8 weights, float activations.

LiteRT has no Assert op, so the SavedModel's refusal of an id outside the model's tables is
rebuilt from plain ops: ids are clamped into the tables (a gather never reads out of bounds)
and every float output of a request holding such an id is NaN, never another token's answer.

Everything that can be checked from the files is checked before converting (`check_export`,
`check_output_file`); the .tflite is written to a temporary file beside `output_file` and
renamed, so a failure leaves no file and an existing one as it was. After converting, the
.tflite answers a probe request beside the SavedModel and the largest difference is
reported; a float32 model that does not agree (1e-4) is not written.
"""

import dataclasses
import json
import os
import shutil
import tempfile
import uuid

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf import export
from bert_tf.errors import UserInputError, io_reason
from bert_tf.export import tfhub
from bert_tf.utils import user_files

QUANTIZATIONS = ("none", "int8")
# Largest |difference| to the SavedModel a float32 .tflite may show on the probe request.
FLOAT32_AGREEMENT = 1e-4
# Where the .tflite's input is the export's: the embedding tables bounding its ids.
_WORD_TABLE, _TYPE_TABLE = "word_embeddings:0", "token_type_embeddings:0"
# The name of the .tflite's own record of what it answers (a Model.metadata entry, UTF-8 JSON).
TFLITE_METADATA = "bert_tf_export"
# What each task's outputs hold, as the record says it.
_OUTPUT_MEANINGS = {
    "classification": {"probabilities": "softmax over the labels, in the order of labels"},
    "multi_label": {"probabilities": "a sigmoid per label, in the order of labels; the export "
                                     "predicts the labels whose probability is over threshold"},
    "regression": {"predictions": "the score"},
}
# MediaPipe's metadata: which tasks its TextClassifier / TextEmbedder serve.
_MEDIAPIPE_KINDS = {"classification": "classifier", "multi_label": "classifier",
                    "text_embedder": "embedder"}


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
  """The export's bert_tf_export.json, once the folder holds a whole SavedModel; else an
  error naming what the folder is not."""
  export_dir = os.fspath(export_dir)
  if tf.io.gfile.exists(export_dir) and not tf.io.gfile.isdir(export_dir):
    raise UserInputError("--export_dir=%s is a file, not a folder (pass the folder a runner's "
                         "--export_dir or export_text_embedder.py wrote)." % export_dir)
  if not tf.io.gfile.isdir(export_dir):
    raise UserInputError("--export_dir=%s does not exist (pass the folder a runner's "
                         "--export_dir or export_text_embedder.py wrote)." % export_dir)
  name = os.path.join(export.METADATA_DIR, export.METADATA_FILE)
  path = os.path.join(export_dir, name)
  if not tf.io.gfile.exists(path):
    raise UserInputError("%s is not a bert_tf export (no %s): pass a folder written by a "
                         "runner's --export_dir or export_text_embedder.py." % (export_dir, name))
  for part in ("saved_model.pb", os.path.join("variables", "variables.index")):
    if not tf.io.gfile.exists(os.path.join(export_dir, part)):
      raise UserInputError("The export %s is incomplete (no %s): export it again, or copy the "
                           "whole folder." % (export_dir, part))
  try:
    metadata = export.read_metadata(export_dir)
  except (ValueError, tf.errors.OpError, OSError) as e:
    raise UserInputError("%s of the export %s cannot be read (%s): export it again, or copy "
                         "the whole folder." % (name, export_dir, io_reason(e))) from None
  if not isinstance(metadata, dict):
    raise UserInputError("%s of the export %s is not a JSON object: export it again." %
                         (name, export_dir))
  _check_tfhub(metadata.get("task"), export_dir)
  if export.IDS_SIGNATURE not in metadata.get("signatures", {}):
    raise UserInputError("The export %s has no %s signature (exports of this bert_tf version "
                         "have one): export it again." % (export_dir, export.IDS_SIGNATURE))
  return metadata


def _check_tfhub(task, export_dir):
  """TF Hub's layouts have no serve_ids; say what converts instead."""
  if task == tfhub.ENCODER_TASK:
    raise UserInputError(
        "%s is a TF Hub encoder export (export_tfhub.py), which has no %s signature to "
        "convert: convert the checkpoint's BertModel with Keras' exporter "
        "(model.export(path, format=\"litert\"), docs/serving.md), or a task export (a "
        "runner's --export_dir, export_text_embedder.py) with export_litert.py." %
        (export_dir, export.IDS_SIGNATURE))
  if task == tfhub.PREPROCESSOR_TASK:
    raise UserInputError(
        "%s is a TF Hub preprocessor export (export_tfhub.py): it holds a tokenizer and no "
        "model, and tokenizer tables are no LiteRT ops; convert a task export (a runner's "
        "--export_dir, export_text_embedder.py) and tokenize with bert_tf or MediaPipe." %
        export_dir)


def check_export(metadata, export_dir, first_window_only=False):
  """Refuses, in one line, an export whose .tflite would not compute what the export does."""
  computes = metadata.get("inference_precision", "float32")
  if computes != "float32":
    raise UserInputError(
        "The export %s computes in %s; export_litert.py converts float32 exports only: export "
        "it again with float32 precision (the default) and pass --quantize=int8 here for "
        "int8 weights." % (export_dir, computes))
  if metadata.get("long_document") == "windows" and not first_window_only:
    raise UserInputError(
        "The export %s classifies a long text by windows (doc_stride=%s); the .tflite takes "
        "one window of ids, so a longer text would be classified by its first %s tokens "
        "only: pass --first_window_only to convert it anyway." %
        (export_dir, metadata.get("doc_stride"), metadata.get("max_seq_length")))


def check_seq_length(seq_length, metadata):
  """--seq_length None (any length) or 2..max_seq_length."""
  max_length = metadata.get("max_seq_length")
  if seq_length is not None and not 2 <= seq_length <= (max_length or seq_length):
    raise UserInputError("--seq_length=%d must be between 2 and the export's max_seq_length %s."
                         % (seq_length, max_length))


def check_output_file(output_file, export_dir):
  """Fails before converting where the .tflite could not be written, or would land inside
  the export it is read from."""
  output_file = os.fspath(output_file)
  if os.path.isdir(output_file):
    raise UserInputError("--output_file=%s is a folder; pass a file path (e.g. %s)." %
                         (output_file, os.path.join(output_file, "model.tflite")))
  parent = os.path.dirname(os.path.abspath(output_file))
  if os.path.exists(parent) and not os.path.isdir(parent):
    raise UserInputError("--output_file=%s cannot be written: %s is a file, not a folder." %
                         (output_file, parent))
  if not os.path.isdir(parent):
    raise UserInputError("Folder %s (for --output_file) does not exist." % parent)
  if not os.access(parent, os.W_OK | os.X_OK):
    raise UserInputError("--output_file=%s cannot be written: folder %s is not writable." %
                         (output_file, parent))
  export_real = os.path.realpath(os.fspath(export_dir))
  real = os.path.realpath(output_file)
  if real == export_real or real.startswith(export_real.rstrip(os.sep) + os.sep):
    raise UserInputError("--output_file=%s is inside the export it converts (%s); write the "
                         ".tflite outside it." % (output_file, export_dir))


def write_file(data_or_path, output_file):
  """Writes bytes (or a file's copy) to `output_file` through a temporary file beside it and
  a rename: readers never see half a file, and a failure leaves an existing one as it was."""
  output_file = os.fspath(output_file)
  tmp = "%s.tmp-%s" % (output_file, uuid.uuid4().hex[:8])
  try:
    if isinstance(data_or_path, bytes):
      with open(tmp, "xb") as f:
        f.write(data_or_path)
    else:
      shutil.copyfile(data_or_path, tmp)
    os.replace(tmp, output_file)
  except OSError as e:
    raise UserInputError("--output_file=%s cannot be written: %s." %
                         (output_file, e.strerror or e)) from None
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def _outputs(task):
  """The LiteRT model's outputs from the ids signature's: the SavedModel's answers."""
  if task == "classification":
    return lambda out: {"probabilities": tf.nn.softmax(out["logits"], axis=-1)}
  if task == "multi_label":
    return lambda out: {"probabilities": tf.sigmoid(out["logits"])}
  if task == "regression":
    return lambda out: {"predictions": out["predictions"]}
  return lambda out: dict(out)


def tflite_record(metadata, quantize="none", seq_length=None):
  """What the .tflite carries about itself: the export's metadata less its SavedModel
  signatures, what its outputs hold, and how it was converted."""
  record = {k: v for k, v in metadata.items() if k != "signatures"}
  if metadata.get("task") in _OUTPUT_MEANINGS:
    record["outputs"] = _OUTPUT_MEANINGS[metadata["task"]]
  record["litert"] = {"quantize": quantize, "seq_length": seq_length,
                      "first_window_only": metadata.get("long_document") == "windows"}
  return record


def _with_record(model, record):
  """`model` (.tflite bytes) with `record` as its TFLITE_METADATA entry."""
  from tensorflow.lite.python import schema_py_generated as schema
  from tensorflow.lite.tools import flatbuffer_utils
  tree = flatbuffer_utils.read_model_from_bytearray(bytearray(model))
  data = schema.BufferT()
  data.data = np.frombuffer(json.dumps(record, sort_keys=True).encode("utf-8"), np.uint8)
  entry = schema.MetadataT()
  entry.name, entry.buffer = TFLITE_METADATA, len(tree.buffers)
  tree.buffers.append(data)
  tree.metadata = [m for m in tree.metadata or [] if m.name != TFLITE_METADATA.encode()] + [entry]
  return flatbuffer_utils.convert_object_to_bytearray(tree)


def read_tflite_metadata(model_path_or_bytes):
  """The record a .tflite export_litert.py wrote carries (label names, threshold, what its
  outputs hold), as a dict; None for a LiteRT model without one."""
  from ai_edge_litert import schema_py_generated as schema
  if isinstance(model_path_or_bytes, (bytes, bytearray)):
    where, model = "The model", bytes(model_path_or_bytes)
  else:
    where = os.fspath(model_path_or_bytes)
    model = user_files.read_bytes(where, "LiteRT model")
  if len(model) < 8 or not schema.Model.ModelBufferHasIdentifier(model, 0):
    raise UserInputError("%s is not a LiteRT model (.tflite)." % where)
  try:
    root = schema.Model.GetRootAs(model, 0)
    for index in range(root.MetadataLength()):
      entry = root.Metadata(index)
      if entry.Name() == TFLITE_METADATA.encode():
        data = root.Buffers(entry.Buffer()).DataAsNumpy().tobytes()
        return json.loads(data.decode("utf-8"))
  except Exception as e:  # a damaged flatbuffer fails in many ways
    raise UserInputError("The %s record of %s cannot be read (%s): convert it again." %
                         (TFLITE_METADATA, where, _first_line(e))) from None
  return None


def check_mediapipe(metadata):
  """The MediaPipe kind of the export ("classifier" or "embedder"), or one line saying why
  MediaPipe's text tasks cannot serve it as the SavedModel answers."""
  task = metadata.get("task")
  if task == "regression":
    raise UserInputError("A regression export answers a score, not a class: MediaPipe's "
                         "TextClassifier would report it as one category's probability. Drop "
                         "--mediapipe_python and read `predictions` from the .tflite (ids in).")
  if task not in _MEDIAPIPE_KINDS:
    raise UserInputError("MediaPipe serves classifiers and text embedders; this export is a %s "
                         "model. Drop --mediapipe_python and feed the .tflite ids." % task)
  if not metadata.get("do_lower_case", True):
    raise UserInputError("MediaPipe's BERT tokenizer always lower-cases, and this export is "
                         "cased (do_lower_case=false): it would see other tokens. Drop "
                         "--mediapipe_python and feed the .tflite ids from the cased tokenizer.")
  if metadata.get("text_pair"):
    raise UserInputError("MediaPipe's text classifier takes one text; this export classifies "
                         "text pairs. Drop --mediapipe_python and feed the .tflite ids.")
  labels = metadata.get("labels") or [] if _MEDIAPIPE_KINDS[task] == "classifier" else []
  for label in labels:
    if not label or "\n" in label or "\r" in label:
      raise UserInputError("The label %s cannot be a line of MediaPipe's labels file (one label "
                           "a line): drop --mediapipe_python and read the names from the "
                           ".tflite's %s metadata." % (json.dumps(label), TFLITE_METADATA))
  return _MEDIAPIPE_KINDS[task]


def mediapipe_labels_file(metadata):
  """The labels file MediaPipe's classifier metadata carries: the names in output order, one
  a line (MediaPipe's TextClassifier names its categories by line number)."""
  return "".join("%s\n" % label for label in metadata["labels"])


def mediapipe_score_threshold(metadata):
  """MediaPipe's default score threshold for the export, or None (report every label).

  A multi-label export predicts the labels whose float32 probability is over its threshold;
  MediaPipe keeps the categories whose score is at or over its threshold. The least float32
  over the export's threshold makes the two one set: MediaPipe's default answer is the labels
  the SavedModel predicts (its scores their probabilities)."""
  if metadata.get("task") != "multi_label":
    return None
  return float(np.nextafter(np.float32(metadata["threshold"]), np.float32(np.inf)))


def _table_rows(fn, suffix):
  """Rows of the embedding table `fn` reads whose name ends in `suffix`."""
  for variable in fn.variables:
    if variable.name.endswith(suffix):
      return int(variable.shape[0])
  raise UserInputError("The %s signature reads no %s table; export_litert.py converts bert_tf "
                       "exports of a BERT encoder." % (export.IDS_SIGNATURE, suffix[:-2]))


def _guarded(fn, word_rows, type_rows):
  """`fn` on ids clamped into its tables, its float outputs NaN where an id or type id was
  outside them (the SavedModel's Assert, which LiteRT has not)."""

  def call(input_word_ids, input_mask, input_type_ids):
    valid = tf.logical_and(
        tf.reduce_all(tf.logical_and(input_word_ids >= 0, input_word_ids < word_rows)),
        tf.reduce_all(tf.logical_and(input_type_ids >= 0, input_type_ids < type_rows)))
    out = fn(input_word_ids=tf.clip_by_value(input_word_ids, 0, word_rows - 1),
             input_mask=input_mask,
             input_type_ids=tf.clip_by_value(input_type_ids, 0, type_rows - 1))
    return {k: tf.where(valid, v, tf.constant(np.nan, v.dtype)) if v.dtype.is_floating else v
            for k, v in out.items()}

  return call


def _ids_only_savedmodel(loaded, metadata, folder, seq_length):
  """Saves the ids signature alone (its variables, none of the tokenizer's tables)."""
  fn = loaded.signatures[export.IDS_SIGNATURE]
  # One request: one row, or one row per choice of a multiple-choice example.
  shape = [metadata.get("num_choices", 1), seq_length]
  specs = [tf.TensorSpec(shape, tf.int32, name=name) for name in export.IDS_INPUTS]
  module = tf.Module()
  module.variables_read = list(fn.variables)
  to_outputs = _outputs(metadata.get("task"))
  guarded = _guarded(fn, _table_rows(fn, _WORD_TABLE), _table_rows(fn, _TYPE_TABLE))

  @tf.function(input_signature=specs)
  def serve_ids(input_word_ids, input_mask, input_type_ids):
    return to_outputs(guarded(input_word_ids, input_mask, input_type_ids))

  module.serve_ids = serve_ids
  tf.saved_model.save(module, folder,
                      signatures={export.IDS_SIGNATURE: serve_ids.get_concrete_function()})


def _probe(metadata, shape_signature, seed=0):
  """A request like a real one: [CLS], ids, [SEP], then padding where the length is fixed."""
  rng = np.random.RandomState(seed)
  length = shape_signature[-1] if shape_signature[-1] > 0 else 24
  real = min(length, 20)
  vocab = vocab_size(metadata) or 1000
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


def _load(export_dir):
  """The SavedModel, or one line saying it cannot be loaded."""
  import tensorflow_text  # noqa: F401  (the export's text signatures need its ops to load)
  try:
    return tf.saved_model.load(os.fspath(export_dir))
  except Exception as e:  # damaged variables, graph or assets: TF raises several kinds
    raise UserInputError("The export %s cannot be loaded (%s): export it again, or copy the "
                         "whole folder." % (export_dir, _first_line(e))) from None


def _first_line(error):
  text = str(error).strip()
  return text.splitlines()[0][:300] if text else type(error).__name__


def convert(export_dir, output_file, quantize="none", seq_length=None, first_window_only=False):
  """Writes the .tflite of `export_dir`'s ids signature to `output_file`; returns a
  Conversion. `seq_length` fixes the input length (None: any length); a windows classifier
  is converted (its first window) only with `first_window_only`."""
  if quantize not in QUANTIZATIONS:
    raise UserInputError("--quantize=%s is not one of %s." % (quantize, ", ".join(QUANTIZATIONS)))
  metadata = read_export(export_dir)
  check_export(metadata, export_dir, first_window_only)
  check_seq_length(seq_length, metadata)
  check_output_file(output_file, export_dir)
  output_file = os.fspath(output_file)
  loaded = _load(export_dir)
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
      raise UserInputError("LiteRT cannot convert the %s signature of %s: %s" %
                           (export.IDS_SIGNATURE, export_dir, _first_line(e))) from None
    model = _with_record(model, tflite_record(metadata, quantize, seq_length))
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
  if quantize == "none" and not difference <= FLOAT32_AGREEMENT:  # NaN too
    raise UserInputError("The LiteRT model of %s differs from the SavedModel by %.3g on a probe "
                         "request (over %g); nothing was written." %
                         (export_dir, difference, FLOAT32_AGREEMENT))
  write_file(model, output_file)
  logging.info("Wrote %s (%.1f MB, %s): inputs %s, outputs %s; largest difference to the "
               "SavedModel on a probe request %.3g", output_file, len(model) / 1e6, quantize,
               inputs, sorted(got), difference)
  return Conversion(output_file, metadata.get("task"), metadata, inputs, sorted(got),
                    difference, len(model))


def vocab_size(metadata):
  """The entries of the export's vocab (its tokenizer's), else its config's; None if neither."""
  return metadata.get("vocab_size") or metadata.get("bert_config", {}).get("vocab_size")


def _tokens(text):
  """A vocab file's tokens, one a line, as tokenization.load_vocab reads them."""
  lines = text.split("\n")
  return [line.strip() for line in (lines[:-1] if text.endswith("\n") or not text else lines)]


def export_vocab(export_dir, metadata, vocab_file=None):
  """The vocab for MediaPipe's tokenizer: the copy a bert_tf export keeps, or --vocab_file,
  which must be that vocab (the same entries, where the export keeps a copy)."""
  kept = os.path.join(os.fspath(export_dir), export.METADATA_DIR, export.VOCAB_FILE)
  if not vocab_file:
    if not os.path.isfile(kept):
      raise UserInputError("The export %s keeps no %s (older exports do not): pass "
                           "--vocab_file=the vocab.txt it was exported with." %
                           (export_dir, export.VOCAB_FILE))
    return kept
  text = user_files.read_text(vocab_file, "--vocab_file")
  want, entries = vocab_size(metadata), len(_tokens(text))
  if want and entries != want:
    raise UserInputError("--vocab_file=%s has %d entries, the export's vocab %d: pass the vocab "
                         "the export was made with%s." % (vocab_file, entries, want,
                         " (or drop --vocab_file: the export keeps its own)"
                         if os.path.isfile(kept) else ""))
  if os.path.isfile(kept):
    own, given = (_tokens(t) for t in (user_files.read_text(kept, "Vocab file"), text))
    if own != given:
      line = next(i for i, (a, b) in enumerate(zip(own, given), 1) if a != b)
      raise UserInputError("--vocab_file=%s differs from the vocab the export was made with "
                           "(%s, from line %d): drop --vocab_file to use the export's own." %
                           (vocab_file, kept, line))
  return vocab_file
