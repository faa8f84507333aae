"""Whole-folder conversions between Google's layout and Hugging Face's (convert_checkpoint.py).

Reading and writing each layout is elsewhere (sources.py opens any source and
writes Google's files; hf_checkpoints.py writes HF folders); this module checks the
output folder and the vocab, and chooses the casing written for transformers.
"""

import collections
import os

from bert_tf import checkpoints, tokenization
import bert_tf.checkpoints.checks as checks
import bert_tf.checkpoints.hf_files as hf_files
import bert_tf.checkpoints.hf_state as hf_state
import bert_tf.checkpoints.names as names
import bert_tf.checkpoints.run_folder as run_folder
from bert_tf.config import BertConfig
from bert_tf.errors import UserInputError


def _check_output_dir(path, input_path):
  if os.path.abspath(path) == os.path.abspath(os.fspath(input_path).rstrip("/")):
    raise UserInputError("--output_dir is the input folder %s; write the conversion elsewhere."
                         % input_path)
  if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
    raise UserInputError("--output_dir %s exists and is not an empty folder; choose a new one."
                         % path)


def _checked_vocab(vocab_file, config, config_file):
  if not os.path.isfile(vocab_file):
    raise UserInputError("Vocab file %s does not exist; pass --vocab_file=PATH/vocab.txt." %
                         vocab_file)
  vocab = tokenization.load_vocab(vocab_file)
  checks.check_vocab(vocab, config, vocab_file, config_file)
  return vocab


def guess_do_lower_case(checkpoint, vocab):
  """A Google release's casing when its folder name is known, else the vocab's."""
  for lower in (True, False):
    try:
      tokenization.validate_case_matches_checkpoint(lower, checkpoint)
    except ValueError:
      return not lower
  words = (t for t in vocab if not (t.startswith("[") and t.endswith("]")))
  return not any(t != t.lower() for t in words)


def convert_to_google(hf_folder, output_dir, vocab_file=None):
  """HF folder -> output_dir/{bert_config.json, vocab.txt, bert_model.ckpt.*}.

  Returns (checkpoint prefix, the opened CheckpointSource).
  """
  hf_folder, output_dir = os.fspath(hf_folder), os.fspath(output_dir)
  _check_output_dir(output_dir, hf_folder)
  source = checkpoints.open_source(hf_folder, kind="hf")
  vocab_file = vocab_file or os.path.join(hf_folder, hf_files.VOCAB_NAME)
  _checked_vocab(vocab_file, source.config, source.config_file)
  os.makedirs(output_dir, exist_ok=True)
  with open(os.path.join(output_dir, checkpoints.GOOGLE_CONFIG_NAME), "w",
            encoding="utf-8") as f:
    f.write(source.config.to_json_string())
  hf_files.copy_file(vocab_file, os.path.join(output_dir, hf_files.VOCAB_NAME))
  prefix = checkpoints.save_checkpoint(
      os.path.join(output_dir, checkpoints.GOOGLE_CHECKPOINT_NAME), extra=source.variables())
  return prefix, source


# Why a head kind of names.py has no Hugging Face form, for the message that refuses it.
_NO_HF_FORM = {
    "swag": ("run_swag's multiple-choice head", "transformers' BertForMultipleChoice adds a "
             "bias to the paper's one vector"),
}


def check_heads_convert(source):
  """A checkpoint holding a head no transformers class has (SWAG's) stops with that reason and
  what does convert (its encoder, --encoder_only), not as a list of unexpected names."""
  formless = hf_state.heads_without_hf_form(source.shapes)
  if not formless:
    return
  kind = formless[0]
  what, why = _NO_HF_FORM.get(kind, ("the %s head" % kind, "no transformers class holds it"))
  weights = ", ".join(row.google for row in names.head_names(kind))
  raise UserInputError("Checkpoint %s holds %s (%s), which has no Hugging Face form in this "
                       "converter (%s); pass --encoder_only to convert its encoder alone "
                       "(BertModel), or keep the model in Google's layout." %
                       (source.path, what, weights, why))


def convert_to_hf(checkpoint, output_dir, bert_config_file=None, vocab_file=None,
                  do_lower_case=None, strip_accents=None, encoder_only=False):
  """Google-layout checkpoint -> HF folder in output_dir.

  bert_config_file and vocab_file default to the files beside the checkpoint; the casing, the
  head's label names and its problem_type to what a runner recorded with it (run_folder), else
  `guess_do_lower_case`, transformers' LABEL_i and `hf_files.problem_type`'s default.
  `encoder_only` writes the encoder (BertModel) and leaves the checkpoint's heads out.
  Returns (architecture, do_lower_case).
  """
  output_dir = os.fspath(output_dir)
  _check_output_dir(output_dir, checkpoint)
  source = checkpoints.open_source(checkpoint, kind="google")
  if not encoder_only:
    check_heads_convert(source)
  recorded = run_folder.recorded_settings(source.path)
  config_file = bert_config_file or source.config_file
  if not config_file or not os.path.isfile(config_file):
    raise UserInputError("BERT config file %s does not exist; pass --bert_config_file=PATH/"
                         "bert_config.json for checkpoint %s." %
                         (config_file or os.path.join(os.path.dirname(source.path),
                                                      checkpoints.GOOGLE_CONFIG_NAME),
                          source.path))
  config = BertConfig.from_json_file(config_file)
  vocab_file = vocab_file or os.path.join(os.path.dirname(source.path),
                                          hf_files.VOCAB_NAME)
  vocab = _checked_vocab(vocab_file, config, config_file)
  if recorded.get("vocab_sha1") and run_folder.file_digest(vocab_file) != recorded["vocab_sha1"]:
    raise UserInputError("Vocab file %s is not the one the run in %s was trained with (its "
                         "settings record another sha1); pass that run's --vocab_file." %
                         (vocab_file, run_folder.checkpoint_folder(source.path)))
  if do_lower_case is None:
    do_lower_case = recorded.get("do_lower_case")
    if do_lower_case is None:
      do_lower_case = guess_do_lower_case(source.path, vocab)
    elif strip_accents is None:
      strip_accents = recorded.get("strip_accents")
  variables = source.variables() if not encoder_only else collections.OrderedDict(
      (name, source.get(name)) for name in sorted(source.shapes) if not names.is_head_name(name))
  _, architecture = hf_files.write_hf_folder(output_dir, variables, config,
                                                   vocab_file, do_lower_case, strip_accents,
                                                   source=source.path, recorded=recorded)
  return architecture, do_lower_case
