"""BERT pretraining (paper section 3.1) and the Table 5 ablations: models (PretrainingModel,
MaskedLMModel, LeftToRightLMModel) and PretrainingTask. The records are
create_pretraining_data's (bert_tf.tasks.pretraining.records writes them,
bert_tf.data.input_pipeline.pretraining_features reads them). run_pretraining.py's TaskHooks are
in hooks, imported on its own (it imports the runner).

The model's names load on first use, so the record writers (and Beam's workers that run
them) import neither TensorFlow's model code nor Keras."""

_MODEL_NAMES = ("OBJECTIVES", "LeftToRightLMModel", "MaskedLMModel", "PretrainingModel",
                "PretrainingTask", "unmasked_ids")


def __getattr__(name):
  if name in _MODEL_NAMES:
    from bert_tf.tasks.pretraining import model
    return getattr(model, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
