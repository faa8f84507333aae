"""Masked-LM / next-sentence training instances, record-for-record as the original.

The original `create_pretraining_data.py` decides everything with one
`random.Random(seed)`; the exact sequence of `random()`, `randint()` and `shuffle()`
calls below is the original's, so the same corpus, flags and seed give the same
records. Quirks kept on purpose:

* documents are shuffled, then every instance of every `dupe_factor` pass is
  shuffled again as one list (the whole corpus is held in memory);
* a "random next" sentence may come from the same document when 10 draws in a row
  pick it (always so for a one-document corpus);
* 10% of masked tokens are replaced by a word drawn from the WHOLE vocab,
  `[unused*]`, `[PAD]` and `[CLS]` included;
* whole-word masking changes how much randomness each document consumes.

What differs is speed: tokenization is cached per word, and records are encoded
straight to protobuf bytes (see `example_codec`); and an input file without any
text is an error instead of silently contributing nothing.

`file_examples` is one input file's whole run, the unit that
`pretraining_data_beam` distributes. TensorFlow is not imported here.
"""

import collections
import dataclasses
import os
import random

from bert_tf import example_codec, user_files
from bert_tf.errors import UserInputError
from bert_tf.progress import Progress

MaskedLmInstance = collections.namedtuple("MaskedLmInstance", ["index", "label"])


@dataclasses.dataclass
class TrainingInstance:
  """One pretraining example before conversion to ids."""
  tokens: list
  segment_ids: list
  is_random_next: bool
  masked_lm_positions: list
  masked_lm_labels: list

  def __str__(self):
    return ("tokens: %s\nsegment_ids: %s\nis_random_next: %s\nmasked_lm_positions: %s\n"
            "masked_lm_labels: %s\n\n" % (
                " ".join(self.tokens), " ".join(map(str, self.segment_ids)), self.is_random_next,
                " ".join(map(str, self.masked_lm_positions)), " ".join(self.masked_lm_labels)))


def _open_local(path):
  return open(path, "rb")


def read_text_lines(input_file, opener=None):
  """Yields (stripped line, raw byte count); lines split on "\\n" as TF's GFile does.

  `opener(path)` returns a binary file object (default: the local file system; the
  Beam pipeline passes Beam's file systems, so gs:// etc. work on its workers).
  """
  try:
    with (opener or _open_local)(input_file) as f:
      for number, raw in enumerate(f, 1):
        try:
          yield raw.decode("utf-8").strip(), len(raw)
        except UnicodeDecodeError as e:
          raise UserInputError("Input file %s line %d is not UTF-8 (byte %d); convert the "
                               "corpus to UTF-8." % (input_file, number, e.start + 1)) from None
  except OSError as e:
    raise user_files.open_error(e, input_file, "Input file", "(check --input_file)") from None


def no_text_error(input_file):
  return UserInputError(
      "Input file %s has no text to make pretraining examples from (it is empty, or every "
      "line is blank or tokenizes to nothing); remove it from --input_file." % input_file)


def has_text(input_file, tokenizer, opener=None):
  """Whether any line of the file tokenizes to something; reads only up to that line.

  Such a file always yields records, so this is the cheap up-front check that no
  input file is empty.
  """
  lines = read_text_lines(input_file, opener)
  try:
    return any(line and tokenizer.tokenize(line) for line, _ in lines)
  finally:
    lines.close()


def _size(path):
  try:
    return os.path.getsize(path)
  except OSError:
    return 0  # read_text_lines reports it


