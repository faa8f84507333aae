"""create_pretraining_data's flags, shared by its Beam twin (the Beam script gives three of them
its own help), their checks, and the tokenizer they make. No TensorFlow import here: the Beam
launcher stays light."""

import fractions

from absl import flags

from bert_tf import tokenization
from bert_tf.errors import UserInputError
from bert_tf.utils import cli


def define(
    input_file_help="Input raw text file (or comma-separated list of files; globs allowed).",
    output_file_help="Output TF example file (or comma-separated list of files, written "
                     "round-robin).",
    random_seed_help="Random seed for data generation."):
  """Google's create_pretraining_data.py flags with its help; the Beam script takes them too,
  with its own help for the three it reads differently."""
  flags.DEFINE_string("input_file", None, input_file_help)
  flags.DEFINE_string("output_file", None, output_file_help)
  cli.define_tokenizer_flags()
  flags.DEFINE_bool("do_whole_word_mask", False,
                    "Whether to use whole word masking rather than per-WordPiece masking.")
  flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
  flags.DEFINE_integer("max_predictions_per_seq", 20,
                       "Maximum number of masked LM predictions per sequence.")
  flags.DEFINE_integer("random_seed", 12345, random_seed_help)
  flags.DEFINE_integer("dupe_factor", 10,
                       "Number of times to duplicate the input data (with different masks).")
  flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
  flags.DEFINE_float("short_seq_prob", 0.1,
                     "Probability of creating sequences which are shorter than the maximum "
                     "length.")
  flags.DEFINE_float("mask_token_prob", 0.8,
                     "Of the tokens chosen for prediction (--masked_lm_prob), the share replaced "
                     "by [MASK]. Default 0.8, as in the paper; appendix C.2 (Table 8) compares "
                     "other shares.")
  flags.DEFINE_float("random_token_prob", 0.1,
                     "Of the tokens chosen for prediction, the share replaced by a random word "
                     "of the vocab (default 0.1, as in the paper). The rest, 1 - "
                     "--mask_token_prob - --random_token_prob, keep their token. The defaults "
                     "write exactly the original's records.")


def check(flag_values):
  """The flags of `define` are given and in range."""
  cli.require_flags(flag_values, "input_file", "output_file", "vocab_file")
  if flag_values.max_seq_length < 5:
    raise UserInputError("--max_seq_length must be at least 5 ([CLS] a [SEP] b [SEP]).")
  if flag_values.max_predictions_per_seq < 1:
    raise UserInputError("--max_predictions_per_seq must be positive.")
  if flag_values.dupe_factor < 1:
    raise UserInputError("--dupe_factor must be positive.")
  if not 0 <= flag_values.masked_lm_prob <= 1 or not 0 <= flag_values.short_seq_prob <= 1:
    raise UserInputError("--masked_lm_prob and --short_seq_prob must be in [0, 1].")
  mask, random_word = flag_values.mask_token_prob, flag_values.random_token_prob
  # The sum as decimals, so that e.g. 0.7 and 0.3 give exactly 1.
  if not (0 <= mask <= 1 and 0 <= random_word <= 1) or (
      fractions.Fraction(repr(mask)) + fractions.Fraction(repr(random_word)) > 1):
    raise UserInputError(
        "--mask_token_prob=%s and --random_token_prob=%s must each be in [0, 1] and sum to at "
        "most 1 (the rest of the predicted tokens keep their token)." % (mask, random_word))


def tokenizer(flag_values):
  """The tokenizer of the tokenizer flags; its vocab must have the tokens pretraining writes."""
  tokenizer = tokenization.FullTokenizer(flag_values.vocab_file, flag_values.do_lower_case,
                                         flag_values.strip_accents)
  for special in ("[CLS]", "[SEP]", "[MASK]"):
    if special not in tokenizer.vocab:
      raise UserInputError("Vocab file %s has no %s token." % (flag_values.vocab_file, special))
  return tokenizer

