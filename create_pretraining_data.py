"""Create masked-LM / next-sentence pretraining TFRecords from raw text (paper section 3.1).

Same flags and, for the same input, flags and seed, the same records as Google's
create_pretraining_data.py:

  python create_pretraining_data.py --input_file=corpus.txt --output_file=/tmp/tf_examples.tfrecord \
    --vocab_file=$BERT_DIR/vocab.txt --do_lower_case=True --max_seq_length=128 \
    --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5

Input: one sentence per line, a blank line between documents. The default holds the
whole corpus in memory, like the original. For corpora larger than RAM, pass
--documents_per_shard=N: documents are then read N at a time and each shard is
shuffled, paired and masked on its own (random next sentences come from the same
shard), so memory stays bounded; the records are then no longer those of the
original.
"""

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)
from absl import flags, logging
import tensorflow as tf

from bert_tf import cli, pretraining_data, tokenization
from bert_tf.errors import UserInputError
from bert_tf.progress import Progress

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None,
                    "Input raw text file (or comma-separated list of files; globs allowed).")
flags.DEFINE_string("output_file", None,
                    "Output TF example file (or comma-separated list of files, written round-robin).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. Should be True for uncased models and "
                  "False for cased models.")
flags.DEFINE_bool("strip_accents", None, tokenization.STRIP_ACCENTS_HELP)
flags.DEFINE_bool("do_whole_word_mask", False,
                  "Whether to use whole word masking rather than per-WordPiece masking.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10,
                     "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "Probability of creating sequences which are shorter than the maximum length.")
flags.DEFINE_integer("documents_per_shard", 0,
                     "0 (default): hold the whole corpus in memory and write exactly the original's "
                     "records. N > 0: stream the corpus N documents at a time with bounded memory "
                     "(different, equally valid records).")


def expand_input_files(patterns):
  """Comma-separated globs -> files, in the order tf.io.gfile.glob gives (as the original)."""
  files = []
  for pattern in patterns.split(","):
    matched = tf.io.gfile.glob(pattern)
    if not matched:
      raise UserInputError("No file matches --input_file pattern %s." % pattern)
    files.extend(matched)
  return files


def check_flags():
  if FLAGS.max_seq_length < 5:
    raise UserInputError("--max_seq_length must be at least 5 ([CLS] a [SEP] b [SEP]).")
  if FLAGS.max_predictions_per_seq < 1:
    raise UserInputError("--max_predictions_per_seq must be positive.")
  if FLAGS.dupe_factor < 1:
    raise UserInputError("--dupe_factor must be positive.")
  if not 0 <= FLAGS.masked_lm_prob <= 1 or not 0 <= FLAGS.short_seq_prob <= 1:
    raise UserInputError("--masked_lm_prob and --short_seq_prob must be in [0, 1].")
  if FLAGS.documents_per_shard < 0:
    raise UserInputError("--documents_per_shard must be 0 (whole corpus) or positive.")


def main(_):
  cli.require_flags(FLAGS, "input_file", "output_file", "vocab_file")
  check_flags()
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case,
                                         FLAGS.strip_accents)
  for special in ("[CLS]", "[SEP]", "[MASK]"):
    if special not in tokenizer.vocab:
      raise UserInputError("Vocab file %s has no %s token." % (FLAGS.vocab_file, special))
  input_files = expand_input_files(FLAGS.input_file)
  output_files = FLAGS.output_file.split(",")
  for output_file in output_files:
    folder = tf.io.gfile.join(output_file, "..")
    if not tf.io.gfile.isdir(folder):
      raise UserInputError("Output folder of %s does not exist." % output_file)
  logging.info("Reading from %d input file(s): %s", len(input_files), ", ".join(input_files))
  rng = pretraining_data.new_rng(FLAGS.random_seed)
  options = dict(tokenizer=tokenizer, max_seq_length=FLAGS.max_seq_length,
                 dupe_factor=FLAGS.dupe_factor, short_seq_prob=FLAGS.short_seq_prob,
                 masked_lm_prob=FLAGS.masked_lm_prob,
                 max_predictions_per_seq=FLAGS.max_predictions_per_seq, rng=rng,
                 do_whole_word_mask=FLAGS.do_whole_word_mask)
  if FLAGS.documents_per_shard:
    count = pretraining_data.write_sharded(input_files, output_files,
                                           FLAGS.documents_per_shard, **options)
  else:
    documents = pretraining_data.read_documents(input_files, tokenizer,
                                                progress_description="reading corpus")
    logging.info("Read %d documents; creating instances", len(documents))
    instances = pretraining_data.create_training_instances(input_files, documents=documents,
                                                           **options)
    progress = Progress(len(instances), "records", "writing")
    count = pretraining_data.write_instance_to_example_files(
        instances, tokenizer, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq, output_files,
        progress=progress)
  logging.info("Wrote %d total instances to %s", count, ", ".join(output_files))


if __name__ == "__main__":
  cli.run(main)
