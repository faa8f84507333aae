"""Hugging Face state dicts translated to and from Google-named variables (numpy only).

Why apart from the files (hf_checkpoints.py): the translation is the contract
between the two layouts and is checked strictly, whatever the files hold. It uses
the table in bert_tf/checkpoints/names.py.

The contract: encoder keys are those of transformers' `BertModel`, with the prefix
"bert." when a head is in the file. A torch Linear weight is [out, in], the
transpose of a TF kernel [in, out] (rows marked `transpose` in names.py); the heads'
[labels, H] matrices are not transposed (the original multiplies with transpose_b,
as torch does). A torch LayerNorm weight/bias is TF's gamma/beta (old HF files say
gamma/beta too). The masked-LM decoder (`cls.predictions.decoder.weight` / `.bias`)
is tied to the word embeddings and to `cls.predictions.bias` in both layouts: it is
not written, and when a file holds it, it must equal what it is tied to.
`embeddings.position_ids` / `token_type_ids` (buffers some files hold) are ignored.
Values are copied bit for bit; bfloat16 and float16 tensors are widened to float32
(exactly) for Google's layout.

The HF class written follows the heads present (names.hf_architecture): none ->
BertModel, masked-LM and next-sentence -> BertForPreTraining, one head -> its class.
Google's checkpoints always hold the pooler, so BertForMaskedLM and
BertForQuestionAnswering files keep it (transformers reports it as unused); an HF
file without a pooler is an error, as bert_tf's encoder has the original's pooler.
"""

import collections

import numpy as np

import bert_tf.checkpoints.names as names
from bert_tf.errors import UserInputError


def _head_rows(architectures=None):
  """kind -> [Name] of the heads HF has a form for.

  Given the HF file's `architectures`, kinds that share HF keys (HF names the sequence and
  the token classifier alike) are narrowed to one: the kind of the named class, else the
  first in the table.
  """
  out, owner = collections.OrderedDict(), {}
  for kind, head in names.HEAD_KINDS.items():
    if not all(row.hf for row in head.names):
      continue
    keys = tuple(row.hf for row in head.names)
    if architectures is not None and keys in owner:
      if head.hf_architecture in architectures:
        del out[owner[keys]]
      else:
        continue
    owner[keys] = kind
    out[kind] = head.names
  return out


def _label_counts(variables, heads, mismatched, shown):
  """The label count of each head with one (a [labels, H] matrix and its [labels] bias)."""
  counts = {}
  for kind in heads:
    rows = [row for row in names.head_names(kind) if names.LABELS in row.shape]
    if not rows:
      continue
    weights, bias = (variables.get(row.google) for row in rows)
    if weights is None:
      continue
    counts[kind] = int(np.shape(weights)[0])
    if bias is not None and np.shape(bias)[:1] != np.shape(weights)[:1]:
      mismatched.append("%s vs %s (label counts differ)" % shown(rows, weights, bias))
  return counts


def _shape_ok(actual, expected):
  return len(actual) == len(expected) and all(
      e is None or a == e for a, e in zip(actual, expected))


def _torch_shape(row, config):
  shape = names.shape_of(row, config)
  return tuple(reversed(shape)) if row.transpose else shape


def _shown(shape):
  return [d if d is not None else "n" for d in shape]


def _names(items, limit=8):
  items = list(items)
  text = ", ".join(items[:limit])
  if len(items) > limit:
    text += ", ... (%d more)" % (len(items) - limit)
  return text


def _name_problems(missing, unexpected, mismatched, unexpected_label):
  """The missing, unexpected and misshapen names, worded alike in both directions."""
  problems = []
  if missing:
    problems.append("missing %s" % _names(missing))
  if unexpected:
    problems.append("%s %s" % (unexpected_label, _names(unexpected)))
  if mismatched:
    problems.append("shape mismatch %s" % _names(mismatched))
  return problems



def heads_without_hf_form(google_names):
  """The head kinds among `google_names` that no transformers class holds (SWAG's), in the
  table's order."""
  present = set(google_names)
  return [kind for kind, head in names.HEAD_KINDS.items()
          if not all(row.hf for row in head.names) and
          any(row.google in present for row in head.names)]


