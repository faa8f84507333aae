"""SQuAD v1.1 / v2.0 files -> SquadExamples, exactly as run_squad.py reads them.

Behaviours of the original kept on purpose: contexts are split into words on
" \\t\\r\\n" and U+202F only (not NBSP or other spaces); a training answer is
dropped (with a warning) only when the cleaned answer text is not a substring of
its words ("Could not find answer").
"""

import dataclasses
import json

from absl import logging

from bert_tf import tokenization
from bert_tf.errors import UserInputError
from bert_tf.utils import user_files


@dataclasses.dataclass
class SquadExample:
  qas_id: str
  question_text: str
  doc_tokens: list
  orig_answer_text: str = None
  start_position: int = None
  end_position: int = None
  is_impossible: bool = False


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
  seen_ids = set()
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
        qas_id = qa.get("id") if isinstance(qa, dict) else None
        if qas_id in seen_ids:
          # Predictions (predictions.json, the exports' answers) are keyed by question id:
          # a second question with the same id would silently replace the first's answer.
          raise UserInputError("%s: question id %r appears more than once; predictions are "
                               "keyed by id, so one answer would be lost. Give every question "
                               "its own id." % (input_file, qas_id))
        seen_ids.add(qas_id)
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
