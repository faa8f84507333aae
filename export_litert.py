"""Convert a bert_tf SavedModel to LiteRT (.tflite), for LiteRT runtimes and MediaPipe Tasks.

  python export_litert.py --export_dir=/tmp/mrpc_savedmodel --output_file=/tmp/mrpc.tflite \
    [--quantize=int8] [--mediapipe_python=/opt/mediapipe-venv/bin/python]

Takes any float32 export bert_tf writes (run_classifier / run_squad / run_swag / run_ner
--export_dir, export_text_embedder.py) and converts its ids signature (input_word_ids, input_mask,
input_type_ids; one request per call) to LiteRT builtin ops. A classifier outputs its
probabilities (softmax; a multi-label one a sigmoid per label), a regression its score, and
the .tflite names its labels in its own metadata. With --mediapipe_python, a classifier
(single- or multi-label) or a text embedder also gets MediaPipe's metadata (BERT tokenizer,
vocab, labels), so MediaPipe Tasks' TextClassifier / TextEmbedder serve it from raw text.
Everything checkable is checked before converting; the output file is written only when every
step succeeded. See docs/serving.md, "LiteRT and MediaPipe".
"""

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags, logging

from bert_tf import export
from bert_tf.errors import UserInputError
from bert_tf.export import litert
from bert_tf.utils import cli

FLAGS = flags.FLAGS

flags.DEFINE_string("export_dir", None, "A SavedModel folder bert_tf wrote.")
flags.DEFINE_string("output_file", None, "Where to write the .tflite.")
flags.DEFINE_enum("quantize", "none", litert.QUANTIZATIONS,
                  "none: float32; int8: LiteRT's dynamic-range quantization (int8 weights, "
                  "about a quarter of the size).")
flags.DEFINE_integer("seq_length", None,
                     "Fix the input length (inputs padded to it), 2 to the export's "
                     "max_seq_length. Default: max_seq_length with --mediapipe_python "
                     "(MediaPipe reads the length from the input shape), else any length up "
                     "to it.")
flags.DEFINE_string("mediapipe_python", None,
                    "A Python with mediapipe==0.10.21 installed (a virtualenv of its own: it "
                    "pins protobuf<5, which TensorFlow cannot share). Writes MediaPipe's "
                    "metadata for a classifier or a text embedder.")
flags.DEFINE_string("vocab_file", None,
                    "With --mediapipe_python only: the vocab the export was made with, for an "
                    "export that keeps no copy in assets.extra/ (default: that copy).")
flags.DEFINE_bool("first_window_only", False,
                  "Convert a classifier exported with --long_document=windows anyway: the "
                  ".tflite takes one window, so a longer text is classified by its first "
                  "max_seq_length tokens.")

_WRITER = os.path.join(os.path.dirname(os.path.abspath(litert.__file__)),
                       "mediapipe_metadata.py")
# What the writer imports: a Python that cannot is found before converting.
_PROBE = ("from mediapipe.tasks.python.metadata.metadata_writers import metadata_writer, "
          "text_classifier")
_TIMEOUT = 600


def _run(command, python):
  """`command` run by --mediapipe_python, or one line saying it cannot be run."""
  try:
    # UTF-8 whatever the locale: the label names and the vocab are UTF-8 files.
    return subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT,
                          env=dict(os.environ, PYTHONUTF8="1"))
  except OSError as e:
    raise UserInputError("--mediapipe_python=%s cannot be run: %s." %
                         (python, e.strerror or e)) from None
  except subprocess.TimeoutExpired:
    raise UserInputError("--mediapipe_python=%s did not finish in %d s." %
                         (python, _TIMEOUT)) from None


def _last_line(result):
  lines = (result.stderr or "").strip().splitlines()
  return (lines[-1] if lines else "exit status %d" % result.returncode).removeprefix("error: ")


def check_mediapipe_python(python):
  """Fails before converting unless `python` runs and imports MediaPipe's metadata writers."""
  if not os.path.exists(python):
    raise UserInputError("--mediapipe_python=%s does not exist." % python)
  if os.path.isdir(python):
    raise UserInputError("--mediapipe_python=%s is a folder; pass its Python (e.g. %s)." %
                         (python, os.path.join(python, "bin", "python")))
  if not os.access(python, os.X_OK):
    raise UserInputError("--mediapipe_python=%s is not executable; pass the Python of the "
                         "virtualenv with mediapipe (its bin/python)." % python)
  result = _run([python, "-c", _PROBE], python)
  if result.returncode:
    raise UserInputError("--mediapipe_python=%s cannot import MediaPipe's metadata writers (%s): "
                         "install mediapipe==0.10.21 in its virtualenv." %
                         (python, _last_line(result)))


