"""SquadExamples -> windowed features, and their record layout (stated once, in `feature_spec`).

As run_squad.py: question pieces are cut at max_query_length; windows advance by
doc_stride; a token belongs to the window where min(left, right) + 0.01 * length
is best; unique ids start at 1000000000; `improve_answer_span` tightens answers
such as "(1895-1943)." to "1895"; out-of-window answers and impossible questions
train on start = end = 0 ([CLS]).
"""

import dataclasses

import tensorflow as tf

from bert_tf.data import input_pipeline
from bert_tf.data.packing import DocSpan, check_is_max_context, doc_spans_for  # noqa: F401 (re-exported)

FIRST_UNIQUE_ID = 1000000000


@dataclasses.dataclass
class InputFeatures:
  unique_id: int
  example_index: int
  doc_span_index: int
  tokens: list
  token_to_orig_map: dict
  token_is_max_context: dict
  input_ids: list
  input_mask: list
  segment_ids: list
  start_position: int = None
  end_position: int = None
  is_impossible: bool = None


def improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
  """The tightest piece span whose text equals the tokenized answer, if any."""
  tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
  for new_start in range(input_start, input_end + 1):
    for new_end in range(input_end, new_start - 1, -1):
      if " ".join(doc_tokens[new_start:new_end + 1]) == tok_answer_text:
        return new_start, new_end
  return input_start, input_end


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                 max_query_length, is_training, output_fn):
  """Calls output_fn(InputFeatures) for every window of every example."""
  unique_id = FIRST_UNIQUE_ID
  for example_index, example in enumerate(examples):
    query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]
    tok_to_orig_index, orig_to_tok_index, all_doc_tokens = [], [], []
    for i, token in enumerate(example.doc_tokens):
      orig_to_tok_index.append(len(all_doc_tokens))
      for sub_token in tokenizer.tokenize(token):
        tok_to_orig_index.append(i)
        all_doc_tokens.append(sub_token)

    tok_start_position = tok_end_position = None
    if is_training and example.is_impossible:
      tok_start_position = tok_end_position = -1
    if is_training and not example.is_impossible:
      tok_start_position = orig_to_tok_index[example.start_position]
      if example.end_position < len(example.doc_tokens) - 1:
        tok_end_position = orig_to_tok_index[example.end_position + 1] - 1
      else:
        tok_end_position = len(all_doc_tokens) - 1
      tok_start_position, tok_end_position = improve_answer_span(
          all_doc_tokens, tok_start_position, tok_end_position, tokenizer,
          example.orig_answer_text)

    max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
    doc_spans = doc_spans_for(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
    for doc_span_index, doc_span in enumerate(doc_spans):
      tokens = ["[CLS]"] + query_tokens + ["[SEP]"]
      segment_ids = [0] * len(tokens)
      token_to_orig_map, token_is_max_context = {}, {}
      for i in range(doc_span.length):
        split_token_index = doc_span.start + i
        token_to_orig_map[len(tokens)] = tok_to_orig_index[split_token_index]
        token_is_max_context[len(tokens)] = check_is_max_context(doc_spans, doc_span_index,
                                                                 split_token_index)
        tokens.append(all_doc_tokens[split_token_index])
        segment_ids.append(1)
      tokens.append("[SEP]")
      segment_ids.append(1)
      input_ids = tokenizer.convert_tokens_to_ids(tokens)
      padding = max_seq_length - len(input_ids)
      input_mask = [1] * len(input_ids) + [0] * padding
      input_ids = input_ids + [0] * padding
      segment_ids = segment_ids + [0] * padding

      start_position = end_position = None
      if is_training and not example.is_impossible:
        doc_start = doc_span.start
        doc_end = doc_span.start + doc_span.length - 1
        if tok_start_position >= doc_start and tok_end_position <= doc_end:
          doc_offset = len(query_tokens) + 2
          start_position = tok_start_position - doc_start + doc_offset
          end_position = tok_end_position - doc_start + doc_offset
        else:
          start_position = end_position = 0
      if is_training and example.is_impossible:
        start_position = end_position = 0
      output_fn(InputFeatures(unique_id, example_index, doc_span_index, tokens,
                              token_to_orig_map, token_is_max_context, input_ids, input_mask,
                              segment_ids, start_position, end_position, example.is_impossible))
      unique_id += 1


def feature_spec(max_seq_length, is_training):
  """name -> (length, dtype) of the FeatureWriter's records, in file order."""
  spec = {"unique_ids": (1, tf.int64), **input_pipeline.encoder_features(max_seq_length)}
  if is_training:
    spec.update({"start_positions": (1, tf.int64), "end_positions": (1, tf.int64),
                 "is_impossible": (1, tf.int64)})
  return spec


def encode_feature(feature, is_training):
  """The original FeatureWriter's tf.train.Example for one feature (see `feature_spec`)."""
  values = {"unique_ids": [feature.unique_id], "input_ids": feature.input_ids,
            "input_mask": feature.input_mask, "segment_ids": feature.segment_ids}
  if is_training:
    values.update({"start_positions": [feature.start_position],
                   "end_positions": [feature.end_position],
                   "is_impossible": [1 if feature.is_impossible else 0]})
  return input_pipeline.encode_record(feature_spec(len(feature.input_ids), is_training), values)
