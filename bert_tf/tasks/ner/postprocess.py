"""Entity-level precision, recall and F1 exactly as CoNLL-2003's `conlleval` computes them,
and the prediction files it reads.

`conlleval` (the shared task's Perl script) walks the tokens once, deciding where
chunks start and end from each tag and the one before it; a chunk is correct when
gold and prediction start it at the same token, end it at the same token, and give it
the same type. Its rules accept IOB1, IOB2 and IOE tags alike, so one scorer serves
both schemes. Sentence breaks end every chunk. Precision is correct / predicted
chunks, recall correct / gold chunks, F1 their harmonic mean; this module reports
them as fractions (the script prints percentages).
"""

import collections

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf.tasks.ner.data import from_iob2, to_iob2

# The prediction file of each split a run tags, in --output_dir.
PREDICTION_FILES = {"eval": "eval_predictions.txt", "predict": "test_predictions.txt"}


def _split(tag):
  """"B-PER" -> ("B", "PER"); "O" -> ("O", ""). Like the script: split on "-", two parts."""
  parts = tag.split("-")
  return parts[0], parts[1] if len(parts) > 1 else ""


def _end_of_chunk(prev_tag, tag, prev_type, type_):
  return ((prev_tag, tag) in {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"),
                               ("E", "I"), ("E", "O")}
          or (prev_tag not in ("O", ".") and prev_type != type_)
          or prev_tag in ("]", "["))


def _start_of_chunk(prev_tag, tag, prev_type, type_):
  return ((prev_tag, tag) in {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"),
                               ("E", "I"), ("O", "E")}
          or (tag not in ("O", ".") and prev_type != type_)
          or tag in ("[", "]"))


Counts = collections.namedtuple("Counts", "correct found_gold found_predicted")


def chunk_counts(sentences):
  """{type: Counts} (and "" for the overall counts) over [(gold tags, predicted tags)]."""
  correct, gold_found, predicted_found = (collections.Counter() for _ in range(3))
  boundary = ("O", "")
  last_gold = last_pred = boundary
  in_correct = False
  for gold_tags, predicted_tags in sentences:
    # A sentence break is a token tagged O/O that ends every chunk (the script's "-X-" line).
    for gold, pred in list(zip(map(_split, gold_tags), map(_split, predicted_tags))) + [
        (boundary, boundary)]:
      if in_correct:
        gold_ends = _end_of_chunk(last_gold[0], gold[0], last_gold[1], gold[1])
        pred_ends = _end_of_chunk(last_pred[0], pred[0], last_pred[1], pred[1])
        if gold_ends and pred_ends and last_pred[1] == last_gold[1]:
          in_correct = False
          correct[last_gold[1]] += 1
        elif gold_ends != pred_ends or pred[1] != gold[1]:
          in_correct = False
      gold_starts = _start_of_chunk(last_gold[0], gold[0], last_gold[1], gold[1])
      pred_starts = _start_of_chunk(last_pred[0], pred[0], last_pred[1], pred[1])
      if gold_starts and pred_starts and pred[1] == gold[1]:
        in_correct = True
      if gold_starts:
        gold_found[gold[1]] += 1
      if pred_starts:
        predicted_found[pred[1]] += 1
      last_gold, last_pred = gold, pred
  if in_correct:
    correct[last_gold[1]] += 1
  types = sorted(set(gold_found) | set(predicted_found))
  out = {t: Counts(correct[t], gold_found[t], predicted_found[t]) for t in types}
  out[""] = Counts(sum(correct.values()), sum(gold_found.values()),
                   sum(predicted_found.values()))
  return out


def _scores(counts):
  precision = counts.correct / counts.found_predicted if counts.found_predicted else 0.0
  recall = counts.correct / counts.found_gold if counts.found_gold else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return precision, recall, f1


def conlleval(sentences):
  """{"precision", "recall", "f1"} overall and "<TYPE>_precision" etc. per entity type.

  `sentences`: [(gold tags, predicted tags)], each a list of tags of one sentence.
  """
  result = {}
  for type_, counts in chunk_counts(sentences).items():
    prefix = type_ + "_" if type_ else ""
    result[prefix + "precision"], result[prefix + "recall"], result[prefix + "f1"] = (
        _scores(counts))
  return result


def write_conll(path, sentences):
  """`word gold predicted` per line, a blank line after each sentence: what conlleval reads.

  `sentences`: [(words, gold tags or None, predicted tags)]; a missing gold tag is "O".
  """
  with tf.io.gfile.GFile(path, "w") as f:
    for words, gold, predicted in sentences:
      gold = gold or ["O"] * len(words)
      for word, g, p in zip(words, gold, predicted):
        f.write("%s %s %s\n" % (word, g, p))
      f.write("\n")


def sentence_predictions(documents, word_scores, labels, scheme):
  """[(words, gold tags or None, predicted tags)] per sentence of `documents`, the predicted
  tag of each word the arg-max of its row of `word_scores` ({doc_index: [rows]}), as IOB2
  `labels` converted to `scheme` (the file's, so conlleval reads gold and predictions alike;
  conlleval scores a chunk opened by I-X the same either way)."""
  out = []
  for doc_index, document in enumerate(documents):
    rows, start = word_scores[doc_index], 0
    for sentence in document.sentences:
      predicted = [labels[int(np.argmax(row))] for row in rows[start:start + len(sentence.words)]]
      start += len(sentence.words)
      # to_iob2 first: an I-X the model starts a chunk with becomes B-X (valid IOB2).
      out.append((sentence.words, sentence.tags, from_iob2(to_iob2(predicted), scheme)))
  return out


def scores_of(sentences):
  """conlleval's scores of [(words, gold, predicted)] sentences that have gold tags (None when
  none has)."""
  tagged = [(gold, predicted) for _, gold, predicted in sentences if gold is not None]
  return conlleval(tagged) if tagged else None


def per_document(word_rows, documents):
  """{doc_index: rows} of `word_rows` ([words of all documents, ...], in order)."""
  out, start = {}, 0
  for index, document in enumerate(documents):
    out[index] = word_rows[start:start + len(document.words)]
    start += len(document.words)
  return out


def write_predictions(path, documents, word_scores, labels, scheme, result=None):
  """Writes the prediction file of `documents` (their sentence_predictions); with `result` (an
  evaluation's metrics), returns it with conlleval's scores added."""
  sentences = sentence_predictions(documents, word_scores, labels, scheme)
  write_conll(path, sentences)
  logging.info("Wrote %d sentences to %s", len(sentences), path)
  scores = scores_of(sentences)
  if result is None:
    if scores:
      logging.info("  test f1 = %.4f (precision %.4f, recall %.4f)", scores["f1"],
                   scores["precision"], scores["recall"])
    return None
  return {**result, **(scores or {})}
