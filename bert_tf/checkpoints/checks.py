"""The up-front checks the runners, extract_features and the exports share, each written once.

Each raises UserInputError naming the flag or file and the fix, so a wrong value stops
a command before it reads data, trains or writes anything. They need only a config,
a vocab, flag values and the small JSON files beside a checkpoint (the checkpoint check,
which reads its weights, is the runner's).
"""

import json
import os

from absl import logging
import tensorflow as tf

from bert_tf import tokenization
import bert_tf.checkpoints.hf_files as hf_files
import bert_tf.checkpoints.run_folder as run_folder
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


def check_causal_attention(init_checkpoint, config, config_file):
  """The run's causal_attention (`config`, from `config_file`) is the one `init_checkpoint`
  was trained with.

  A left-to-right checkpoint (run_pretraining --pretraining_objective=ltr, or a model
  fine-tuned from one) says so in the run folder it sits in: its training_state/settings.json
  (the config the weights were trained with) or the bert_config.json beside it. The weights
  carry no trace of the mask, so a config that disagrees would silently run them under
  another one. The paper fine-tunes its LTR model left-to-right ("removing it introduced a
  pre-train/fine-tune mismatch that degraded downstream performance", section 5.1, Table 5),
  so --bert_config_file disagreeing with the checkpoint is an error; a runner that changes the
  mask itself (run_pretraining's ltr objective from a bidirectional checkpoint) is warned.
  A checkpoint with neither file beside it is not checked; a Hugging Face folder is always
  bidirectional (bert_tf refuses HF decoders).
  """
  if not init_checkpoint:
    return
  found = _checkpoint_causality(init_checkpoint)
  if found is None or found[0] == config.causal_attention:
    return
  causal, evidence, beside_config = found
  if causal:
    trained = "is a left-to-right model (causal_attention: true in %s)" % evidence
  else:
    trained = "was trained bidirectionally (%s)" % evidence
  if _causal_in(config_file) not in (None, config.causal_attention):  # the runner changed it
    logging.warning("--init_checkpoint=%s %s; this run makes the encoder %s, so it starts from "
                    "weights trained without that mask.", init_checkpoint, trained,
                    "left-to-right" if config.causal_attention else "bidirectional")
    return
  if beside_config and _causal_in(beside_config) == causal:
    fix = "pass --bert_config_file=%s" % beside_config
  else:
    fix = 'set "causal_attention": %s in it' % json.dumps(causal)
  if causal:
    raise UserInputError(
        "--init_checkpoint=%s %s but --bert_config_file=%s has no causal_attention, so its "
        "weights would run bidirectionally; %s (the paper fine-tunes its LTR model "
        "left-to-right, Table 5)." % (init_checkpoint, trained, config_file, fix))
  raise UserInputError(
      "--init_checkpoint=%s %s but --bert_config_file=%s has causal_attention: true, so its "
      "weights would run under a left-to-right mask they never saw; %s, or start from a "
      "checkpoint pre-trained with --pretraining_objective=ltr." %
      (init_checkpoint, trained, config_file, fix))


def _checkpoint_causality(init_checkpoint):
  """(causal_attention, what says so, the bert_config.json beside or None) of a checkpoint,
  or None when nothing beside it says."""
  path = os.fspath(init_checkpoint)
  if hf_files.is_hf_folder(path):
    return False, "a Hugging Face BERT folder", None
  folder = run_folder.checkpoint_folder(path)
  beside = os.path.join(folder, run_folder.CONFIG_NAME)
  beside = beside if tf.io.gfile.exists(beside) else None
  trained_with = run_folder.recorded_settings(path).get("bert_config")
  if isinstance(trained_with, dict) and isinstance(
      trained_with.get("causal_attention", False), bool):
    causal = trained_with.get("causal_attention", False)
    settings = run_folder.settings_path(folder)
    return causal, settings if causal else "no causal_attention in %s" % settings, beside
  causal = _causal_in(beside) if beside else None
  if causal is None:
    return None
  return causal, beside if causal else "no causal_attention in %s" % beside, beside


def _causal_in(config_file):
  """causal_attention of a bert_config.json (absent: false), or None if it cannot be read (the
  config checks name such a file where it matters)."""
  try:
    with tf.io.gfile.GFile(config_file, "r") as f:
      causal = json.loads(f.read()).get("causal_attention", False)
  except (tf.errors.OpError, ValueError, TypeError, AttributeError):
    return None
  return causal if isinstance(causal, bool) else None


def check_init_checkpoint(path):
  """A missing or unreadable --init_checkpoint stops here, not after the feature files are
  written. The one place this is checked (runners, extract_features, export_tfhub)."""
  from bert_tf import checkpoints
  checkpoints.check_source(path)
