"""Packing token lists into BERT inputs, exactly as the original runners do.

`[CLS] a [SEP]` (type 0), then `b [SEP]` (type 1) when b is non-empty, zero-padded
to `max_seq_length` with mask 1 on real tokens. Shared by extract_features and the
fine-tuning runners (the original repeated this code in each of them).
"""

import collections
import dataclasses

from bert_tf.errors import UserInputError


def truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Pops from the longer list (from b on ties) until both fit; modifies in place."""
  while len(tokens_a) + len(tokens_b) > max_length:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


@dataclasses.dataclass
class PackedInput:
  tokens: list
  input_ids: list
  input_mask: list
  segment_ids: list


def pack_tokens(tokens_a, tokens_b, max_seq_length, tokenizer):
  """Truncates and packs word pieces; `tokens_b` may be None or empty (single sentence)."""
  if max_seq_length < 3:
    raise UserInputError("max_seq_length must be at least 3, got %d." % max_seq_length)
  tokens_a = list(tokens_a)
  tokens_b = list(tokens_b) if tokens_b else []
  if tokens_b:
    truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
  else:
    tokens_a = tokens_a[:max_seq_length - 2]
  tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
  segment_ids = [0] * len(tokens)
  if tokens_b:
    tokens += tokens_b + ["[SEP]"]
    segment_ids += [1] * (len(tokens_b) + 1)
  input_ids = tokenizer.convert_tokens_to_ids(tokens)
  padding = max_seq_length - len(input_ids)
  return PackedInput(tokens=tokens, input_ids=input_ids + [0] * padding,
                     input_mask=[1] * len(tokens) + [0] * padding,
                     segment_ids=segment_ids + [0] * padding)


DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def doc_spans_for(num_tokens, max_tokens_for_doc, doc_stride):
  """The sliding windows of at most `max_tokens_for_doc` pieces, `doc_stride` apart, over a
  sequence of `num_tokens` (run_squad's over a context; run_ner's over a document)."""
  spans = []
  start_offset = 0
  while start_offset < num_tokens:
    length = min(num_tokens - start_offset, max_tokens_for_doc)
    spans.append(DocSpan(start_offset, length))
    if start_offset + length == num_tokens:
      break
    start_offset += min(length, doc_stride)
  return spans


def check_is_max_context(doc_spans, cur_span_index, position):
  """Whether window `cur_span_index` gives token `position` the most context."""
  best_score = best_span_index = None
  for span_index, span in enumerate(doc_spans):
    end = span.start + span.length - 1
    if position < span.start or position > end:
      continue
    score = min(position - span.start, end - position) + 0.01 * span.length
    if best_score is None or score > best_score:
      best_score, best_span_index = score, span_index
  return cur_span_index == best_span_index
