"""BertConfig: the `bert_config.json` contract shared with Google's releases.

Field names, defaults and the JSON layout (indent 2, sorted keys) are the original
`modeling.BertConfig`'s, so a release's config reads here and a config written here
reads in the original code. Unlike the original, a bad file fails at load time with
a message naming the file and the field instead of deep inside graph building.

A Hugging Face BERT `config.json` translates here too (`from_hf_dict`/`to_hf_dict`):
HF's "gelu" is the exact erf GELU, which bert_tf calls "gelu_exact"; the original's
(tanh) "gelu" is HF's "gelu_new". Translating the names both ways keeps a converted
model computing what its source computed.
"""

import copy
import dataclasses
import json

from bert_tf.errors import UserInputError
from bert_tf.utils import user_files

# Activations the original `modeling.get_activation` understands (case-insensitive);
# "" and "linear" mean no activation. "gelu" is the original's tanh approximation;
# "gelu_exact" (not in the original) is the erf form, which Hugging Face calls "gelu",
# so that checkpoints converted from there compute what they computed.
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")

# bert_tf hidden_act -> HF hidden_act.
_TO_HF_ACTIVATION = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "tanh": "tanh",
                     "linear": "linear", "": "linear"}
# HF hidden_act -> bert_tf hidden_act (the tanh-approximation variants differ only in rounding).
_FROM_HF_ACTIVATION = {"gelu": "gelu_exact", "gelu_python": "gelu_exact", "gelu_new": "gelu",
                       "gelu_pytorch_tanh": "gelu", "gelu_python_tanh": "gelu",
                       "gelu_fast": "gelu", "relu": "relu", "tanh": "tanh", "linear": "linear"}
# transformers' BertConfig defaults, for fields an HF config.json leaves out
# (type_vocab_size differs from the original's default of 16).
_HF_DEFAULTS = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
                "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
                "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                "max_position_embeddings": 512, "type_vocab_size": 2,
                "initializer_range": 0.02}
LAYER_NORM_EPS = 1e-12
# Fields that decide what the network computes (dropout and init do not).
ARCHITECTURE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                       "intermediate_size", "hidden_act", "max_position_embeddings",
                       "type_vocab_size")


def activation_from_hf(name, source):
  """HF hidden_act -> bert_tf hidden_act; an unknown one is an error naming `source`."""
  key = name.lower() if isinstance(name, str) else name
  if key not in _FROM_HF_ACTIVATION:
    raise UserInputError(
        "%s: hidden_act %r has no bert_tf equivalent (those that have: %s); this model "
        "cannot be converted." % (source, name, ", ".join(sorted(_FROM_HF_ACTIVATION))))
  return _FROM_HF_ACTIVATION[key]


def activation_to_hf(name, source="BertConfig"):
  """bert_tf hidden_act -> HF hidden_act ("gelu" -> "gelu_new", "gelu_exact" -> "gelu")."""
  key = (name or "").lower()
  if key not in _TO_HF_ACTIVATION:
    raise UserInputError("%s: hidden_act %r has no Hugging Face equivalent." % (source, name))
  return _TO_HF_ACTIVATION[key]


