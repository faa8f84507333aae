"""Pretraining records: training instances as the original's tf.train.Examples, written.

The stages of create_pretraining_data live in their own modules: `pretraining_corpus`
reads the corpus into documents and `pretraining_instances` turns documents into
instances with the original's random draws. This module encodes instances in the
record layout stated once in `example_codec` (the one `input_pipeline` reads) and
writes them three ways: the original's whole corpus in memory
(`write_instance_to_example_files`), `write_sharded` for corpora larger than memory
(off by default), and `file_examples`, one input file's whole run, the unit that
`pretraining_data_beam` distributes. The scripts import the stages from here.
TensorFlow is not imported here.
"""

from bert_tf.data import example_codec
from bert_tf.tasks.pretraining.corpus import (  # noqa: F401  (has_text, no_text_error: the scripts')
  has_text,
  iter_documents,
  no_text_error,
  read_documents,
)
from bert_tf.tasks.pretraining.instances import (
  MASK_TOKEN_PROB,
  RANDOM_TOKEN_PROB,
  create_training_instances,
  new_rng,
)
from bert_tf.utils.progress import Progress


def instance_to_example(instance, tokenizer, max_seq_length, max_predictions_per_seq):
  """Serialized tf.train.Example with the original's 7 features, zero-padded."""
  input_ids = tokenizer.convert_tokens_to_ids(instance.tokens)
  if len(input_ids) > max_seq_length:
    raise AssertionError("instance longer than max_seq_length")
  padding = max_seq_length - len(input_ids)
  masked_lm_ids = tokenizer.convert_tokens_to_ids(instance.masked_lm_labels)
  mlm_padding = max_predictions_per_seq - len(masked_lm_ids)
  return example_codec.encode_record(
      example_codec.pretraining_layout(max_seq_length, max_predictions_per_seq), {
          "input_ids": input_ids + [0] * padding,
          "input_mask": [1] * len(input_ids) + [0] * padding,
          "segment_ids": list(instance.segment_ids) + [0] * padding,
          "masked_lm_positions": list(instance.masked_lm_positions) + [0] * mlm_padding,
          "masked_lm_ids": masked_lm_ids + [0] * mlm_padding,
          "masked_lm_weights": [1.0] * len(masked_lm_ids) + [0.0] * mlm_padding,
          "next_sentence_labels": [1 if instance.is_random_next else 0],
      })


def write_instance_to_example_files(instances, tokenizer, max_seq_length,
                                    max_predictions_per_seq, output_files, progress=None):
  """Writes the instances round-robin over `output_files`; returns the count."""
  with example_codec.ExampleFileWriter(output_files, progress) as writer:
    for instance in instances:
      writer.write(instance_to_example(instance, tokenizer, max_seq_length,
                                       max_predictions_per_seq))
  return writer.count


def file_examples(input_file, tokenizer, seed, max_seq_length, dupe_factor, short_seq_prob,
                  masked_lm_prob, max_predictions_per_seq, do_whole_word_mask=False,
                  opener=None, mask_token_prob=MASK_TOKEN_PROB,
                  random_token_prob=RANDOM_TOKEN_PROB):
  """Yields the serialized records of one input file: exactly the records that
  create_pretraining_data.py writes for that file alone with --random_seed=seed.

  Memory is bounded by the file (its documents and instances), not the corpus.
  """
  documents = read_documents([input_file], tokenizer, opener=opener,
                             max_seq_length=max_seq_length)
  instances = create_training_instances(
      None, tokenizer, max_seq_length, dupe_factor, short_seq_prob, masked_lm_prob,
      max_predictions_per_seq, new_rng(seed), do_whole_word_mask, documents=documents,
      mask_token_prob=mask_token_prob, random_token_prob=random_token_prob)
  del documents  # instances hold their own token lists
  for instance in instances:
    yield instance_to_example(instance, tokenizer, max_seq_length, max_predictions_per_seq)


def write_sharded(input_files, output_files, documents_per_shard, tokenizer, max_seq_length,
                  dupe_factor, short_seq_prob, masked_lm_prob, max_predictions_per_seq, rng,
                  do_whole_word_mask=False, mask_token_prob=MASK_TOKEN_PROB,
                  random_token_prob=RANDOM_TOKEN_PROB):
  """Bounded-memory mode: each shard of `documents_per_shard` documents is processed
  like a whole corpus of the original (shuffle, dupe passes, shuffle), with one rng
  running through all shards. Returns the number of records written."""

  def flush(shard):
    instances = create_training_instances(
        None, tokenizer, max_seq_length, dupe_factor, short_seq_prob, masked_lm_prob,
        max_predictions_per_seq, rng, do_whole_word_mask, documents=shard,
        mask_token_prob=mask_token_prob, random_token_prob=random_token_prob)
    for instance in instances:
      writer.write(instance_to_example(instance, tokenizer, max_seq_length,
                                       max_predictions_per_seq))

  progress = Progress(None, "records", "writing (streaming)")
  with example_codec.ExampleFileWriter(output_files, progress) as writer:
    shard = []
    for document in iter_documents(input_files, tokenizer, max_seq_length=max_seq_length):
      shard.append(document)
      if len(shard) == documents_per_shard:
        flush(shard)
        shard = []
    if shard:
      flush(shard)
    progress.finish()
  return writer.count
