"""Whole-folder conversions between Google's layout and Hugging Face's (convert_checkpoint.py).

Reading and writing each layout is elsewhere (checkpoints.py opens any source and
writes Google's files; hf_checkpoints.py writes HF folders); this module checks the
output folder and the vocab, and chooses the casing written for transformers.
"""

import json
import os

from bert_tf import checkpoints, checks, hf_checkpoints, run_folder, tokenization
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
  vocab_file = vocab_file or os.path.join(hf_folder, hf_checkpoints.VOCAB_NAME)
  _checked_vocab(vocab_file, source.config, source.config_file)
  os.makedirs(output_dir, exist_ok=True)
  with open(os.path.join(output_dir, checkpoints.GOOGLE_CONFIG_NAME), "w",
            encoding="utf-8") as f:
    f.write(source.config.to_json_string())
  hf_checkpoints.copy_file(vocab_file, os.path.join(output_dir, hf_checkpoints.VOCAB_NAME))
  prefix = checkpoints.save_checkpoint(
      os.path.join(output_dir, checkpoints.GOOGLE_CHECKPOINT_NAME), extra=source.variables())
  return prefix, source


def convert_to_hf(checkpoint, output_dir, bert_config_file=None, vocab_file=None,
                  do_lower_case=None, strip_accents=None):
  """Google-layout checkpoint -> HF folder in output_dir.

  bert_config_file and vocab_file default to the files beside the checkpoint; the casing and
  the head's label names to what a runner recorded with it (run_folder), else
  `guess_do_lower_case` and transformers' LABEL_i. Returns (architecture, do_lower_case).
  """
  output_dir = os.fspath(output_dir)
  _check_output_dir(output_dir, checkpoint)
  source = checkpoints.open_source(checkpoint, kind="google")
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
                                          hf_checkpoints.VOCAB_NAME)
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
  _, architecture = hf_checkpoints.write_hf_folder(output_dir, source.variables(), config,
                                                   vocab_file, do_lower_case, strip_accents,
                                                   source=source.path,
                                                   labels=recorded.get("labels"))
  if recorded.get("problem_type") == "multi_label":  # run_classifier on the user's own files
    # transformers reads a head through one sigmoid per label only when config.json says so.
    path = os.path.join(output_dir, hf_checkpoints.CONFIG_NAME)
    with open(path, encoding="utf-8") as f:
      hf_config = json.load(f)
    hf_checkpoints.write_json(path, dict(hf_config, problem_type="multi_label_classification"))
  return architecture, do_lower_case
