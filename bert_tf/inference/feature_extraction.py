"""The paper's feature-based approach (section 5.3): per-token activations as JSON lines.

Reproduces the original extract_features.py: one example per input line (`a ||| b`
for pairs), `"linex_index"` (sic) as the line's key, layers in `--layers` order,
values rounded with `round(float(x), 6)`. Unlike the original, examples stream in
batches (memory does not grow with the input) and the output appears only when
complete (it is written beside the target and renamed).
"""

import collections
import dataclasses
import json
import os
import re

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf.data import packing
from bert_tf.errors import UserInputError
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
  folder = os.path.dirname(os.path.abspath(output_file))
  if not os.path.isdir(folder):
    raise UserInputError("Output folder %s does not exist (check --output_file)." % folder)
  tmp = output_file + ".partial"
  progress = Progress(len(examples), "examples", "extract_features", stream=progress_stream)
  with open(tmp, "w", encoding="utf-8") as writer:
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
  os.replace(tmp, output_file)
  return len(examples)
