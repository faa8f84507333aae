"""CoNLL documents -> windowed token-classification features, and their record layout.

The paper (section 5.3) labels each word through its first WordPiece ("we use the
representation of the first sub-token as the input to the token-level classifier")
and includes "the maximal document context provided by the data": each document's
pieces are cut into windows of max_seq_length - 2 pieces, doc_stride apart (run_squad's
windows), `[CLS] window [SEP]`, and a word's prediction comes from the window that
gives its first piece the most context (run_squad's rule). Training sees every
window's first pieces.

Records: the three encoder features, `label_ids` (the word's IOB2 label at its first
piece, 0 elsewhere) and `label_weights` (1.0 at first pieces, 0.0 elsewhere).
"""

import dataclasses

import tensorflow as tf

from bert_tf.data import input_pipeline, packing


@dataclasses.dataclass
class NerFeature:
  """One window of one document; `word_at[p]` is the document word whose first piece sits at
  position p (-1 elsewhere), `is_max_context[p]` whether this window predicts that word."""
  doc_index: int
  window_index: int
  input_ids: list
  input_mask: list
  segment_ids: list
  label_ids: list
  label_weights: list
  word_at: list
  is_max_context: list


def word_pieces(words, tokenizer):
  """(pieces of the words in order, index of each word's first piece). A word the tokenizer
  drops whole (control characters only) becomes [UNK], so every word gets a prediction."""
  pieces, first = [], []
  for word in words:
    first.append(len(pieces))
    pieces.extend(tokenizer.tokenize(word) or ["[UNK]"])
  return pieces, first


def convert_document(doc_index, words, labels, tokenizer, max_seq_length, doc_stride):
  """[NerFeature] of one document: `labels` are label ids per word (None: unknown, 0)."""
  pieces, first = word_pieces(words, tokenizer)
  word_of_piece = {position: index for index, position in enumerate(first)}
  spans = packing.doc_spans_for(len(pieces), max_seq_length - 2, doc_stride)
  features = []
  for window_index, span in enumerate(spans):
    tokens, label_ids, weights, word_at, max_context = ["[CLS]"], [0], [0.0], [-1], [False]
    for piece in range(span.start, span.start + span.length):
      tokens.append(pieces[piece])
      word = word_of_piece.get(piece, -1)
      word_at.append(word)
      weights.append(1.0 if word >= 0 else 0.0)
      label_ids.append(labels[word] if word >= 0 and labels is not None else 0)
      max_context.append(word >= 0 and packing.check_is_max_context(spans, window_index, piece))
    tokens.append("[SEP]")
    padding = max_seq_length - len(tokens)
    input_ids = tokenizer.convert_tokens_to_ids(tokens) + [0] * padding
    features.append(NerFeature(
        doc_index, window_index, input_ids, [1] * len(tokens) + [0] * padding,
        [0] * max_seq_length, label_ids + [0] * (padding + 1),
        weights + [0.0] * (padding + 1), word_at + [-1] * (padding + 1),
        max_context + [False] * (padding + 1)))
  return features


def feature_spec(max_seq_length):
  """name -> (length, dtype) of the cached features, in file order."""
  return {**input_pipeline.encoder_features(max_seq_length),
          "label_ids": (max_seq_length, tf.int64),
          "label_weights": (max_seq_length, tf.float32)}


def encode_feature(feature):
  """Serialized tf.train.Example of one NerFeature, in the layout of `feature_spec`."""
  return input_pipeline.encode_record(feature_spec(len(feature.input_ids)), {
      "input_ids": feature.input_ids, "input_mask": feature.input_mask,
      "segment_ids": feature.segment_ids, "label_ids": feature.label_ids,
      "label_weights": feature.label_weights})


def document_windows(documents, label_ids, tokenizer, max_seq_length, doc_stride):
  """The NerFeatures of every document in turn (`label_ids(document)`: its words' ids)."""
  return [window for index, document in enumerate(documents)
          for window in convert_document(index, document.words, label_ids(document), tokenizer,
                                         max_seq_length, doc_stride)]


def word_predictions(features, scores, num_words):
  """Per document, each word's row of `scores` ([features, seq, ...]) from its max-context
  window: {doc_index: [num_words[doc] rows]}."""
  out = {doc: [None] * count for doc, count in num_words.items()}
  for feature, rows in zip(features, scores):
    for position, word in enumerate(feature.word_at):
      if word >= 0 and feature.is_max_context[position]:
        out[feature.doc_index][word] = rows[position]
  return out
