"""The one checkpoint name table: each weight's Google name, Hugging Face key and Keras attribute.

Pure data at the bottom of the package (no TensorFlow, no other bert_tf module),
so every layer above can read it: the encoder and each head find their variables
here (`variables_of`), sources.py loads and saves Google's layout with it,
hf_state.py translates to and from Hugging Face names with it.

A row (`Name`):
  google     the variable name in Google's TF1 checkpoints (the original's scopes)
  hf         the key in a Hugging Face state dict (encoder keys without "bert."),
             or None where HF has no equivalent (SWAG's one vector)
  transpose  a torch Linear weight is [out, in], the transpose of a TF kernel [in, out]
  shape      the Google-side shape, as config field names ("labels": the head's label count)
  attr       the Keras attribute path from the owning layer ("a.b.3.c": getattr, or index)

A head kind (`HeadKind`) is what a head declares as its `checkpoint_kind`; its rows
and the Hugging Face class that holds that head alone. Adding a head to the checkpoint
layouts is adding one entry to HEAD_KINDS.
"""

import collections

Name = collections.namedtuple("Name", "google hf transpose shape attr")
HeadKind = collections.namedtuple("HeadKind", "names hf_architecture")

H, I, V = "hidden_size", "intermediate_size", "vocab_size"
LABELS = "labels"

# The encoder's keys in HF files carry this prefix when the file also holds a head.
HF_ENCODER_PREFIX = "bert."
# Keys some HF files hold that are not weights.
HF_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
# HF's masked-LM decoder is tied to these (it is never a weight of its own in Google's layout).
HF_TIED = {"cls.predictions.decoder.weight": "embeddings.word_embeddings.weight",
           "cls.predictions.decoder.bias": "cls.predictions.bias"}
# Optimizer slots and the step counter: in Google's checkpoints, never model weights.
IGNORED_SUFFIXES = ("/adam_m", "/adam_v")
IGNORED_NAMES = ("global_step",)


def dense(google, hf, attr, n_in, n_out):
  return [Name(google + "/kernel", hf and hf + ".weight", True, (n_in, n_out), attr + ".kernel"),
          Name(google + "/bias", hf and hf + ".bias", False, (n_out,), attr + ".bias")]


def layer_norm(google, hf, attr):
  return [Name(google + "/gamma", hf + ".weight", False, (H,), attr + ".gamma"),
          Name(google + "/beta", hf + ".bias", False, (H,), attr + ".beta")]


def logits(google_prefix, hf, labels, with_bias=True):
  """A [labels, H] matrix used with transpose_b (as torch does: not transposed) and a bias."""
  rows = [Name(google_prefix + "output_weights", hf and hf + ".weight", False, (labels, H),
               "output_weights")]
  if with_bias:
    rows.append(Name(google_prefix + "output_bias", hf and hf + ".bias", False, (labels,),
                     "output_bias"))
  return rows


def encoder(num_hidden_layers):
  """[Name] of BertModel's weights, attributes relative to the BertModel."""
  rows = [
      Name("bert/embeddings/word_embeddings", "embeddings.word_embeddings.weight", False, (V, H),
           "embeddings.word_embeddings"),
      Name("bert/embeddings/position_embeddings", "embeddings.position_embeddings.weight", False,
           ("max_position_embeddings", H), "embeddings.position_embeddings"),
      Name("bert/embeddings/token_type_embeddings", "embeddings.token_type_embeddings.weight",
           False, ("type_vocab_size", H), "embeddings.token_type_embeddings"),
  ]
  rows += layer_norm("bert/embeddings/LayerNorm", "embeddings.LayerNorm", "embeddings.layer_norm")
  for n in range(num_hidden_layers):
    g, hf, a = "bert/encoder/layer_%d/" % n, "encoder.layer.%d." % n, "encoder_layers.%d." % n
    for part in ("query", "key", "value"):
      rows += dense(g + "attention/self/" + part, hf + "attention.self." + part,
                    a + "attention." + part, H, H)
    rows += dense(g + "attention/output/dense", hf + "attention.output.dense",
                  a + "attention_output", H, H)
    rows += layer_norm(g + "attention/output/LayerNorm", hf + "attention.output.LayerNorm",
                       a + "attention_norm")
    rows += dense(g + "intermediate/dense", hf + "intermediate.dense", a + "intermediate", H, I)
    rows += dense(g + "output/dense", hf + "output.dense", a + "output_dense", I, H)
    rows += layer_norm(g + "output/LayerNorm", hf + "output.LayerNorm", a + "output_norm")
  rows += dense("bert/pooler/dense", "pooler.dense", "pooler.dense", H, H)
  return rows


