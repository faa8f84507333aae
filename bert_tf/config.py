"""BertConfig: the `bert_config.json` contract shared with Google's releases.

Field names, defaults and the JSON layout (indent 2, sorted keys) are the original
`modeling.BertConfig`'s, so a release's config reads here and a config written here
reads in the original code. Unlike the original, a bad file fails at load time with
a message naming the file and the field instead of deep inside graph building.
"""

import copy
import dataclasses
import json

from bert_tf import user_files
from bert_tf.errors import UserInputError

# Activations the original `modeling.get_activation` understands (case-insensitive);
# "" and "linear" mean no activation. "gelu" is the original's tanh approximation;
# "gelu_exact" (not in the original) is the erf form, which Hugging Face calls "gelu",
# so that checkpoints converted from there compute what they computed.
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")


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
    """Reads a `bert_config.json`, or an HF BERT `config.json` (translated by hf_checkpoints).

    Errors name the file and what to fix.
    """
    if not json_file:
      raise UserInputError("No BERT config file given: pass --bert_config_file=PATH/bert_config.json.")
    text = user_files.read_text(json_file, "BERT config file", "(check --bert_config_file)")
    try:
      data = json.loads(text)
    except json.JSONDecodeError as e:
      raise UserInputError("BERT config file %s is not valid JSON: %s." % (json_file, e)) from None
    if isinstance(data, dict) and "model_type" in data:
      # A Hugging Face config.json: translated (activation names, defaults) there.
      from bert_tf import hf_checkpoints
      config = hf_checkpoints.config_from_hf(data, json_file)
    else:
      config = cls.from_dict(data, source="BERT config file %s" % json_file)
    config.source_file = json_file
    return config

  def to_dict(self):
    return copy.deepcopy(dataclasses.asdict(self))

  def to_json_string(self):
    """The original's serialization: indent 2, sorted keys, trailing newline."""
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"
