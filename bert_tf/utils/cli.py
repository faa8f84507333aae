"""Script plumbing: absl entry point that turns UserInputError and preemption into clean exits,
the Beam scripts' import of the optional Apache Beam, required flags and the tokenizer's flags
(no TensorFlow import here: the Beam launcher stays light).
"""

import logging as std_logging
import sys

from absl import app, flags, logging

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


# Help of the runners' --strip_accents flag (default None: the original's rule).
STRIP_ACCENTS_HELP = (
    "Whether to strip accents (marks) from the text. Default: the original's behaviour, "
    "strip exactly when lower-casing. --strip_accents=false keeps accents while lower-casing "
    "(e.g. Korean Hangul syllables stay whole); --strip_accents=true strips them even with "
    "--do_lower_case=false. Must match how the model was trained.")


def define_tokenizer_flags(flag_values=flags.FLAGS):
  """The original's tokenizer flags (the runners' and the scripts' that tokenize text)."""
  flags.DEFINE_string("vocab_file", None,
                      "The vocabulary file that the BERT model was trained on.",
                      flag_values=flag_values)
  flags.DEFINE_bool("do_lower_case", True,
                    "Whether to lower case the input text. Should be True for uncased models and "
                    "False for cased models.", flag_values=flag_values)
  flags.DEFINE_bool("strip_accents", None, STRIP_ACCENTS_HELP,
                    flag_values=flag_values)