def _masked_lm():
  rows = dense("cls/predictions/transform/dense", "cls.predictions.transform.dense", "transform",
               H, H)
  rows += layer_norm("cls/predictions/transform/LayerNorm", "cls.predictions.transform.LayerNorm",
                     "layer_norm")
  rows.append(Name("cls/predictions/output_bias", "cls.predictions.bias", False, (V,),
                   "output_bias"))
  return rows


# kind -> HeadKind. Order matters where several heads are written together (pretraining).
HEAD_KINDS = collections.OrderedDict([
    ("mlm", HeadKind(_masked_lm(), "BertForMaskedLM")),
    ("nsp", HeadKind(logits("cls/seq_relationship/", "cls.seq_relationship", 2),
                     "BertForNextSentencePrediction")),
    # run_classifier's head: the original created it at the top level, without a scope.
    ("classifier", HeadKind(logits("", "classifier", LABELS), "BertForSequenceClassification")),
    ("squad", HeadKind(logits("cls/squad/", "qa_outputs", 2), "BertForQuestionAnswering")),
    # The paper's one SWAG vector; HF's BertForMultipleChoice also has a bias, so no HF form.
    ("swag", HeadKind(logits("cls/swag/", None, 1, with_bias=False), None)),
    # run_ner's token classifier (section 5.3; the original shipped none). HF names it as the
    # sequence classifier: the file's architecture tells the two apart.
    ("ner", HeadKind(logits("cls/ner/", "classifier", LABELS), "BertForTokenClassification")),
])

# Heads that HF keeps in one class together.
HF_COMBINED_ARCHITECTURES = {("mlm", "nsp"): "BertForPreTraining"}
# HF classes whose `classifier.*` is no head of bert_tf's (SWAG's has no bias).
HF_OTHER_CLASSIFIERS = ("BertForMultipleChoice",)


def head_names(kind):
  """[Name] of a head kind; a KeyError names the kinds that exist."""
  if kind not in HEAD_KINDS:
    raise KeyError("No checkpoint names for head kind %r (known: %s)." %
                   (kind, ", ".join(HEAD_KINDS)))
  return HEAD_KINDS[kind].names


def hf_architecture(kinds):
  """The HF class holding exactly these head kinds (None: no such class)."""
  kinds = tuple(kinds)
  if not kinds:
    return "BertModel"
  if kinds in HF_COMBINED_ARCHITECTURES:
    return HF_COMBINED_ARCHITECTURES[kinds]
  if len(kinds) == 1:
    return HEAD_KINDS[kinds[0]].hf_architecture
  return None


def is_head_name(google_name):
  """A Google name that some head kind uses (a checkpoint may carry heads a model lacks)."""
  return google_name in _ALL_HEAD_NAMES


_ALL_HEAD_NAMES = frozenset(n.google for kind in HEAD_KINDS.values() for n in kind.names)


def is_ignored(google_name):
  return google_name in IGNORED_NAMES or google_name.endswith(IGNORED_SUFFIXES)


def shape_of(name, config, labels=None):
  """The Google-side shape of a row for a config (None where the label count is unknown)."""
  return tuple(labels if d == LABELS else d if isinstance(d, int) else getattr(config, d)
               for d in name.shape)


def variables_of(owner, rows):
  """Google name -> the owner's variable at each row's attribute path."""
  out = collections.OrderedDict()
  for row in rows:
    value = owner
    for part in row.attr.split("."):
      value = value[int(part)] if part.isdigit() else getattr(value, part)
    out[row.google] = value
  return out
