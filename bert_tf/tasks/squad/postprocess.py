"""run_squad's predictions: the n-best spans per question and the JSON files, as
write_predictions.

Behaviours of the original kept on purpose: spans are ranked with Python's stable
sort (ties keep insertion order), v2 uses the minimum null score over windows,
predictions are mapped back through get_final_text (which can cut inside a word),
v1 falls back to "empty", and JSON is written with indent=4 and a trailing newline.

One deliberate difference: in v2 mode the original crashes (AttributeError) when
an example has no valid non-null span; here that example gets the null answer "",
its null_odds entry is NO_SPAN_SCORE_DIFF, and a warning is logged.
"""

import collections
import json
import math

from absl import logging
import tensorflow as tf

from bert_tf import tokenization

# The null-odds value written when no non-null span exists (the original crashes).
NO_SPAN_SCORE_DIFF = 1000000.0

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])


def get_best_indexes(logits, n_best_size):
  """Indexes of the n best logits; ties keep index order (Python's stable sort)."""
  ranked = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)
  return [index for index, _ in ranked[:n_best_size]]


def compute_softmax(scores):
  if not scores:
    return []
  max_score = max(scores)
  exp_scores = [math.exp(score - max_score) for score in scores]
  total = sum(exp_scores)
  return [score / total for score in exp_scores]


def get_final_text(pred_text, orig_text, do_lower_case, verbose_logging=False,
                   strip_accents=None):
  """Projects the normalized predicted text back onto the original words' characters."""

  def strip_spaces(text):
    ns_chars, ns_to_s_map = [], collections.OrderedDict()
    for i, c in enumerate(text):
      if c == " ":
        continue
      ns_to_s_map[len(ns_chars)] = i
      ns_chars.append(c)
    return "".join(ns_chars), ns_to_s_map

  tokenizer = tokenization.BasicTokenizer(do_lower_case=do_lower_case,
                                          strip_accents=strip_accents)
  tok_text = " ".join(tokenizer.tokenize(orig_text))
  start_position = tok_text.find(pred_text)
  if start_position == -1:
    if verbose_logging:
      logging.info("Unable to find text: '%s' in '%s'", pred_text, orig_text)
    return orig_text
  end_position = start_position + len(pred_text) - 1
  orig_ns_text, orig_ns_to_s_map = strip_spaces(orig_text)
  tok_ns_text, tok_ns_to_s_map = strip_spaces(tok_text)
  if len(orig_ns_text) != len(tok_ns_text):
    if verbose_logging:
      logging.info("Length not equal after stripping spaces: '%s' vs '%s'", orig_ns_text,
                   tok_ns_text)
    return orig_text
  tok_s_to_ns_map = {tok_index: i for i, tok_index in tok_ns_to_s_map.items()}
  orig_start_position = orig_ns_to_s_map.get(tok_s_to_ns_map.get(start_position, -1))
  if start_position not in tok_s_to_ns_map or orig_start_position is None:
    if verbose_logging:
      logging.info("Couldn't map start position")
    return orig_text
  orig_end_position = orig_ns_to_s_map.get(tok_s_to_ns_map.get(end_position, -1))
  if end_position not in tok_s_to_ns_map or orig_end_position is None:
    if verbose_logging:
      logging.info("Couldn't map end position")
    return orig_text
  return orig_text[orig_start_position:orig_end_position + 1]


_Prelim = collections.namedtuple(
    "PrelimPrediction", ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])
_Nbest = collections.namedtuple("NbestPrediction", ["text", "start_logit", "end_logit"])


