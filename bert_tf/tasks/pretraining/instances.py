"""Masked-LM / next-sentence training instances, record-for-record as the original.

The original `create_pretraining_data.py` decides everything with one
`random.Random(seed)`; the exact sequence of `random()`, `randint()` and `shuffle()`
calls below is the original's, so the same corpus, flags and seed give the same
records. This module holds all of those calls and nothing else, so what must stay
faithful is in one place. Quirks kept on purpose:

* documents are shuffled, then every instance of every `dupe_factor` pass is
  shuffled again as one list (the whole corpus is held in memory);
* a "random next" sentence may come from the same document when 10 draws in a row
  pick it (always so for a one-document corpus);
* 10% of masked tokens are replaced by a word drawn from the WHOLE vocab,
  `[unused*]`, `[PAD]` and `[CLS]` included;
* whole-word masking changes how much randomness each document consumes.

What differs is speed, never the instances: segments are sized before they are
copied and truncation only counts its draws, so time stays linear in a line's
length (the original is quadratic). One addition, off by default: the share of
[MASK], kept and random tokens among the predicted positions can be chosen (paper
appendix C.2, Table 8). TensorFlow is not imported here.
"""

import collections
import dataclasses
import fractions
import functools
import itertools
import random

from bert_tf.tasks.pretraining.corpus import read_documents

MaskedLmInstance = collections.namedtuple("MaskedLmInstance", ["index", "label"])

# The paper's (and the original's) replacement of a predicted token: 80% [MASK],
# 10% a random vocab word, the other 10% the token itself.
MASK_TOKEN_PROB = 0.8
RANDOM_TOKEN_PROB = 0.1


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


def create_training_instances(input_files, tokenizer, max_seq_length, dupe_factor,
                              short_seq_prob, masked_lm_prob, max_predictions_per_seq, rng,
                              do_whole_word_mask=False, documents=None, progress=None,
                              mask_token_prob=MASK_TOKEN_PROB,
                              random_token_prob=RANDOM_TOKEN_PROB):
  """The original pipeline: read, shuffle documents, make instances, shuffle instances.

  `progress`: a Progress counting the dupe_factor * len(documents) documents done.
  """
  if documents is None:
    documents = read_documents(input_files, tokenizer, max_seq_length=max_seq_length)
  all_documents = documents
  rng.shuffle(all_documents)
  vocab_words = list(tokenizer.vocab.keys())
  instances = []
  for _ in range(dupe_factor):
    for document_index in range(len(all_documents)):
      instances.extend(create_instances_from_document(
          all_documents, document_index, max_seq_length, short_seq_prob, masked_lm_prob,
          max_predictions_per_seq, vocab_words, rng, do_whole_word_mask,
          mask_token_prob=mask_token_prob, random_token_prob=random_token_prob))
      if progress is not None:
        progress.update(1)
  rng.shuffle(instances)
  return instances


def create_instances_from_document(all_documents, document_index, max_seq_length,
                                   short_seq_prob, masked_lm_prob, max_predictions_per_seq,
                                   vocab_words, rng, do_whole_word_mask=False,
                                   mask_token_prob=MASK_TOKEN_PROB,
                                   random_token_prob=RANDOM_TOKEN_PROB):
  """Chunks one document into segment pairs of about `target_seq_length` tokens.

  Segments a and b are sized and truncated before they are copied, so an enormous
  line costs time linear in its length, not a copy of it per instance.
  """
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
        segments_a = current_chunk[:a_end]
        length_a = sum(map(len, segments_a))

        if len(current_chunk) == 1 or rng.random() < 0.5:
          is_random_next = True
          target_b_length = target_seq_length - length_a
          for _ in range(10):
            random_document_index = rng.randint(0, len(all_documents) - 1)
            if random_document_index != document_index:
              break
          random_document = all_documents[random_document_index]
          random_start = rng.randint(0, len(random_document) - 1)
          segments_b = []
          length_b = 0
          for j in range(random_start, len(random_document)):
            segments_b.append(random_document[j])
            length_b += len(random_document[j])
            if length_b >= target_b_length:
              break
          # The unused segments go back to be used in the next chunk.
          i -= len(current_chunk) - a_end
        else:
          is_random_next = False
          segments_b = current_chunk[a_end:]
          length_b = sum(map(len, segments_b))
        front_a, back_a, front_b, back_b = truncation(length_a, length_b, max_num_tokens, rng)
        tokens_a = _joined_slice(segments_a, front_a, length_a - back_a)
        tokens_b = _joined_slice(segments_b, front_b, length_b - back_b)
        if not tokens_a or not tokens_b:
          raise AssertionError("empty segment after truncation (max_seq_length too small?)")

        tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
        segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        tokens, positions, labels = create_masked_lm_predictions(
            tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng, do_whole_word_mask,
            mask_token_prob=mask_token_prob, random_token_prob=random_token_prob)
        instances.append(TrainingInstance(tokens, segment_ids, is_random_next, positions, labels))
      current_chunk = []
      current_length = 0
    i += 1
  return instances