def iter_documents(input_files, tokenizer, progress_description=None, opener=None):
  """Yields word-piece documents: one sentence per line, a blank line ends a document.

  Lines that tokenize to nothing are dropped, and so are empty documents (like the
  original, a document may run on from one file into the next). A file without a
  single tokenized line raises UserInputError. With a progress description,
  progress in KiB read is printed to stderr.
  """
  progress = None
  if progress_description:
    total = sum(_size(f) for f in input_files)
    progress = Progress(max(1, total // 1024), "KiB", progress_description)
  pending_bytes = 0
  document = []
  for input_file in input_files:
    file_has_text = False
    for line, size in read_text_lines(input_file, opener):
      if not line:
        if document:
          yield document
        document = []
      tokens = tokenizer.tokenize(line)
      if tokens:
        document.append(tokens)
        file_has_text = True
      if progress is not None:
        pending_bytes += size
        if pending_bytes >= 1 << 20:
          progress.update(pending_bytes // 1024)
          pending_bytes %= 1024
    if not file_has_text:
      raise no_text_error(input_file)
  if document:
    yield document
  if progress is not None:
    progress.update(progress.total - progress.done)


def read_documents(input_files, tokenizer, progress_description=None, opener=None):
  """All documents of the corpus in memory, as the original holds them."""
  return list(iter_documents(input_files, tokenizer, progress_description, opener))


def create_training_instances(input_files, tokenizer, max_seq_length, dupe_factor,
                              short_seq_prob, masked_lm_prob, max_predictions_per_seq, rng,
                              do_whole_word_mask=False, documents=None):
  """The original pipeline: read, shuffle documents, make instances, shuffle instances."""
  all_documents = read_documents(input_files, tokenizer) if documents is None else documents
  rng.shuffle(all_documents)
  vocab_words = list(tokenizer.vocab.keys())
  instances = []
  for _ in range(dupe_factor):
    for document_index in range(len(all_documents)):
      instances.extend(create_instances_from_document(
          all_documents, document_index, max_seq_length, short_seq_prob, masked_lm_prob,
          max_predictions_per_seq, vocab_words, rng, do_whole_word_mask))
  rng.shuffle(instances)
  return instances


def create_instances_from_document(all_documents, document_index, max_seq_length,
                                   short_seq_prob, masked_lm_prob, max_predictions_per_seq,
                                   vocab_words, rng, do_whole_word_mask=False):
  """Chunks one document into segment pairs of about `target_seq_length` tokens."""
  document = all_documents[document_index]
  max_num_tokens = max_seq_length - 3
  # Usually fill the sequence, but sometimes (short_seq_prob) use a shorter one so
  # the model also sees short sequences at fine-tuning time.
  target_seq_length = max_num_tokens
  if rng.random() < short_seq_prob:
    target_seq_length = rng.randint(2, max_num_tokens)

  instances = []
  current_chunk = []
  current_length = 0
  i = 0
  while i < len(document):
    segment = document[i]
    current_chunk.append(segment)
    current_length += len(segment)
    if i == len(document) - 1 or current_length >= target_seq_length:
      if current_chunk:
        a_end = 1
        if len(current_chunk) >= 2:
          a_end = rng.randint(1, len(current_chunk) - 1)
        tokens_a = [t for segment_a in current_chunk[:a_end] for t in segment_a]

        tokens_b = []
        if len(current_chunk) == 1 or rng.random() < 0.5:
          is_random_next = True
          target_b_length = target_seq_length - len(tokens_a)
          for _ in range(10):
            random_document_index = rng.randint(0, len(all_documents) - 1)
            if random_document_index != document_index:
              break
          random_document = all_documents[random_document_index]
          random_start = rng.randint(0, len(random_document) - 1)
          for j in range(random_start, len(random_document)):
            tokens_b.extend(random_document[j])
            if len(tokens_b) >= target_b_length:
              break
          # The unused segments go back to be used in the next chunk.
          i -= len(current_chunk) - a_end
        else:
          is_random_next = False
          for segment_b in current_chunk[a_end:]:
            tokens_b.extend(segment_b)
        truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
        if not tokens_a or not tokens_b:
          raise AssertionError("empty segment after truncation (max_seq_length too small?)")

        tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
        segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        tokens, positions, labels = create_masked_lm_predictions(
            tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng, do_whole_word_mask)
        instances.append(TrainingInstance(tokens, segment_ids, is_random_next, positions, labels))
      current_chunk = []
      current_length = 0
    i += 1
  return instances


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words,
                                 rng, do_whole_word_mask=False):
  """Picks ~masked_lm_prob of the tokens; 80% -> [MASK], 10% kept, 10% random word."""
  cand_indexes = []
  for i, token in enumerate(tokens):
    if token == "[CLS]" or token == "[SEP]":
      continue
    if do_whole_word_mask and cand_indexes and token.startswith("##"):
      cand_indexes[-1].append(i)
    else:
      cand_indexes.append([i])
  rng.shuffle(cand_indexes)

  output_tokens = list(tokens)
  num_to_predict = min(max_predictions_per_seq,
                       max(1, int(round(len(tokens) * masked_lm_prob))))
  masked_lms = []
  covered_indexes = set()
  for index_set in cand_indexes:
    if len(masked_lms) >= num_to_predict:
      break
    # Whole-word masking may overshoot the budget; such words are skipped.
    if len(masked_lms) + len(index_set) > num_to_predict:
      continue
    if any(index in covered_indexes for index in index_set):
      continue
    for index in index_set:
      covered_indexes.add(index)
      if rng.random() < 0.8:
        masked_token = "[MASK]"
      elif rng.random() < 0.5:
        masked_token = tokens[index]
      else:
        masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
      output_tokens[index] = masked_token
      masked_lms.append(MaskedLmInstance(index=index, label=tokens[index]))
  masked_lms.sort(key=lambda x: x.index)
  return (output_tokens, [p.index for p in masked_lms], [p.label for p in masked_lms])


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """Trims the longer list (b on ties) from a random end until the pair fits."""
  while len(tokens_a) + len(tokens_b) > max_num_tokens:
    trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    if rng.random() < 0.5:
      del trunc_tokens[0]
    else:
      trunc_tokens.pop()


def new_rng(seed):
  """The generator the original uses: Python's Mersenne Twister seeded with `seed`."""
  return random.Random(seed)


def instance_to_example(instance, tokenizer, max_seq_length, max_predictions_per_seq):
  """Serialized tf.train.Example with the original's 7 features, zero-padded."""
  input_ids = tokenizer.convert_tokens_to_ids(instance.tokens)
  if len(input_ids) > max_seq_length:
    raise AssertionError("instance longer than max_seq_length")
  padding = max_seq_length - len(input_ids)
  input_mask = [1] * len(input_ids) + [0] * padding
  segment_ids = list(instance.segment_ids) + [0] * padding
  input_ids = input_ids + [0] * padding
  masked_lm_ids = tokenizer.convert_tokens_to_ids(instance.masked_lm_labels)
  mlm_padding = max_predictions_per_seq - len(masked_lm_ids)
  return example_codec.encode_example([
      ("input_ids", example_codec.int64_feature(input_ids)),
      ("input_mask", example_codec.int64_feature(input_mask)),
      ("segment_ids", example_codec.int64_feature(segment_ids)),
      ("masked_lm_positions",
       example_codec.int64_feature(list(instance.masked_lm_positions) + [0] * mlm_padding)),
      ("masked_lm_ids", example_codec.int64_feature(masked_lm_ids + [0] * mlm_padding)),
      ("masked_lm_weights",
       example_codec.float_feature([1.0] * len(masked_lm_ids) + [0.0] * mlm_padding)),
      ("next_sentence_labels", example_codec.int64_feature([1 if instance.is_random_next else 0])),
  ])


def write_instance_to_example_files(instances, tokenizer, max_seq_length,
                                    max_predictions_per_seq, output_files, progress=None):
  """Writes the instances round-robin over `output_files`; returns the count."""
  writer = example_codec.ExampleFileWriter(output_files, progress)
  try:
    for instance in instances:
      writer.write(instance_to_example(instance, tokenizer, max_seq_length,
                                       max_predictions_per_seq))
  except BaseException:
    writer.abort()
    raise
  return writer.commit()


def file_examples(input_file, tokenizer, seed, max_seq_length, dupe_factor, short_seq_prob,
                  masked_lm_prob, max_predictions_per_seq, do_whole_word_mask=False,
                  opener=None):
  """Yields the serialized records of one input file: exactly the records that
  create_pretraining_data.py writes for that file alone with --random_seed=seed.

  Memory is bounded by the file (its documents and instances), not the corpus.
  """
  documents = read_documents([input_file], tokenizer, opener=opener)
  instances = create_training_instances(
      None, tokenizer, max_seq_length, dupe_factor, short_seq_prob, masked_lm_prob,
      max_predictions_per_seq, new_rng(seed), do_whole_word_mask, documents=documents)
  del documents  # instances hold their own token lists
  for instance in instances:
    yield instance_to_example(instance, tokenizer, max_seq_length, max_predictions_per_seq)


def write_sharded(input_files, output_files, documents_per_shard, tokenizer, max_seq_length,
                  dupe_factor, short_seq_prob, masked_lm_prob, max_predictions_per_seq, rng,
                  do_whole_word_mask=False):
  """Bounded-memory mode: each shard of `documents_per_shard` documents is processed
  like a whole corpus of the original (shuffle, dupe passes, shuffle), with one rng
  running through all shards. Returns the number of records written."""
  writer = example_codec.ExampleFileWriter(output_files,
                                          Progress(None, "records", "writing (streaming)"))

  def flush(shard):
    instances = create_training_instances(
        None, tokenizer, max_seq_length, dupe_factor, short_seq_prob, masked_lm_prob,
        max_predictions_per_seq, rng, do_whole_word_mask, documents=shard)
    for instance in instances:
      writer.write(instance_to_example(instance, tokenizer, max_seq_length,
                                       max_predictions_per_seq))

  try:
    shard = []
    for document in iter_documents(input_files, tokenizer):
      shard.append(document)
      if len(shard) == documents_per_shard:
        flush(shard)
        shard = []
    if shard:
      flush(shard)
  except BaseException:
    writer.abort()
    raise
  writer.progress.finish()
  return writer.commit()