def compute_predictions(all_examples, all_features, all_results, n_best_size, max_answer_length,
                        do_lower_case, version_2_with_negative=False,
                        null_score_diff_threshold=0.0, verbose_logging=False,
                        strip_accents=None):
  """(predictions, nbest, null_odds) OrderedDicts keyed by qas_id, as write_predictions."""
  example_index_to_features = collections.defaultdict(list)
  for feature in all_features:
    example_index_to_features[feature.example_index].append(feature)
  unique_id_to_result = {result.unique_id: result for result in all_results}
  all_predictions = collections.OrderedDict()
  all_nbest_json = collections.OrderedDict()
  scores_diff_json = collections.OrderedDict()
  no_span_examples = []

  for example_index, example in enumerate(all_examples):
    features = example_index_to_features[example_index]
    prelim = []
    score_null = 1000000  # large and positive
    min_null_feature_index = 0
    null_start_logit = null_end_logit = 0
    for feature_index, feature in enumerate(features):
      result = unique_id_to_result[feature.unique_id]
      start_indexes = get_best_indexes(result.start_logits, n_best_size)
      end_indexes = get_best_indexes(result.end_logits, n_best_size)
      if version_2_with_negative:
        feature_null_score = result.start_logits[0] + result.end_logits[0]
        if feature_null_score < score_null:
          score_null = feature_null_score
          min_null_feature_index = feature_index
          null_start_logit, null_end_logit = result.start_logits[0], result.end_logits[0]
      for start_index in start_indexes:
        for end_index in end_indexes:
          # Padding positions are filtered only by len(tokens), as in the original.
          if start_index >= len(feature.tokens) or end_index >= len(feature.tokens):
            continue
          if start_index not in feature.token_to_orig_map:
            continue
          if end_index not in feature.token_to_orig_map:
            continue
          if not feature.token_is_max_context.get(start_index, False):
            continue
          if end_index < start_index or end_index - start_index + 1 > max_answer_length:
            continue
          prelim.append(_Prelim(feature_index, start_index, end_index,
                                result.start_logits[start_index], result.end_logits[end_index]))
    if version_2_with_negative:
      prelim.append(_Prelim(min_null_feature_index, 0, 0, null_start_logit, null_end_logit))
    prelim = sorted(prelim, key=lambda x: x.start_logit + x.end_logit, reverse=True)

    seen, nbest = set(), []
    for pred in prelim:
      if len(nbest) >= n_best_size:
        break
      feature = features[pred.feature_index]
      if pred.start_index > 0:
        tok_tokens = feature.tokens[pred.start_index:pred.end_index + 1]
        orig_doc_start = feature.token_to_orig_map[pred.start_index]
        orig_doc_end = feature.token_to_orig_map[pred.end_index]
        orig_tokens = example.doc_tokens[orig_doc_start:orig_doc_end + 1]
        tok_text = " ".join(tok_tokens).replace(" ##", "").replace("##", "").strip()
        tok_text = " ".join(tok_text.split())
        final_text = get_final_text(tok_text, " ".join(orig_tokens), do_lower_case,
                                    verbose_logging, strip_accents)
        if final_text in seen:
          continue
        seen.add(final_text)
      else:
        final_text = ""
        seen.add(final_text)
      nbest.append(_Nbest(final_text, pred.start_logit, pred.end_logit))
    if version_2_with_negative and "" not in seen:
      nbest.append(_Nbest("", null_start_logit, null_end_logit))
    if not nbest:
      nbest.append(_Nbest("empty", 0.0, 0.0))

    total_scores = [entry.start_logit + entry.end_logit for entry in nbest]
    best_non_null_entry = next((entry for entry in nbest if entry.text), None)
    probs = compute_softmax(total_scores)
    nbest_json = []
    for i, entry in enumerate(nbest):
      nbest_json.append(collections.OrderedDict([
          ("text", entry.text), ("probability", probs[i]), ("start_logit", entry.start_logit),
          ("end_logit", entry.end_logit)]))
    if not version_2_with_negative:
      all_predictions[example.qas_id] = nbest_json[0]["text"]
    elif best_non_null_entry is None:
      no_span_examples.append(example.qas_id)
      scores_diff_json[example.qas_id] = NO_SPAN_SCORE_DIFF
      all_predictions[example.qas_id] = ""
    else:
      score_diff = score_null - best_non_null_entry.start_logit - best_non_null_entry.end_logit
      scores_diff_json[example.qas_id] = score_diff
      all_predictions[example.qas_id] = ("" if score_diff > null_score_diff_threshold
                                         else best_non_null_entry.text)
    all_nbest_json[example.qas_id] = nbest_json
  if no_span_examples:
    logging.warning("%d question(s) had no valid non-null answer span (the original crashes "
                    "here); they get the null answer: %s", len(no_span_examples),
                    ", ".join(no_span_examples[:20]))
  return all_predictions, all_nbest_json, scores_diff_json


def write_json(path, value):
  """The original's JSON output: indent=4 and a trailing newline."""
  with tf.io.gfile.GFile(path, "w") as writer:
    writer.write(json.dumps(value, indent=4) + "\n")


def write_predictions(all_examples, all_features, all_results, n_best_size, max_answer_length,
                      do_lower_case, output_prediction_file, output_nbest_file,
                      output_null_log_odds_file, version_2_with_negative=False,
                      null_score_diff_threshold=0.0, verbose_logging=False, strip_accents=None):
  """Writes predictions.json, nbest_predictions.json and (v2) null_odds.json."""
  predictions, nbest, null_odds = compute_predictions(
      all_examples, all_features, all_results, n_best_size, max_answer_length, do_lower_case,
      version_2_with_negative, null_score_diff_threshold, verbose_logging, strip_accents)
  write_json(output_prediction_file, predictions)
  write_json(output_nbest_file, nbest)
  if version_2_with_negative:
    write_json(output_null_log_odds_file, null_odds)
  return predictions, nbest, null_odds
