"""BERT pretraining (paper section 3.1): model (PretrainingModel + PretrainingTask). The records
are create_pretraining_data's (bert_tf.pretraining_data writes them,
input_pipeline.pretraining_features reads them)."""

from bert_tf.tasks.pretraining.model import PretrainingModel, PretrainingTask