def _record(path):
  """The .tflite's bert_tf record, or None where it has none or is no LiteRT model."""
  try:
    return litert.read_tflite_metadata(path)
  except UserInputError:
    return None


def write_mediapipe_metadata(kind, conversion, vocab_file, folder):
  """Runs mediapipe_metadata.py in --mediapipe_python on the converted file; returns the
  path of the file it wrote in `folder`, checked to hold the metadata's files."""
  python = FLAGS.mediapipe_python
  details = litert.interpreter(conversion.output_file).get_signature_runner(
      export.IDS_SIGNATURE).get_input_details()
  vocab = os.path.join(folder, export.VOCAB_FILE)  # its name inside the .tflite
  shutil.copyfile(vocab_file, vocab)
  written = os.path.join(folder, "with_metadata.tflite")
  command = [python, _WRITER, "--model", conversion.output_file, "--output", written,
             "--vocab", vocab, "--kind", kind,
             "--ids", details["input_word_ids"]["name"],
             "--mask", details["input_mask"]["name"],
             "--segment", details["input_type_ids"]["name"]]
  if kind == "classifier":
    labels = os.path.join(folder, "labels.txt")
    with open(labels, "w", encoding="utf-8", newline="") as f:
      f.write(litert.mediapipe_labels_file(conversion.metadata))
    command += ["--labels", labels]
    threshold = litert.mediapipe_score_threshold(conversion.metadata)
    if threshold is not None:
      command += ["--score_threshold", repr(threshold)]
  else:
    command += ["--output_name", conversion.outputs[0]]
  result = _run(command, python)
  if result.returncode:
    raise UserInputError("MediaPipe's metadata writer failed in %s: %s" %
                         (python, _last_line(result)))
  with open(conversion.output_file, "rb") as f:
    model = f.read()
  problem = None
  if not os.path.isfile(written):
    problem = "wrote no file"
  else:
    with open(written, "rb") as f:
      if f.read() == model:
        problem = "left the model as it was"
      elif not zipfile.is_zipfile(written):
        problem = "wrote a file without the metadata's vocab"
      elif _record(written) != _record(conversion.output_file):
        problem = "dropped the .tflite's %s record" % litert.TFLITE_METADATA
  if problem:
    raise UserInputError("MediaPipe's metadata writer in %s exited 0 but %s; nothing was "
                         "written (is it the Python of a virtualenv with mediapipe==0.10.21?)."
                         % (python, problem))
  return written


def main(_):
  cli.require_flags(FLAGS, "export_dir", "output_file")
  if FLAGS.vocab_file and not FLAGS.mediapipe_python:
    raise UserInputError("--vocab_file is used only with --mediapipe_python (it goes into "
                         "MediaPipe's metadata; the .tflite itself takes ids): drop it, or add "
                         "--mediapipe_python.")
  # Every check that needs no conversion, before converting.
  metadata = litert.read_export(FLAGS.export_dir)
  litert.check_export(metadata, FLAGS.export_dir, FLAGS.first_window_only)
  litert.check_seq_length(FLAGS.seq_length, metadata)
  litert.check_output_file(FLAGS.output_file, FLAGS.export_dir)
  kind = vocab_file = None
  seq_length = FLAGS.seq_length
  if FLAGS.mediapipe_python:
    kind = litert.check_mediapipe(metadata)
    vocab_file = litert.export_vocab(FLAGS.export_dir, metadata, FLAGS.vocab_file)
    check_mediapipe_python(FLAGS.mediapipe_python)
    if seq_length is None:
      seq_length = metadata["max_seq_length"]
  with tempfile.TemporaryDirectory(prefix="bert_tf_litert_") as folder:
    target = os.path.join(folder, "model.tflite") if kind else FLAGS.output_file
    conversion = litert.convert(FLAGS.export_dir, target, FLAGS.quantize, seq_length,
                                       FLAGS.first_window_only)
    if kind:
      litert.write_file(write_mediapipe_metadata(kind, conversion, vocab_file, folder),
                               FLAGS.output_file)
  labels = metadata.get("labels")
  print("Wrote %s (%s, %.1f MB): inputs %s -> %s%s%s; probe request within %.2g of the "
        "SavedModel.%s" % (FLAGS.output_file, FLAGS.quantize,
                           os.path.getsize(FLAGS.output_file) / 1e6,
                           conversion.inputs, ", ".join(conversion.outputs),
                           " with MediaPipe %s metadata" % kind if kind else "",
                           " (first window only)" if metadata.get("long_document") == "windows"
                           else "", conversion.max_difference,
                           " Its %s metadata names the %d labels." %
                           (litert.TFLITE_METADATA, len(labels)) if labels else ""))
  logging.flush()
  sys.stdout.flush()


if __name__ == "__main__":
  cli.run(main)
