"""Export a sentence-transformers model (e.g. all-MiniLM-L6-v2) as a TF-Hub-style text embedding.

  python export_text_embedder.py --model_dir=/path/to/all-MiniLM-L6-v2 \
    --export_dir=/tmp/minilm_embedder [--max_seq_length=256] [--overwrite]

Then, with only tensorflow and tensorflow_text installed:

  import tensorflow as tf, tensorflow_text
  embed = tf.saved_model.load("/tmp/minilm_embedder")
  vectors = embed(tf.constant(["A man is eating food.", "Someone is eating."]))  # [2, 384]

The folder is read as sentence-transformers reads it (modules.json, the Pooling
module's mode, max_seq_length, Normalize); see bert_tf/inference/text_embedder.py for the
SavedModel's interface and docs/sentence_embeddings.md for examples.
"""

import os

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags, logging

from bert_tf.errors import UserInputError
from bert_tf.inference import text_embedder_export
from bert_tf.utils import cli, precision

FLAGS = flags.FLAGS

flags.DEFINE_string("model_dir", None,
                    "A sentence-transformers model folder (with modules.json), e.g. "
                    "all-MiniLM-L6-v2.")
flags.DEFINE_string("export_dir", None, "Folder for the SavedModel (must not exist or be empty).")
flags.DEFINE_integer("max_seq_length", None,
                     "Tokens per text at most, [CLS] and [SEP] included; longer texts are cut. "
                     "Default: the folder's max_seq_length (sentence_bert_config.json).")
flags.DEFINE_bool("overwrite", False, "Replace an existing non-empty --export_dir.")
precision.define_flag("the encoder")


def main(_):
  cli.require_flags(FLAGS, "model_dir", "export_dir")
  if not FLAGS.overwrite and os.path.isdir(FLAGS.export_dir) and os.listdir(FLAGS.export_dir):
    raise UserInputError("--export_dir=%s is not empty; choose another folder or pass "
                         "--overwrite to replace it." % FLAGS.export_dir)
  export_dir = text_embedder_export.export_from_folder(
      FLAGS.model_dir, FLAGS.export_dir, max_seq_length=FLAGS.max_seq_length,
      overwrite=FLAGS.overwrite, inference_precision=FLAGS.inference_precision)
  logging.info("Wrote the text embedder of %s to %s", FLAGS.model_dir, export_dir)


if __name__ == "__main__":
  cli.run(main)
