"""SWAG multiple choice (paper section 4.4): data (reading the CSV files), features (the
record layout and the model's [batch, choices, seq] layout), model (MultipleChoiceModel +
MultipleChoiceTask), export (a SavedModel taking raw text) and hooks (run_swag.py's
TaskHooks); the last two are imported on their own."""

from bert_tf.tasks.swag.data import NUM_CHOICES, SwagExample, read_swag_examples
from bert_tf.tasks.swag.features import convert_example, encode_features, feature_spec, to_choices
from bert_tf.tasks.swag.model import MultipleChoiceModel, MultipleChoiceTask
