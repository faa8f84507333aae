"""The paper's feature-based approach (section 5.3): per-token activations as JSON lines.

Reproduces the original extract_features.py: one example per input line (`a ||| b`
for pairs), `"linex_index"` (sic) as the line's key, layers in `--layers` order,
values rounded with `round(float(x), 6)`. Unlike the original, examples stream in
batches (memory does not grow with the input) and the output appears only when
complete (it is written beside the target and renamed). With --pooling or --model_dir,
one pooled sentence embedding per example instead (a bert_tf.inference.text_embedder.TextEmbedder).
"""

import collections
import contextlib
import dataclasses
import json
import os
import re

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import sentence_models
from bert_tf.config import BertConfig
from bert_tf.data import packing
from bert_tf.errors import UserInputError
from bert_tf.inference import text_embedder
from bert_tf.modeling import INPUT_NAMES, trim_to_longest
from bert_tf.utils import cpu, precision, user_files
from bert_tf.utils.progress import Progress

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


@dataclasses.dataclass
class InputExample:
  unique_id: int
  text_a: str
  text_b: str = None


def read_lines(input_file):
  """The file's lines as str, split on "\\n" only; non-UTF-8 is an error naming the line."""
  data = user_files.read_bytes(input_file, "Input file", "(check --input_file)")
  lines = data.split(b"\n")
  if lines[-1] == b"":
    lines.pop()
  decoded = []
  for number, line in enumerate(lines, 1):
    try:
      decoded.append(line.decode("utf-8"))
    except UnicodeDecodeError as e:
      raise UserInputError("Input file %s line %d is not UTF-8 (byte %d); convert the file to "
                           "UTF-8." % (input_file, number, e.start + 1)) from None
  return decoded


def read_examples(input_file):
  """One InputExample per line; `text_a ||| text_b` makes a pair (the last ` ||| ` splits)."""
  examples = []
  for unique_id, line in enumerate(read_lines(input_file)):
    line = line.strip()
    match = _PAIR.match(line)
    if match is None:
      examples.append(InputExample(unique_id, line))
    else:
      examples.append(InputExample(unique_id, match.group(1), match.group(2)))
  return examples


def convert_example(example, max_seq_length, tokenizer):
  """InputExample -> PackedInput with the original's truncation and layout."""
  tokens_a = tokenizer.tokenize(example.text_a)
  tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
  return packing.pack_tokens(tokens_a, tokens_b, max_seq_length, tokenizer)


def parse_layer_indexes(layers_flag, num_hidden_layers):
  """'-1,-2' -> [-1, -2]; Python list indexes into the encoder's layers, checked up front."""
  try:
    indexes = [int(x) for x in layers_flag.split(",")]
  except ValueError:
    raise UserInputError("--layers=%s must be comma-separated integers, e.g. -1,-2,-3,-4." %
                         layers_flag) from None
  bad = [i for i in indexes if not -num_hidden_layers <= i < num_hidden_layers]
  if bad:
    raise UserInputError("--layers=%s: index %s is out of range for a %d-layer model (use %d..%d)."
                         % (layers_flag, bad[0], num_hidden_layers, -num_hidden_layers,
                            num_hidden_layers - 1))
  return indexes


def format_record(unique_id, tokens, layer_indexes, layer_outputs):
  """One JSON line: layer_outputs[j] is the [seq, H] output of layer layer_indexes[j]."""
  features = []
  for i, token in enumerate(tokens):
    layers = []
    for layer_index, output in zip(layer_indexes, layer_outputs):
      layers.append(collections.OrderedDict(
          [("index", layer_index), ("values", [round(x, 6) for x in output[i].tolist()])]))
    features.append(collections.OrderedDict([("token", token), ("layers", layers)]))
  record = collections.OrderedDict([("linex_index", unique_id), ("features", features)])
  return json.dumps(record) + "\n"


def _batches(items, size):
  for start in range(0, len(items), size):
    yield items[start:start + size]


def _check_output_folder(output_file):
  """Stops before any work when --output_file's folder does not exist."""
  folder = os.path.dirname(os.path.abspath(output_file))
  if not os.path.isdir(folder):
    raise UserInputError("Output folder %s does not exist (check --output_file)." % folder)


@contextlib.contextmanager
def _complete_file(output_file):
  """A text writer to output_file + ".partial", renamed to output_file once the block ends."""
  tmp = output_file + ".partial"
  with open(tmp, "w", encoding="utf-8") as writer:
    yield writer
  os.replace(tmp, output_file)