def _joined_slice(segments, start, stop):
  """`[t for s in segments for t in s][start:stop]` without building the whole list."""
  out = []
  offset = 0
  for segment in segments:
    if offset >= stop:
      break
    end = offset + len(segment)
    if end > start:
      out.extend(segment[max(0, start - offset):stop - offset])
    offset = end
  return out


@functools.lru_cache(maxsize=None)
def replacement_thresholds(mask_token_prob, random_token_prob):
  """(p, q): a predicted token becomes [MASK] if a first draw is < p, else it is kept if a
  second draw is < q, else replaced by a random word.

  This is the original's `random() < 0.8`, then `random() < 0.5` generalized: the
  same draws for any shares, and with the defaults exactly the original's numbers
  (q = 0.1 / 0.2 is computed from the decimals given, so it is 0.5, not 0.4999...).
  """
  error = ValueError("mask_token_prob %s and random_token_prob %s must be in [0, 1] with a "
                     "sum <= 1" % (mask_token_prob, random_token_prob))
  if not (0 <= mask_token_prob <= 1 and 0 <= random_token_prob <= 1):
    raise error
  mask = fractions.Fraction(repr(float(mask_token_prob)))
  random_word = fractions.Fraction(repr(float(random_token_prob)))
  if mask + random_word > 1:
    raise error
  keep_if_not_masked = 1 - random_word / (1 - mask) if mask < 1 else fractions.Fraction(1)
  return float(mask), float(keep_if_not_masked)


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words,
                                 rng, do_whole_word_mask=False, mask_token_prob=MASK_TOKEN_PROB,
                                 random_token_prob=RANDOM_TOKEN_PROB):
  """Picks ~masked_lm_prob of the tokens; by default 80% -> [MASK], 10% kept, 10% random word
  (`mask_token_prob` and `random_token_prob` set the first and last share)."""
  mask_below, keep_below = replacement_thresholds(mask_token_prob, random_token_prob)
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
      if rng.random() < mask_below:
        masked_token = "[MASK]"
      elif rng.random() < keep_below:
        masked_token = tokens[index]
      else:
        masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
      output_tokens[index] = masked_token
      masked_lms.append(MaskedLmInstance(index=index, label=tokens[index]))
  masked_lms.sort(key=lambda x: x.index)
  return (output_tokens, [p.index for p in masked_lms], [p.label for p in masked_lms])


def truncation(length_a, length_b, max_num_tokens, rng):
  """(front_a, back_a, front_b, back_b): how many tokens the original's truncation cuts
  from each end of a and b, drawing the same random numbers.

  The original removes one token at a time from the longer list (b on ties), from
  the front if `rng.random() < 0.5`, else from the back; deleting from the front
  of a Python list moves the whole list, so a line of n tokens took O(n^2) time.
  Which list loses a token does not depend on the draws: the longer one until b
  is one shorter than a, then b and a in turn. So only the draws are made (in C,
  a block at a time) and counted, and nothing is cut until the end.
  """
  cuts = length_a + length_b - max_num_tokens
  if cuts <= 0:
    return 0, 0, 0, 0
  draws = iter(rng.random, None)  # rng.random() forever, called from C
  if length_a > length_b:
    lead, lead_is_a = length_a - length_b, True
  else:
    lead, lead_is_a = length_b - length_a + 1, False
  lead = min(lead, cuts)
  (lead_front,) = _count_below_half(draws, lead, 1)
  turns = cuts - lead
  other_front, lead_front_more = _count_below_half(draws, turns, 2)  # the other list first
  other_cuts, lead_cuts = (turns + 1) // 2, lead + turns // 2
  lead_front += lead_front_more
  if lead_is_a:
    return lead_front, lead_cuts - lead_front, other_front, other_cuts - other_front
  return other_front, other_cuts - other_front, lead_front, lead_cuts - lead_front


_HALF = 0.5
_BLOCK = 1 << 16  # even: the turns of two lists continue across blocks


def _count_below_half(draws, count, turns):
  """Of the next `count` draws, dealt in turn to `turns` lists, how many are < 0.5 per list."""
  below = [0] * turns
  while count > 0:
    block = list(itertools.islice(draws, min(count, _BLOCK)))
    for turn in range(turns):
      below[turn] += sum(map(_HALF.__gt__, block[turn::turns]))
    count -= len(block)
  return below


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """Trims the longer list (b on ties) from a random end until the pair fits, in place."""
  front_a, back_a, front_b, back_b = truncation(len(tokens_a), len(tokens_b), max_num_tokens,
                                                rng)
  for tokens, front, back in ((tokens_a, front_a, back_a), (tokens_b, front_b, back_b)):
    del tokens[len(tokens) - back:]
    del tokens[:front]


def new_rng(seed):
  """The generator the original uses: Python's Mersenne Twister seeded with `seed`."""
  return random.Random(seed)

