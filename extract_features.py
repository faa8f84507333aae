"""Extract pre-computed per-token feature vectors from BERT (the paper's section 5.3).

Same flags and JSON-lines output as Google's extract_features.py:

  python extract_features.py --input_file=input.txt --output_file=output.jsonl \
    --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 \
    --max_seq_length=128 --batch_size=8

Each input line is one example; `sentence A ||| sentence B` makes a pair.
"""

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags, logging

from bert_tf import checkpoints, runner
from bert_tf.checkpoints import checks
from bert_tf.config import BertConfig
from bert_tf.inference import feature_extraction
from bert_tf.modeling import BertModel
from bert_tf.utils import cli, precision

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Text file, one example per line; 'a ||| b' for pairs.")
flags.DEFINE_string("output_file", None, "JSON-lines file to write (replaced only when complete).")
flags.DEFINE_string("layers", "-1,-2,-3,-4",
                    "Comma-separated encoder layer indexes to output (-1 is the last layer).")
flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model. "
                    "This specifies the model architecture.")
flags.DEFINE_integer("max_seq_length", 128,
                     "The maximum total input sequence length after WordPiece tokenization. "
                     "Sequences longer than this will be truncated, and sequences shorter "
                     "than this will be padded.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint (usually from a pre-trained BERT model).")
cli.define_tokenizer_flags()
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
flags.DEFINE_bool("use_tpu", False, "Accepted for compatibility; features are computed on the "
                  "local CPU/GPU devices.")
flags.DEFINE_string("master", None, "Accepted for compatibility (TPU master address); unused.")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility; unused.")
flags.DEFINE_bool("use_one_hot_embeddings", False,
                  "If True, word embeddings are looked up with a one-hot matmul (as on TPUs) "
                  "instead of a gather; the numbers are the same.")
flags.DEFINE_bool("jit_compile", None,
                  "Compile the per-token forward pass with XLA. Default: whichever measured "
                  "faster for --inference_precision (XLA for int8; TensorFlow's oneDNN kernels "
                  "for float32 and bfloat16), see bert_tf/utils/precision.py.")
precision.define_flag("the encoder")
flags.DEFINE_bool("pad_to_max_seq_length", False,
                  "Run every batch at --max_seq_length as the original. By default each batch "
                  "runs at its longest real sequence (a multiple of 16 under XLA): the same "
                  "values, faster.")
flags.DEFINE_string("pooling", None,
                    "Write one pooled sentence embedding per line instead of per-token features, "
                    "from the last layer: cls, mean, max, mean_sqrt_len_tokens, weightedmean, "
                    "lasttoken (several, comma-separated, are concatenated in that order), or "
                    "from_model with --model_dir.")
flags.DEFINE_string("model_dir", None,
                    "A sentence-transformers folder (modules.json): its weights, tokenizer, "
                    "pooling and normalization give the embeddings (implies "
                    "--pooling=from_model; replaces --init_checkpoint, --bert_config_file and "
                    "--vocab_file).")
flags.adopt_module_key_flags(cli)  # --help lists the tokenizer flags too

# The least packing.pack_tokens takes: [CLS] a [SEP] b [SEP] with a and b cut to nothing.
_MIN_SEQ_LENGTH = 3


def write_sentence_embeddings():
  """--pooling / --model_dir: one embedding per example (bert_tf.inference.text_embedder)."""
  cli.require_flags(FLAGS, "input_file", "output_file")
  present = [n for n in ("layers", "max_seq_length", "do_lower_case", "strip_accents")
             if FLAGS[n].present]
  embedder = feature_extraction.sentence_embedder(
      FLAGS.pooling, FLAGS.model_dir, FLAGS.init_checkpoint, FLAGS.bert_config_file,
      FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.strip_accents, FLAGS.max_seq_length,
      present, inference_precision=FLAGS.inference_precision)
  count = feature_extraction.write_sentence_embeddings(
      embedder, feature_extraction.read_examples(FLAGS.input_file), FLAGS.output_file,
      FLAGS.batch_size)
  logging.info("Wrote %d sentence embeddings (%s) to %s", count,
               ",".join(embedder.pooling.modes), FLAGS.output_file)


def main(_):
  if FLAGS.inference_precision == "bfloat16":
    runner.warn_if_slow_bfloat16("--inference_precision=bfloat16",
                                 "Use float32 or int8 on this machine.")
  if FLAGS.pooling or FLAGS.model_dir:
    return write_sentence_embeddings()
  cli.require_flags(FLAGS, "input_file", "vocab_file", "bert_config_file", "init_checkpoint",
                    "output_file")
  if FLAGS.use_tpu:
    logging.warning("--use_tpu is ignored by extract_features; running on local devices.")
  checks.check_positive("batch_size", FLAGS.batch_size)
  checks.check_case(FLAGS.do_lower_case, FLAGS.init_checkpoint)
  config = BertConfig.from_json_file(FLAGS.bert_config_file)
  layer_indexes = feature_extraction.parse_layer_indexes(FLAGS.layers, config.num_hidden_layers)
  checks.check_seq_length(FLAGS.max_seq_length, config, _MIN_SEQ_LENGTH)
  tokenizer = checks.checked_tokenizer(FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.strip_accents,
                                       config)
  checks.check_init_checkpoint(FLAGS.init_checkpoint)
  checks.check_causal_attention(FLAGS.init_checkpoint, config, FLAGS.bert_config_file)
  examples = feature_extraction.read_examples(FLAGS.input_file)
  encoder = BertModel(config, use_one_hot_embeddings=FLAGS.use_one_hot_embeddings,
                      dtype=precision.keras_policy(FLAGS.inference_precision))
  report = checkpoints.load_checkpoint(FLAGS.init_checkpoint, encoder)
  precision.finish(encoder, FLAGS.inference_precision)
  logging.info("Loaded %d variables from %s", len(report.loaded), report.checkpoint)
  count = feature_extraction.extract_features(
      encoder, tokenizer, examples, FLAGS.output_file, layer_indexes, FLAGS.max_seq_length,
      FLAGS.batch_size, jit_compile=FLAGS.jit_compile,
      dynamic_length=not FLAGS.pad_to_max_seq_length)
  logging.info("Wrote features of %d examples (layers %s) to %s", count, layer_indexes,
               FLAGS.output_file)


if __name__ == "__main__":
  cli.run(main)