def extract_features(encoder, tokenizer, examples, output_file, layer_indexes, max_seq_length,
                     batch_size, jit_compile=None, progress_stream=None, dynamic_length=True):
  """Runs the encoder over the examples and writes the JSONL file; returns the count.

  `jit_compile` None: XLA where it measured faster for the encoder's precision
  (precision.prefers_xla).

  With `dynamic_length`, each batch runs at its longest real length (rounded up to
  precision.XLA_LENGTH_BUCKET under XLA): the JSONL holds only real tokens,
  whose values do not depend on the padding (see modeling.trim_to_longest).
  """

  def forward(inputs):
    outputs = encoder(inputs, training=False)["encoder_outputs"]
    return tf.stack([outputs[i] for i in layer_indexes])

  if jit_compile is None:
    jit_compile = precision.prefers_xla(precision.of(encoder))
  logging.info("Running the encoder in %s%s on %s", precision.of(encoder),
               " under XLA" if jit_compile else " (graph mode)", cpu.describe())
  forward = tf.function(forward, jit_compile=jit_compile, reduce_retracing=True)
  bucket = precision.XLA_LENGTH_BUCKET if jit_compile else 1
  _check_output_folder(output_file)
  progress = Progress(len(examples), "examples", "extract_features", stream=progress_stream)
  with _complete_file(output_file) as writer:
    for batch in _batches(examples, batch_size):
      packed = [convert_example(e, max_seq_length, tokenizer) for e in batch]
      # The last batch is padded to full size so the compiled function is reused.
      arrays = [np.zeros((batch_size, max_seq_length), np.int32) for _ in range(3)]
      for row, p in enumerate(packed):
        arrays[0][row], arrays[1][row], arrays[2][row] = p.input_ids, p.input_mask, p.segment_ids
      inputs = {name: tf.constant(array) for name, array in zip(INPUT_NAMES, arrays)}
      if dynamic_length:
        inputs = trim_to_longest(inputs, bucket=bucket)
      outputs = forward(inputs).numpy()  # [num_layers, batch, seq, H]
      for row, (example, feature) in enumerate(zip(batch, packed)):
        writer.write(format_record(example.unique_id, feature.tokens, layer_indexes,
                                   outputs[:, row]))
      progress.update(len(batch))
  return len(examples)


# --pooling's value that takes the pooling of --model_dir's sentence-transformers folder.
FROM_MODEL = "from_model"


def sentence_embedder(pooling, model_dir, init_checkpoint, bert_config_file, vocab_file,
                      do_lower_case, strip_accents, max_seq_length, given_flags=(),
                      inference_precision="float32"):
  """The TextEmbedder --pooling / --model_dir ask for.

  With --model_dir the sentence-transformers folder says everything (its own
  max_seq_length unless the flag is given); otherwise the checkpoint flags are the
  per-token run's, pooled from the last layer without normalization.
  `given_flags` names the flags set on the command line.
  """
  if "layers" in given_flags:
    raise UserInputError("--layers selects per-token features; pooled sentence embeddings come "
                         "from the last layer. Drop --layers (or --pooling/--model_dir).")
  if model_dir:
    if pooling not in (None, "", FROM_MODEL):
      raise UserInputError("--model_dir brings its own pooling; drop --pooling=%s (or use "
                           "--pooling=%s)." % (pooling, FROM_MODEL))
    clashing = [n for n, v in (("init_checkpoint", init_checkpoint),
                               ("bert_config_file", bert_config_file),
                               ("vocab_file", vocab_file)) if v]
    clashing += [n for n in ("do_lower_case", "strip_accents") if n in given_flags]
    if clashing:
      raise UserInputError("--model_dir brings its own weights, config, vocab and casing; drop "
                           "%s." % ", ".join("--" + n for n in clashing))
    return text_embedder.load(model_dir,
                              max_seq_length if "max_seq_length" in given_flags else None,
                              inference_precision)
  if pooling == FROM_MODEL:
    raise UserInputError("--pooling=%s needs --model_dir=FOLDER (a sentence-transformers "
                         "model)." % FROM_MODEL)
  missing = [n for n, v in (("init_checkpoint", init_checkpoint),
                            ("bert_config_file", bert_config_file),
                            ("vocab_file", vocab_file)) if not v]
  if missing:
    raise UserInputError("missing required flag(s): %s" % ", ".join("--" + n for n in missing))
  modes = sentence_models.parse_pooling_mode(pooling, "--pooling")
  config = BertConfig.from_json_file(bert_config_file)
  if max_seq_length > config.max_position_embeddings or max_seq_length < 2:
    raise UserInputError("--max_seq_length=%d must be between 2 and max_position_embeddings=%d "
                         "of %s." % (max_seq_length, config.max_position_embeddings,
                                     bert_config_file))
  return text_embedder.build(init_checkpoint, modes, False, max_seq_length, do_lower_case,
                             strip_accents, vocab_file, config,
                             inference_precision=inference_precision)


def write_sentence_embeddings(embedder, examples, output_file, batch_size, progress_stream=None):
  """One JSON line per example, {"linex_index": id, "embedding": [...]}; returns the count.

  `examples` have `unique_id`, `text_a` and `text_b` (None or "" for one text), as
  extract_features.py reads them; values are rounded to 6 decimals like its per-token
  features. The file appears only when complete.
  """
  _check_output_folder(output_file)
  if batch_size < 1:
    raise UserInputError("--batch_size must be positive, got %d." % batch_size)
  examples = list(examples)
  pairs = any(e.text_b for e in examples)
  progress = Progress(len(examples), "examples", "sentence embeddings", stream=progress_stream)
  with _complete_file(output_file) as writer:
    for batch in _batches(examples, batch_size):
      vectors = embedder.embed([e.text_a for e in batch], batch_size,
                               [e.text_b or "" for e in batch] if pairs else None)
      for example, vector in zip(batch, vectors):
        writer.write(json.dumps({"linex_index": example.unique_id,
                                 "embedding": [round(x, 6) for x in vector.tolist()]}) + "\n")
      progress.update(len(batch))
  return len(examples)
