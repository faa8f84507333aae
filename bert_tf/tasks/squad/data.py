"""SQuAD v1.1 / v2.0: examples, features and predictions exactly as run_squad.py.

Behaviours of the original kept on purpose:
* contexts are split into words on " \\t\\r\\n" and U+202F only (not NBSP or other
  spaces); a training answer is dropped (with a warning) only when the cleaned
  answer text is not a substring of its words ("Could not find answer");
* question pieces are cut at max_query_length; windows advance by doc_stride;
  a token belongs to the window where min(left, right) + 0.01 * length is best;
  unique ids start at 1000000000; `_improve_answer_span` tightens answers such as
  "(1895-1943)." to "1895"; out-of-window answers and impossible questions train
  on start = end = 0 ([CLS]);
* write_predictions ranks with Python's stable sort (ties keep insertion order),
  uses the minimum null score over windows, maps predictions back through
  get_final_text (which can cut inside a word), falls back to "empty" in v1 and
  writes JSON with indent=4 and a trailing newline.

One deliberate difference: in v2 mode the original crashes (AttributeError) when
an example has no valid non-null span; here that example gets the null answer "",
its null_odds entry is NO_SPAN_SCORE_DIFF, and a warning is logged.
"""

import collections
import dataclasses
import json
import math

from absl import logging
from keras import ops

from bert_tf import example_codec, heads, tokenization, user_files
from bert_tf.errors import UserInputError
from bert_tf.tasks import base

FIRST_UNIQUE_ID = 1000000000
# The null-odds value written when no non-null span exists (the original crashes).
NO_SPAN_SCORE_DIFF = 1000000.0


@dataclasses.dataclass
class SquadExample:
  qas_id: str
  question_text: str
  doc_tokens: list
  orig_answer_text: str = None
  start_position: int = None
  end_position: int = None
  is_impossible: bool = False


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


RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])


# run_squad's `is_whitespace`: the only characters that split a context into words.
WHITESPACE_CODE_POINTS = (0x20, 0x09, 0x0D, 0x0A, 0x202F)


def _is_whitespace(c):
  return ord(c) in WHITESPACE_CODE_POINTS


def split_context(paragraph_text):
  """(words, char_to_word_offset) with the original's whitespace rule."""
  doc_tokens = []
  char_to_word_offset = []
  prev_is_whitespace = True
  for c in paragraph_text:
    if _is_whitespace(c):
      prev_is_whitespace = True
    else:
      if prev_is_whitespace:
        doc_tokens.append(c)
      else:
        doc_tokens[-1] += c
      prev_is_whitespace = False
    char_to_word_offset.append(len(doc_tokens) - 1)
  return doc_tokens, char_to_word_offset


def load_squad_json(input_file):
  """The `data` list of a SQuAD file; errors name the file."""
  text = user_files.read_text(input_file, "SQuAD file")
  try:
    data = json.loads(text)
  except json.JSONDecodeError as e:
    raise UserInputError("SQuAD file %s is not valid JSON: %s." % (input_file, e)) from None
  if not isinstance(data, dict) or not isinstance(data.get("data"), list):
    raise UserInputError("SQuAD file %s has no top-level \"data\" list." % input_file)
  return data["data"]


def read_squad_examples(input_file, is_training, version_2_with_negative=False):
  """SquadExamples of a SQuAD file, with the original's training checks and skips."""
  examples = []
  skipped = paragraphs_without_questions = 0
  for entry in load_squad_json(input_file):
    for paragraph in entry.get("paragraphs", []):
      try:
        doc_tokens, char_to_word_offset = split_context(paragraph["context"])
        questions = paragraph["qas"]
      except (KeyError, TypeError):
        raise UserInputError("%s: a paragraph lacks \"context\" or \"qas\"." % input_file) from None
      if not questions:
        paragraphs_without_questions += 1
      for qa in questions:
        example = _read_question(input_file, qa, doc_tokens, char_to_word_offset, is_training,
                                 version_2_with_negative)
        if example is None:
          skipped += 1
        else:
          examples.append(example)
  if skipped:
    logging.warning("%s: skipped %d question(s) whose answer text was not found at its "
                    "offset (as the original does).", input_file, skipped)
  if paragraphs_without_questions:
    logging.warning("%s: %d paragraph(s) have no questions.", input_file,
                    paragraphs_without_questions)
  if not examples:
    raise UserInputError("SQuAD file %s contains no usable questions." % input_file)
  return examples