def hf_to_google(state, config, source, architectures=()):
  """An HF state dict -> OrderedDict of Google name -> array, strictly.

  The whole encoder must be there, each head whole or not at all, and every key
  must be known; every problem is reported at once, naming `source`.
  Returns (variables, head kinds present).
  """
  keys = {}
  problems = []
  for key in state:
    short = key[len(names.HF_ENCODER_PREFIX):] if key.startswith(names.HF_ENCODER_PREFIX) else key
    short = short.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias")
    if short in keys:
      problems.append("%s and %s are the same weight" % (keys[short], key))
    keys[short] = key
  used = {short for short in names.HF_BUFFERS if short in keys}
  out = collections.OrderedDict()
  missing, mismatched = [], []

  def take(row):
    key = keys[row.hf]
    value = np.asarray(state[key])
    expected = _torch_shape(row, config)
    if not _shape_ok(value.shape, expected):
      mismatched.append("%s %s (expected %s)" % (key, list(value.shape), _shown(expected)))
    if value.dtype != np.float32 and value.dtype.kind == "f":
      value = value.astype(np.float32)
    if row.transpose and value.ndim == 2:
      value = np.ascontiguousarray(value.T)
    out[row.google] = value
    used.add(row.hf)

  # Missing encoder keys are named as this file names the others.
  prefix = names.HF_ENCODER_PREFIX if any(
      k.startswith(names.HF_ENCODER_PREFIX) for k in state) else ""
  for row in names.encoder(config.num_hidden_layers):
    if row.hf in keys:
      take(row)
    else:
      missing.append(prefix + row.hf)
  if len(missing) == 2 and all(m.startswith(prefix + "pooler.") for m in missing):
    problems.append("it has no pooler (pooler.dense.*: saved by a BERT without one, e.g. "
                    "BertForMaskedLM); bert_tf's encoder has the original's pooler")
    missing = []
  heads = []
  for kind, rows in _head_rows(list(architectures)).items():
    present = [row for row in rows if row.hf in keys]
    if not present:
      continue
    if kind == "classifier" and any(a in names.HF_OTHER_CLASSIFIERS for a in architectures):
      problems.append("classifier.* belongs to %s, not a sequence classifier like "
                      "run_classifier's head" % "/".join(architectures))
      used.update(row.hf for row in present)
      continue
    heads.append(kind)
    for row in rows:
      if row.hf in keys:
        take(row)
      else:
        missing.append(row.hf)
  _label_counts(out, heads, mismatched, lambda rows, w, b: (
      "%s %s" % (rows[0].hf, list(np.shape(w))), "%s %s" % (rows[1].hf, list(np.shape(b)))))
  for short, tied_to in names.HF_TIED.items():
    if short not in keys:
      continue
    used.add(short)
    if tied_to in keys and not np.array_equal(np.asarray(state[keys[short]]),
                                              np.asarray(state[keys[tied_to]])):
      problems.append("%s differs from %s, to which BERT ties it (an untied output layer has "
                      "no place in Google's layout)" % (keys[short], keys[tied_to]))
  unexpected = sorted(keys[k] for k in keys if k not in used)
  fix = ""
  if missing or unexpected or mismatched:
    fix = " Check that config.json belongs to these weights."
  problems.extend(_name_problems(missing, unexpected, mismatched, "unexpected"))
  if problems:
    raise UserInputError("%s does not hold a BERT that bert_tf can load as its config "
                         "describes it: %s.%s" % (source, "; ".join(problems), fix))
  return out, heads


def google_to_hf(variables, config, source):
  """Google name -> array (weights only) -> (HF state dict, architecture, num_labels).

  Encoder keys carry the "bert." prefix when a head is written, as transformers
  saves them; every variable must be in the contract and have its shape.
  """
  present = set(variables)
  rows, missing, mismatched, problems = [], [], [], []
  encoder_rows = names.encoder(config.num_hidden_layers)
  parts = [encoder_rows]
  heads = []
  for kind, head_rows in _head_rows().items():
    if any(row.google in present for row in head_rows):
      heads.append(kind)
      parts.append(head_rows)
  for part in parts:
    for row in part:
      if row.google in present:
        rows.append(row)
      else:
        missing.append(row.google)
  unexpected = sorted(present - {row.google for row in rows})
  for row in rows:
    shape = tuple(np.shape(variables[row.google]))
    expected = names.shape_of(row, config)
    if not _shape_ok(shape, expected):
      mismatched.append("%s %s (expected %s)" % (row.google, list(shape), _shown(expected)))
  counts = _label_counts(variables, heads, mismatched, lambda rows, w, b: (
      "%s %s" % (rows[1].google, list(np.shape(b))),
      "%s %s" % (rows[0].google, list(np.shape(w)))))
  num_labels = next(iter(counts.values()), None)
  architecture = names.hf_architecture(heads)
  if architecture is None:
    problems.append("no Hugging Face BERT class has these heads together: %s" % ", ".join(heads))
  problems.extend(_name_problems(missing, unexpected, mismatched,
                                 "no Hugging Face equivalent for"))
  if problems:
    raise UserInputError("Checkpoint %s cannot be converted with its BERT config: %s. Check "
                         "that the bert_config.json belongs to this checkpoint." %
                         (source, "; ".join(problems)))
  prefix = names.HF_ENCODER_PREFIX if heads else ""
  encoder = {row.google for row in encoder_rows}
  state = collections.OrderedDict()
  for row in rows:
    value = np.asarray(variables[row.google])
    if row.transpose:
      value = value.T
    key = (prefix + row.hf) if row.google in encoder else row.hf
    state[key] = np.ascontiguousarray(value)
  return state, architecture, num_labels
