"""The official SQuAD v1.1 and v2.0 evaluation metrics.

Same normalization (lower-case, drop punctuation and the articles a/an/the, fold
whitespace), exact match and token F1 as the official evaluate-v1.1.py and
evaluate-v2.0.py scripts, including v2.0's HasAns/NoAns splits, its
`na_prob_thresh` (default 1.0) applied to the null-odds file, and the search for
the best threshold (`best_f1_thresh` is the value to pass back as
--null_score_diff_threshold).
"""

import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text):
  text = text.lower()
  text = "".join(ch for ch in text if ch not in _PUNCTUATION)
  text = _ARTICLES.sub(" ", text)
  return " ".join(text.split())


def exact_match(prediction, ground_truth):
  return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_v1(prediction, ground_truth):
  """v1.1: token F1; 0 when nothing is shared."""
  prediction_tokens = normalize_answer(prediction).split()
  truth_tokens = normalize_answer(ground_truth).split()
  common = collections.Counter(prediction_tokens) & collections.Counter(truth_tokens)
  num_same = sum(common.values())
  if num_same == 0:
    return 0.0
  precision = num_same / len(prediction_tokens)
  recall = num_same / len(truth_tokens)
  return 2 * precision * recall / (precision + recall)


def f1_v2(prediction, ground_truth):
  """v2.0: like v1.1, but an empty answer against an empty answer scores 1."""
  prediction_tokens = normalize_answer(prediction).split()
  truth_tokens = normalize_answer(ground_truth).split()
  if not prediction_tokens or not truth_tokens:
    return float(prediction_tokens == truth_tokens)
  return f1_v1(prediction, ground_truth)


def _questions(dataset):
  for article in dataset:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        yield qa


def evaluate_v1(dataset, predictions):
  """{"exact_match", "f1"} in percent over the questions that have answers.

  A question without predictions scores 0, as in evaluate-v1.1.py. Questions without any answer (a
  v2.0 file read in v1.1 mode) have nothing to score against; evaluate-v1.1.py crashes on them, here
  they are left out and counted in "skipped_without_answers" (present only when non-zero).
  """
  total = exact = f1 = 0.0
  skipped = 0
  for qa in _questions(dataset):
    truths = [answer["text"] for answer in qa.get("answers", [])]
    if not truths:
      skipped += 1
      continue
    total += 1
    if qa["id"] not in predictions:
      continue
    prediction = predictions[qa["id"]]
    exact += max(exact_match(prediction, t) for t in truths)
    f1 += max(f1_v1(prediction, t) for t in truths)
  if not total:
    raise ValueError("no question in the dataset has an answer to score against")
  result = {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}
  if skipped:
    result["skipped_without_answers"] = skipped
  return result


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
  """The evaluate-v2.0.py results dict (exact, f1, total, HasAns_*, NoAns_*, best_*)."""
  has_answer, exact_raw, f1_raw = {}, {}, {}
  for qa in _questions(dataset):
    qid = qa["id"]
    truths = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])]
    has_answer[qid] = bool(truths)
    if not truths:
      truths = [""]
    if qid not in predictions:
      continue
    exact_raw[qid] = max(exact_match(predictions[qid], t) for t in truths)
    f1_raw[qid] = max(f1_v2(predictions[qid], t) for t in truths)
  na_probs = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}
  exact = _apply_threshold(exact_raw, na_probs, has_answer, na_prob_thresh)
  f1 = _apply_threshold(f1_raw, na_probs, has_answer, na_prob_thresh)
  result = _summary(exact, f1, list(exact))  # the official totals count answered questions
  has_ids = [q for q, has in has_answer.items() if has]
  no_ids = [q for q, has in has_answer.items() if not has]
  if has_ids:
    result.update({"HasAns_" + k: v for k, v in _summary(exact, f1, has_ids).items()})
  if no_ids:
    result.update({"NoAns_" + k: v for k, v in _summary(exact, f1, no_ids).items()})
  best_exact, exact_thresh = _best_threshold(predictions, exact_raw, na_probs, has_answer)
  best_f1, f1_thresh = _best_threshold(predictions, f1_raw, na_probs, has_answer)
  result.update({"best_exact": best_exact, "best_exact_thresh": exact_thresh,
                 "best_f1": best_f1, "best_f1_thresh": f1_thresh})
  return result


def _apply_threshold(scores, na_probs, has_answer, threshold):
  new_scores = {}
  for qid, score in scores.items():
    predicted_no_answer = na_probs[qid] > threshold
    new_scores[qid] = float(not has_answer[qid]) if predicted_no_answer else score
  return new_scores


def _summary(exact, f1, qids):
  total = len(qids)
  return collections.OrderedDict([
      ("exact", 100.0 * sum(exact.get(q, 0.0) for q in qids) / total),
      ("f1", 100.0 * sum(f1.get(q, 0.0) for q in qids) / total),
      ("total", total)])


def _best_threshold(predictions, scores, na_probs, has_answer):
  """Sweeps the null-odds threshold over the observed values, as the official script."""
  num_no_answer = sum(1 for has in has_answer.values() if not has)
  current = best = num_no_answer
  best_threshold = 0.0
  for qid in sorted(na_probs, key=lambda k: na_probs[k]):
    if qid not in scores:
      continue
    if has_answer[qid]:
      diff = scores[qid]
    else:
      diff = -1 if predictions[qid] else 0
    current += diff
    if current > best:
      best, best_threshold = current, na_probs[qid]
  return 100.0 * best / len(scores), best_threshold