def _read_question(input_file, qa, doc_tokens, char_to_word_offset, is_training,
                   version_2_with_negative):
  try:
    qas_id, question_text = qa["id"], qa["question"]
  except KeyError:
    raise UserInputError("%s: a question lacks \"id\" or \"question\"." % input_file) from None
  if not is_training:
    return SquadExample(qas_id, question_text, doc_tokens)
  is_impossible = bool(qa.get("is_impossible", False)) if version_2_with_negative else False
  if version_2_with_negative and "is_impossible" not in qa:
    raise UserInputError("%s: question %s has no \"is_impossible\" (needed with "
                         "--version_2_with_negative)." % (input_file, qas_id))
  answers = qa.get("answers", [])
  if len(answers) != 1 and not is_impossible:
    hint = ("a training file has one answer per question (dev files list several)"
            if version_2_with_negative else
            "a SQuAD 2.0 file needs --version_2_with_negative")
    raise UserInputError("For training, each question should have exactly 1 answer "
                         "(%s: question %s has %d; %s)." % (input_file, qas_id, len(answers), hint))
  if is_impossible:
    return SquadExample(qas_id, question_text, doc_tokens, "", -1, -1, True)
  answer = answers[0]
  orig_answer_text, answer_offset = answer["text"], answer["answer_start"]
  end_offset = answer_offset + len(orig_answer_text) - 1
  if not (0 <= answer_offset < len(char_to_word_offset) and
          0 <= end_offset < len(char_to_word_offset)):
    raise UserInputError("%s: question %s has answer_start %d outside its context of %d "
                         "characters." % (input_file, qas_id, answer_offset,
                                          len(char_to_word_offset)))
  start_position = char_to_word_offset[answer_offset]
  end_position = char_to_word_offset[end_offset]
  actual_text = " ".join(doc_tokens[start_position:end_position + 1])
  cleaned_answer_text = " ".join(tokenization.whitespace_tokenize(orig_answer_text))
  if actual_text.find(cleaned_answer_text) == -1:
    logging.warning("Could not find answer: '%s' vs. '%s'", actual_text, cleaned_answer_text)
    return None
  return SquadExample(qas_id, question_text, doc_tokens, orig_answer_text, start_position,
                      end_position, False)


DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def doc_spans_for(num_tokens, max_tokens_for_doc, doc_stride):
  """The sliding windows over the context pieces."""
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


def encode_feature(feature, is_training):
  """The original FeatureWriter's tf.train.Example for one feature."""
  int64 = example_codec.int64_feature
  entries = [("unique_ids", int64([feature.unique_id])),
             ("input_ids", int64(feature.input_ids)),
             ("input_mask", int64(feature.input_mask)),
             ("segment_ids", int64(feature.segment_ids))]
  if is_training:
    entries += [("start_positions", int64([feature.start_position])),
                ("end_positions", int64([feature.end_position])),
                ("is_impossible", int64([1 if feature.is_impossible else 0]))]
  return example_codec.encode_example(entries)


def feature_spec(max_seq_length, is_training):
  import tensorflow as tf
  spec = {"unique_ids": (1, tf.int64), "input_ids": (max_seq_length, tf.int64),
          "input_mask": (max_seq_length, tf.int64), "segment_ids": (max_seq_length, tf.int64)}
  if is_training:
    spec.update({"start_positions": (1, tf.int64), "end_positions": (1, tf.int64),
                 "is_impossible": (1, tf.int64)})
  return spec


# ------------------------------------------------------------------ predictions

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
  import tensorflow as tf
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


# ------------------------------------------------------------------ model and task

class SquadModel(base.TaskModel):
  """BertModel plus run_squad's span head.

  Always full length: the original's loss is a softmax over all max_seq_length
  positions and write_predictions ranks padding positions in its n-best lists
  too, so cutting the padding could move both.
  """

  length_invariant = False

  def create_heads(self):
    self.span = heads.SpanHead(self.config, name="squad", dtype=self.dtype_policy)
    return [self.span]

  def call(self, features, training=False):
    """-> {"start_logits", "end_logits"}: [B, S] float32 each."""
    start, end = self.span(self.encode(features, training)["sequence_output"])
    return {"start_logits": start, "end_logits": end}


class SquadTask(base.Task):
  """(start loss + end loss) / 2, each a mean over the batch, as run_squad's model_fn."""

  model_class = SquadModel
  loss_epsilons = {"span": 0.0}

  def loss_weights(self, features):
    return {"span": base.batch_weights(features)}

  def per_example_losses(self, outputs, features):
    _, start_loss = heads.mean_cross_entropy(ops.log_softmax(outputs["start_logits"], axis=-1),
                                             features["start_positions"])
    _, end_loss = heads.mean_cross_entropy(ops.log_softmax(outputs["end_logits"], axis=-1),
                                           features["end_positions"])
    return {"span": (start_loss + end_loss) / 2.0}

  def predictions(self, outputs, features):
    return {"unique_ids": ops.reshape(features["unique_ids"], (-1,)),
            "start_logits": outputs["start_logits"], "end_logits": outputs["end_logits"]}
