"""Script plumbing: absl entry point that turns UserInputError and preemption into clean exits,
the Beam scripts' import of the optional Apache Beam, and the flags the data scripts share (no
TensorFlow import here: the Beam launcher stays light).
"""

import fractions
import logging as std_logging
import sys

from absl import app, flags, logging

from bert_tf import tokenization
from bert_tf.errors import Preempted, UserInputError


def run(main, flags_parser=app.parse_flags_with_usage):
  """`app.run(main)`: a UserInputError is one message and exit 2; a preempted run
  (state saved) says so and exits 128 + the signal number, as if killed by it.
  `flags_parser` as app.run's (a script that passes unknown flags on replaces it)."""

  def guarded(argv):
    try:
      return main(argv)
    except UserInputError as e:
      logging.flush()
      print("error: %s" % e, file=sys.stderr)
      sys.exit(2)
    except Preempted as e:
      logging.flush()
      print("stopped: %s" % e, file=sys.stderr)
      sys.exit(e.exit_code)

  app.run(guarded, flags_parser=flags_parser)


def import_beam(script):
  """apache_beam, imported for `script`; without it (the optional extra bert_tf[beam]), one line
  saying how to install it and exit 2."""
  std_logging.disable(std_logging.WARNING)  # Beam's import warns about optional GCP clients
  try:
    import apache_beam
  except ImportError as e:
    print("error: %s needs Apache Beam (%s); install it with `pip install 'bert_tf[beam]'` (or "
          "`pip install -r requirements.txt` in this checkout)." % (script, e), file=sys.stderr)
    sys.exit(2)
  finally:
    std_logging.disable(std_logging.NOTSET)
  return apache_beam


def require_flags(flag_values, *names):
  """Like flags.mark_flag_as_required, but checked in main so --helpfull still works."""
  missing = [n for n in names if flag_values[n].value in (None, "")]
  if missing:
    raise UserInputError("missing required flag(s): %s" % ", ".join("--" + n for n in missing))


def define_tokenizer_flags(flag_values=flags.FLAGS):
  """The original's tokenizer flags (the runners' and the scripts' that tokenize text)."""
  flags.DEFINE_string("vocab_file", None,
                      "The vocabulary file that the BERT model was trained on.",
                      flag_values=flag_values)
  flags.DEFINE_bool("do_lower_case", True,
                    "Whether to lower case the input text. Should be True for uncased models and "
                    "False for cased models.", flag_values=flag_values)
  flags.DEFINE_bool("strip_accents", None, tokenization.STRIP_ACCENTS_HELP,
                    flag_values=flag_values)


def define_pretraining_data_flags(
    input_file_help="Input raw text file (or comma-separated list of files; globs allowed).",
    output_file_help="Output TF example file (or comma-separated list of files, written "
                     "round-robin).",
    random_seed_help="Random seed for data generation."):
  """Google's create_pretraining_data.py flags with its help; the Beam script takes them too,
  with its own help for the three it reads differently."""
  flags.DEFINE_string("input_file", None, input_file_help)
  flags.DEFINE_string("output_file", None, output_file_help)
  define_tokenizer_flags()
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


def check_pretraining_data_flags(flag_values):
  """The flags of define_pretraining_data_flags are given and in range."""
  require_flags(flag_values, "input_file", "output_file", "vocab_file")
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


def pretraining_data_tokenizer(flag_values):
  """The tokenizer of the tokenizer flags; its vocab must have the tokens pretraining writes."""
  tokenizer = tokenization.FullTokenizer(flag_values.vocab_file, flag_values.do_lower_case,
                                         flag_values.strip_accents)
  for special in ("[CLS]", "[SEP]", "[MASK]"):
    if special not in tokenizer.vocab:
      raise UserInputError("Vocab file %s has no %s token." % (flag_values.vocab_file, special))
  return tokenizer

