"""The up-front checks the runners, extract_features and the exports share, each written once.

Each raises UserInputError naming the flag or file and the fix, so a wrong value stops
a command before it reads data, trains or writes anything. They need only a config,
a vocab and flag values (the checkpoint check, which opens files, is the runner's).
"""

from bert_tf import tokenization
from bert_tf.errors import UserInputError


def check_positive(flag, value):
  """An integer flag that counts something (a batch, steps, a stride) is at least 1."""
  if value < 1:
    raise UserInputError("--%s must be a positive integer, got %d." % (flag, value))


def check_seq_length(value, config, min_length, flag="--max_seq_length"):
  """A sequence length the task's packing can use and the model's position table holds.

  `config` None checks the lower bound only (a preprocessor exported without a model).
  """
  if config is None:
    if isinstance(value, bool) or not isinstance(value, int) or value < min_length:
      raise UserInputError("%s=%r must be an integer of at least %d." % (flag, value, min_length))
    return
  limit = config.max_position_embeddings
  if isinstance(value, bool) or not isinstance(value, int) or not min_length <= value <= limit:
    raise UserInputError("%s=%r must be between %d and max_position_embeddings=%d of %s." %
                         (flag, value, min_length, limit, config.source_file or "the BERT config"))


def check_vocab(vocab, config, vocab_file, config_file=None):
  """Every id of `vocab` (token -> id) has a row in the model's embedding table.

  `config_file` names the config in the message (default: the file it was read from).
  """
  size = max(vocab.values()) + 1
  if size > config.vocab_size:
    raise UserInputError("Vocab file %s has %d tokens but vocab_size=%d in %s; use the vocab "
                         "file that belongs to the checkpoint." %
                         (vocab_file, size, config.vocab_size,
                          config_file or config.source_file or "the BERT config"))


def check_case(do_lower_case, init_checkpoint):
  """--do_lower_case agrees with the casing of a Google release named in --init_checkpoint."""
  try:
    tokenization.validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
  except ValueError as e:
    raise UserInputError(str(e)) from None


def checked_tokenizer(vocab_file, do_lower_case, strip_accents, config):
  """The FullTokenizer of `vocab_file`, checked against the model's vocab_size."""
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case, strip_accents=strip_accents)
  check_vocab(tokenizer.vocab, config, vocab_file)
  return tokenizer
