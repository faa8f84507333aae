"""BERT pretraining (paper section 3.1) and the Table 5 ablations: models (PretrainingModel,
MaskedLMModel, LeftToRightLMModel) and PretrainingTask. The records are
create_pretraining_data's (bert_tf.pretraining_data writes them,
input_pipeline.pretraining_features reads them). run_pretraining.py's TaskHooks are in hooks,
imported on its own (it imports the runner)."""

from bert_tf.tasks.pretraining.model import (
    OBJECTIVES,
    LeftToRightLMModel,
    MaskedLMModel,
    PretrainingModel,
    PretrainingTask,
    unmasked_ids,
)
