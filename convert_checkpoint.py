"""Convert BERT checkpoints between Google's layout and Hugging Face's, both ways (no torch).

  # A Hugging Face BERT folder -> a Google-release-shaped folder
  # (bert_config.json, vocab.txt, bert_model.ckpt.*), readable by every runner and the original
  python convert_checkpoint.py --to=google --input=$HF_DIR --output_dir=/tmp/google_bert

  # A Google-layout checkpoint (bert_config.json and vocab.txt beside it, or the flags) ->
  # a Hugging Face folder (config.json, model.safetensors, vocab.txt, tokenizer_config.json)
  python convert_checkpoint.py --to=hf --input=$BERT_DIR/bert_model.ckpt --output_dir=/tmp/hf_bert

  # A fine-tuned run's encoder without its head (run_swag's has no Hugging Face form)
  python convert_checkpoint.py --to=hf --input=/tmp/swag_output --output_dir=/tmp/swag_encoder \
    --encoder_only

Weights are copied bit for bit; HF's exact "gelu" becomes bert_tf's "gelu_exact" and the
original's (tanh) "gelu" becomes HF's "gelu_new", so the converted model computes what the
source computed. The name table is bert_tf/checkpoints/names.py; the conversions,
bert_tf/checkpoints/conversion.py.
"""

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags, logging

from bert_tf import checkpoints
from bert_tf.checkpoints import conversion, run_folder
from bert_tf.errors import UserInputError
from bert_tf.utils import cli

FLAGS = flags.FLAGS

flags.DEFINE_string("input", None,
                    "--to=google: a Hugging Face BERT folder (config.json, model.safetensors, "
                    "vocab.txt, optional tokenizer_config.json). --to=hf: a Google-layout "
                    "checkpoint prefix (e.g. .../bert_model.ckpt or .../model.ckpt-1000) or a "
                    "folder holding bert_model.ckpt.")
flags.DEFINE_string("output_dir", None,
                    "Folder to write the converted model to (must not exist or be empty).")
flags.DEFINE_enum("to", None, ["google", "hf"],
                  "google: Hugging Face -> Google's layout; hf: Google's layout -> Hugging Face.")
flags.DEFINE_string("bert_config_file", None,
                    "--to=hf only: the checkpoint's bert_config.json (default: the one beside "
                    "--input).")
flags.DEFINE_string("vocab_file", None,
                    "The WordPiece vocab to copy (default: vocab.txt beside --input, or in the "
                    "Hugging Face folder).")
flags.DEFINE_bool("do_lower_case", None,
                  "--to=hf only: do_lower_case for tokenizer_config.json. Default: the one a "
                  "runner recorded with the checkpoint, else from the Google release's folder "
                  "name, else from the vocab (no upper-case word pieces means uncased).")
flags.DEFINE_bool("strip_accents", None,
                  "--to=hf only: strip_accents for tokenizer_config.json. Default: null (strip "
                  "exactly when lower-casing, the original's behaviour).")
flags.DEFINE_bool("encoder_only", False,
                  "--to=hf only: write the encoder alone (BertModel), leaving out the "
                  "checkpoint's heads, e.g. a run_swag model's, whose head has no Hugging Face "
                  "form.")


def main(_):
  cli.require_flags(FLAGS, "input", "output_dir", "to")
  if FLAGS.to == "google":
    stray = [n for n in ("bert_config_file", "do_lower_case", "strip_accents")
             if FLAGS[n].value is not None] + (["encoder_only"] if FLAGS.encoder_only else [])
    if stray:
      raise UserInputError("%s only apply to --to=hf; with --to=google the Hugging Face "
                           "folder's config.json and tokenizer_config.json are used." %
                           ", ".join("--" + n for n in stray))
    prefix, hf = conversion.convert_to_google(FLAGS.input, FLAGS.output_dir, FLAGS.vocab_file)
    case = "--do_lower_case=%s" % hf.tokenizer["do_lower_case"]
    if hf.tokenizer["strip_accents"] is not None:
      case += " --strip_accents=%s" % hf.tokenizer["strip_accents"]
    logging.info("Wrote %d variables (heads: %s) to %s, with bert_config.json and vocab.txt",
                 len(hf.shapes), ", ".join(hf.heads) or "none", prefix)
    print("Converted %s -> %s (hidden_act %r). Tokenize as the model was trained: %s" %
          (FLAGS.input, prefix, hf.config.hidden_act, case))
  else:
    architecture, do_lower_case = conversion.convert_to_hf(
        FLAGS.input, FLAGS.output_dir, FLAGS.bert_config_file, FLAGS.vocab_file,
        FLAGS.do_lower_case, FLAGS.strip_accents, FLAGS.encoder_only)
    guessed = ""
    if FLAGS.do_lower_case is None:
      recorded = run_folder.recorded_settings(checkpoints.open_source(FLAGS.input, "google").path)
      guessed = (" (as recorded with the run)" if "do_lower_case" in recorded else
                 " (guessed; set it with --do_lower_case)")
    print("Converted %s -> %s (%s). tokenizer_config.json: do_lower_case=%s%s" %
          (FLAGS.input, FLAGS.output_dir, architecture, do_lower_case, guessed))


if __name__ == "__main__":
  cli.run(main)