@dataclasses.dataclass
class BertConfig:
  """Hyper-parameters of a BERT encoder (the 11 fields of `bert_config.json`)."""

  vocab_size: int
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 16
  initializer_range: float = 0.02
  # Not in the original: True for the paper's "LTR" ablation (Table 5), a left-to-right model
  # whose positions attend only to themselves and earlier ones, in pretraining and fine-tuning.
  # Written to bert_config.json only when true, so other configs keep the original's layout.
  causal_attention: bool = False

  # The file the config was read from (not a field: never written), for error messages.
  source_file = None

  def __post_init__(self):
    self.validate()

  @property
  def head_size(self):
    return self.hidden_size // self.num_attention_heads

  def validate(self, source="BertConfig"):
    """Raises UserInputError naming `source` and the field if a value is unusable."""
    where = "%s: " % source
    ints = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "max_position_embeddings", "type_vocab_size")
    for name in ints:
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UserInputError(
            "%sfield `%s` must be a positive integer, got %r." % (where, name, value))
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise UserInputError(
            "%sfield `%s` must be a number in [0, 1), got %r." % (where, name, value))
    if not isinstance(self.causal_attention, bool):
      raise UserInputError("%sfield `causal_attention` must be true or false, got %r." %
                           (where, self.causal_attention))
    if (isinstance(self.initializer_range, bool) or
        not isinstance(self.initializer_range, (int, float)) or self.initializer_range <= 0):
      raise UserInputError("%sfield `initializer_range` must be a positive number, got %r." %
                           (where, self.initializer_range))
    act = self.hidden_act
    if act is None:
      act = ""
    if not isinstance(act, str) or (act and act.lower() not in SUPPORTED_ACTIVATIONS):
      raise UserInputError(
          "%sfield `hidden_act` is %r; the supported activations are %s." %
          (where, self.hidden_act, ", ".join(SUPPORTED_ACTIVATIONS)))
    if self.hidden_size % self.num_attention_heads:
      raise UserInputError(
          "%sfield `hidden_size` (%d) is not a multiple of field `num_attention_heads` (%d)." %
          (where, self.hidden_size, self.num_attention_heads))

  @classmethod
  def from_dict(cls, json_object, source="BertConfig"):
    """Builds a config from a dict; unknown keys are an error (they are usually typos)."""
    if not isinstance(json_object, dict):
      raise UserInputError("%s: expected a JSON object, got %s." %
                           (source, type(json_object).__name__))
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(json_object) - known)
    if unknown:
      raise UserInputError("%s: unknown field(s) %s; a bert_config.json has only %s." %
                           (source, ", ".join(unknown), ", ".join(sorted(known))))
    if "vocab_size" not in json_object:
      raise UserInputError("%s: the required field `vocab_size` is missing." % source)
    config = cls.__new__(cls)
    for field in dataclasses.fields(cls):
      default = field.default if field.default is not dataclasses.MISSING else None
      setattr(config, field.name, json_object.get(field.name, default))
    config.validate(source)
    return config

  @classmethod
  def coerce(cls, config):
    """A BertConfig from a BertConfig or a plain dict (as `get_config` stores it)."""
    if isinstance(config, cls):
      return config
    if isinstance(config, dict):
      return cls.from_dict(config)
    raise TypeError("Expected a BertConfig or a dict of its fields, got %s." %
                    type(config).__name__)

  @classmethod
  def from_json_file(cls, json_file):
    """Reads a `bert_config.json`, or an HF BERT `config.json` (translated by `from_hf_dict`).

    Errors name the file and what to fix.
    """
    if not json_file:
      raise UserInputError(
          "No BERT config file given: pass --bert_config_file=PATH/bert_config.json.")
    text = user_files.read_text(json_file, "BERT config file", "(check --bert_config_file)")
    try:
      data = json.loads(text)
    except json.JSONDecodeError as e:
      raise UserInputError("BERT config file %s is not valid JSON: %s." % (json_file, e)) from None
    if isinstance(data, dict) and "model_type" in data:
      config = cls.from_hf_dict(data, json_file)
    else:
      config = cls.from_dict(data, source="BERT config file %s" % json_file)
    config.source_file = json_file
    return config

  @classmethod
  def from_hf_dict(cls, data, source):
    """A BertConfig from an HF config.json's dict; what bert_tf cannot compute is an error."""
    if not isinstance(data, dict):
      raise UserInputError("%s: expected a JSON object, got %s." % (source, type(data).__name__))
    architectures = data.get("architectures") or []
    if not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures):
      raise UserInputError("%s: `architectures` must be a list of class names such as "
                           "[\"BertModel\"], got %r." % (source, architectures))
    model_type = data.get("model_type")
    if model_type is None and not all(a.startswith("Bert") for a in architectures):
      model_type = "/".join(architectures)
    if model_type not in (None, "bert"):
      raise UserInputError("%s is not a BERT config (model_type %r, expected \"bert\"); only "
                           "BERT checkpoints convert." % (source, model_type))
    if data.get("is_decoder") or data.get("add_cross_attention"):
      raise UserInputError("%s is a BERT decoder (is_decoder / add_cross_attention); bert_tf "
                           "has only the bidirectional encoder." % source)
    position = data.get("position_embedding_type", "absolute")
    if position not in (None, "absolute"):
      raise UserInputError("%s: position_embedding_type %r is not supported; bert_tf has the "
                           "original's absolute position embeddings." % (source, position))
    eps = data.get("layer_norm_eps", LAYER_NORM_EPS)
    if not isinstance(eps, (int, float)) or abs(eps - LAYER_NORM_EPS) > 1e-15:
      raise UserInputError("%s: layer_norm_eps is %r; bert_tf's LayerNorm uses the original's "
                           "1e-12, so this model cannot be converted." % (source, eps))
    fields = {name: data.get(name, default) for name, default in _HF_DEFAULTS.items()}
    fields["hidden_act"] = activation_from_hf(fields["hidden_act"], source)
    return cls.from_dict(fields, source=source)

  def to_hf_dict(self, architecture="BertModel", num_labels=None, labels=None):
    """An HF config.json dict (transformers' BertConfig field names); `labels` names the
    head's rows in id2label / label2id (else transformers' LABEL_i)."""
    if self.causal_attention:
      raise UserInputError("A left-to-right model (causal_attention) has no Hugging Face "
                           "BertModel form; keep it in Google's layout.")
    data = {
        "architectures": [architecture],
        "model_type": "bert",
        "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
        "hidden_act": activation_to_hf(self.hidden_act),
        "hidden_dropout_prob": self.hidden_dropout_prob,
        "hidden_size": self.hidden_size,
        "initializer_range": self.initializer_range,
        "intermediate_size": self.intermediate_size,
        "layer_norm_eps": LAYER_NORM_EPS,
        "max_position_embeddings": self.max_position_embeddings,
        "num_attention_heads": self.num_attention_heads,
        "num_hidden_layers": self.num_hidden_layers,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "type_vocab_size": self.type_vocab_size,
        "vocab_size": self.vocab_size,
    }
    if num_labels is not None:
      if labels is None or len(labels) != num_labels:
        labels = ["LABEL_%d" % i for i in range(num_labels)]
      data["id2label"] = {str(i): str(label) for i, label in enumerate(labels)}
      data["label2id"] = {str(label): i for i, label in enumerate(labels)}
    return data

  def architecture_differences(self, other):
    """["field: self vs other"] for the fields that change what the network computes."""
    out = []
    for name in ARCHITECTURE_FIELDS:
      x, y = getattr(self, name), getattr(other, name)
      if name == "hidden_act":
        x, y = (x or "linear").lower(), (y or "linear").lower()
      if x != y:
        out.append("%s %r vs %r" % (name, x, y))
    return out

  def to_dict(self):
    data = copy.deepcopy(dataclasses.asdict(self))
    if not data["causal_attention"]:
      del data["causal_attention"]
    return data

  def to_json_string(self):
    """The original's serialization: indent 2, sorted keys, trailing newline."""
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"
