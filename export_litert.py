"""Convert a bert_tf SavedModel to LiteRT (.tflite), for LiteRT runtimes and MediaPipe Tasks.

  python export_litert.py --export_dir=/tmp/mrpc_savedmodel --output_file=/tmp/mrpc.tflite \
    [--quantize=int8] [--mediapipe_python=/opt/mediapipe-venv/bin/python]

Takes any export bert_tf writes (run_classifier / run_squad / run_swag / run_ner --export_dir,
export_text_embedder.py) and converts its ids signature (input_word_ids, input_mask,
input_type_ids; one request per call) to LiteRT builtin ops; a classifier outputs its
probabilities. With --mediapipe_python, a classifier or a text embedder also gets MediaPipe's
metadata (BERT tokenizer, vocab, labels), so MediaPipe Tasks' TextClassifier / TextEmbedder
serve it from raw text. See docs/serving.md, "LiteRT and MediaPipe".
"""

import os
import subprocess
import sys
import tempfile

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)
from absl import flags, logging

from bert_tf import cli, export, litert_export, text_embedder
from bert_tf.errors import UserInputError

FLAGS = flags.FLAGS

flags.DEFINE_string("export_dir", None, "A SavedModel folder bert_tf wrote.")
flags.DEFINE_string("output_file", None, "Where to write the .tflite.")
flags.DEFINE_enum("quantize", "none", litert_export.QUANTIZATIONS,
                  "none: float32; int8: LiteRT's dynamic-range quantization (int8 weights, "
                  "about a quarter of the size).")
flags.DEFINE_integer("seq_length", None,
                     "Fix the input length (inputs padded to it). Default: the export's "
                     "max_seq_length with --mediapipe_python (MediaPipe reads the length from "
                     "the input shape), else any length up to it.")
flags.DEFINE_string("mediapipe_python", None,
                    "A Python with mediapipe==0.10.21 installed (a virtualenv of its own: it "
                    "pins protobuf<5, which TensorFlow cannot share). Writes MediaPipe's "
                    "metadata for a classifier or a text embedder.")
flags.DEFINE_string("vocab_file", None,
                    "With --mediapipe_python: the vocab the export was made with (default: "
                    "the copy in the export's assets.extra/).")

_METADATA_KINDS = {"classification": "classifier", text_embedder.TASK: "embedder"}
_WRITER = os.path.join(os.path.dirname(os.path.abspath(litert_export.__file__)),
                       "mediapipe_metadata.py")


def check_mediapipe(metadata):
  """The MediaPipe kind of the export, or an error saying why MediaPipe cannot serve it."""
  task = metadata.get("task")
  if task not in _METADATA_KINDS:
    raise UserInputError("MediaPipe serves classifiers and text embedders; this export is a %s "
                         "model. Drop --mediapipe_python and feed the .tflite ids." % task)
  if not metadata.get("do_lower_case", True):
    raise UserInputError("MediaPipe's BERT tokenizer always lower-cases, and this export is "
                         "cased (do_lower_case=false): it would see other tokens. Drop "
                         "--mediapipe_python and feed the .tflite ids from the cased tokenizer.")
  if metadata.get("text_pair"):
    raise UserInputError("MediaPipe's text classifier takes one text; this export classifies "
                         "text pairs. Drop --mediapipe_python and feed the .tflite ids.")
  if not os.path.isfile(FLAGS.mediapipe_python):
    raise UserInputError("--mediapipe_python=%s does not exist." % FLAGS.mediapipe_python)
  return _METADATA_KINDS[task]


def write_mediapipe_metadata(kind, conversion, vocab_file, output_file):
  """Runs mediapipe_metadata.py in --mediapipe_python on the converted file."""
  details = litert_export.interpreter(conversion.output_file).get_signature_runner(
      export.IDS_SIGNATURE).get_input_details()
  with tempfile.TemporaryDirectory(prefix="bert_tf_mediapipe_") as folder:
    command = [FLAGS.mediapipe_python, _WRITER, "--model", conversion.output_file,
               "--output", output_file, "--vocab", vocab_file, "--kind", kind,
               "--ids", details["input_word_ids"]["name"],
               "--mask", details["input_mask"]["name"],
               "--segment", details["input_type_ids"]["name"]]
    if kind == "classifier":
      labels = os.path.join(folder, "labels.txt")
      with open(labels, "w", encoding="utf-8") as f:
        f.write("".join("%s\n" % label for label in conversion.metadata["labels"]))
      command += ["--labels", labels]
    else:
      command += ["--output_name", conversion.outputs[0]]
    result = subprocess.run(command, capture_output=True, text=True)
  if result.returncode:
    last = (result.stderr.strip().splitlines() or ["exit status %d" % result.returncode])[-1]
    raise UserInputError("MediaPipe's metadata writer failed in %s: %s" %
                         (FLAGS.mediapipe_python, last.removeprefix("error: ")))


def main(_):
  cli.require_flags(FLAGS, "export_dir", "output_file")
  metadata = litert_export.read_export(FLAGS.export_dir)
  kind = vocab_file = None
  seq_length = FLAGS.seq_length
  if FLAGS.mediapipe_python:
    kind = check_mediapipe(metadata)
    vocab_file = litert_export.export_vocab(FLAGS.export_dir, FLAGS.vocab_file)
    seq_length = seq_length or metadata["max_seq_length"]
  target = FLAGS.output_file
  if kind:
    target = FLAGS.output_file + ".no_metadata"
  try:
    conversion = litert_export.convert(FLAGS.export_dir, target, FLAGS.quantize, seq_length)
    if kind:
      write_mediapipe_metadata(kind, conversion, vocab_file, FLAGS.output_file)
  finally:
    if kind and os.path.exists(target):
      os.remove(target)
  print("Wrote %s (%s, %.1f MB): inputs %s -> %s%s; probe request within %.2g of the "
        "SavedModel." % (FLAGS.output_file, FLAGS.quantize, conversion.size_bytes / 1e6,
                         conversion.inputs, ", ".join(conversion.outputs),
                         " with MediaPipe %s metadata" % kind if kind else "",
                         conversion.max_difference))
  logging.flush()
  sys.stdout.flush()


if __name__ == "__main__":
  cli.run(main)
