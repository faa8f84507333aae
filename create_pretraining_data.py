"""Create masked-LM / next-sentence pretraining TFRecords from raw text (paper section 3.1).

Same flags and, for the same input, flags and seed, the same records as Google's
create_pretraining_data.py:

  python create_pretraining_data.py --input_file=data/pretraining_corpus.txt \
    --output_file=/tmp/tf_examples.tfrecord --vocab_file=$BERT_DIR/vocab.txt \
    --do_lower_case=True --max_seq_length=128 --max_predictions_per_seq=20 \
    --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5

Masking procedures (the paper's appendix C.2, Table 8): of the tokens chosen for
prediction, the share --mask_token_prob becomes [MASK], --random_token_prob a random
vocab word, and the rest keep their token. One command line per row, MASK/SAME/RND:

  P="python create_pretraining_data.py --input_file=data/pretraining_corpus.txt \
    --vocab_file=$BERT_DIR/vocab.txt"
  $P --output_file=/tmp/table8/80_10_10.tfrecord  # default: 0.8 and 0.1
  $P --output_file=/tmp/table8/100_0_0.tfrecord --mask_token_prob=1.0 --random_token_prob=0.0
  $P --output_file=/tmp/table8/80_0_20.tfrecord --mask_token_prob=0.8 --random_token_prob=0.2
  $P --output_file=/tmp/table8/80_20_0.tfrecord --mask_token_prob=0.8 --random_token_prob=0.0
  $P --output_file=/tmp/table8/0_20_80.tfrecord --mask_token_prob=0.0 --random_token_prob=0.8
  $P --output_file=/tmp/table8/0_0_100.tfrecord --mask_token_prob=0.0 --random_token_prob=1.0

The default writes exactly the original's records. The random word is drawn from the
whole vocab, as in the original, so it may be [MASK] or the token itself. The Beam
script (create_pretraining_data_beam.py) takes the same two flags.

Input: one sentence per line, a blank line between documents. The default holds the
whole corpus in memory, like the original. For corpora larger than RAM, pass
--documents_per_shard=N: documents are then read N at a time and each shard is
shuffled, paired and masked on its own (random next sentences come from the same
shard), so memory stays bounded; the records are then no longer those of the
original.
"""

import os

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags, logging

from bert_tf.checkpoints import run_folder
from bert_tf.data import input_pipeline
from bert_tf.errors import UserInputError
from bert_tf.tasks.pretraining import data_flags, records
from bert_tf.utils import cli
from bert_tf.utils.progress import Progress

FLAGS = flags.FLAGS

data_flags.define()
flags.DEFINE_integer("documents_per_shard", 0,
                     "0 (default): hold the whole corpus in memory and write exactly the "
                     "original's records. N > 0: stream the corpus N documents at a time with "
                     "bounded memory (different, equally valid records).")
flags.adopt_module_key_flags(cli)  # --help lists the shared flags too


def main(_):
  data_flags.check(FLAGS)
  if FLAGS.documents_per_shard < 0:
    raise UserInputError("--documents_per_shard must be 0 (whole corpus) or positive.")
  tokenizer = data_flags.tokenizer(FLAGS)
  # In the order tf.io.gfile.glob gives, as the original (the records depend on it).
  input_files = input_pipeline.expand_files(FLAGS.input_file, "--input_file")
  output_files = FLAGS.output_file.split(",")
  for output_file in output_files:  # created, as the runners create --output_dir
    run_folder.make_output_dir(os.path.dirname(output_file) or ".",
                               "--output_file's folder")
  logging.info("Reading from %d input file(s): %s", len(input_files), ", ".join(input_files))
  rng = records.new_rng(FLAGS.random_seed)
  options = dict(tokenizer=tokenizer, max_seq_length=FLAGS.max_seq_length,
                 dupe_factor=FLAGS.dupe_factor, short_seq_prob=FLAGS.short_seq_prob,
                 masked_lm_prob=FLAGS.masked_lm_prob,
                 max_predictions_per_seq=FLAGS.max_predictions_per_seq, rng=rng,
                 do_whole_word_mask=FLAGS.do_whole_word_mask,
                 mask_token_prob=FLAGS.mask_token_prob,
                 random_token_prob=FLAGS.random_token_prob)
  if FLAGS.documents_per_shard:
    count = records.write_sharded(input_files, output_files,
                                           FLAGS.documents_per_shard, **options)
  else:
    documents = records.read_documents(input_files, tokenizer,
                                                progress_description="reading corpus",
                                                max_seq_length=FLAGS.max_seq_length)
    logging.info("Read %d documents; creating instances", len(documents))
    progress = Progress(FLAGS.dupe_factor * len(documents), "documents", "creating instances")
    instances = records.create_training_instances(input_files, documents=documents,
                                                           progress=progress, **options)
    progress = Progress(len(instances), "records", "writing")
    count = records.write_instance_to_example_files(
        instances, tokenizer, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq, output_files,
        progress=progress)
  logging.info("Wrote %d total instances to %s", count, ", ".join(output_files))


if __name__ == "__main__":
  cli.run(main)
