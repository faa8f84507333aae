"""Fine-tuning on the user's own labeled file (run_classifier --train_file/--eval_file/
--predict_file): data (reading .csv/.tsv/.jsonl rows and their labels), labels (problem type,
label order and what a run records of them), weights (--class_weights), features (the record
layout), model (the loss of each problem type), metrics, postprocess (predictions.jsonl) and
export (imported on its own)."""

from bert_tf.tasks.own_data.data import PROBLEM_TYPES, Columns, Row, read_rows
from bert_tf.tasks.own_data.features import encode_row, feature_spec
from bert_tf.tasks.own_data.labels import Schema
from bert_tf.tasks.own_data.metrics import (
    multi_label_metrics,
    regression_metrics,
    single_label_metrics,
)
from bert_tf.tasks.own_data.model import OwnDataModel, OwnDataTask
from bert_tf.tasks.own_data.postprocess import write_predictions
