"""GLUE / XNLI sentence(-pair) classification (paper section 4.1): data (the processors),
features (the record layout), windows (long examples as several windows, pooled), model
(ClassifierModel + ClassificationTask), postprocess (GLUE metrics) and export (a SavedModel
taking raw text, imported on its own)."""

from bert_tf.tasks.glue.data import (
    PROCESSORS,
    ColaProcessor,
    DataProcessor,
    InputExample,
    MnliMismatchedProcessor,
    MnliProcessor,
    MrpcProcessor,
    PaddingInputExample,
    QnliProcessor,
    QqpProcessor,
    RteProcessor,
    Sst2Processor,
    StsbProcessor,
    WnliProcessor,
    XnliProcessor,
    get_processor,
    read_tsv,
    task_labels,
)
from bert_tf.tasks.glue.features import (
    convert_single_example,
    encode_features,
    feature_spec,
    label_id_of,
)
from bert_tf.tasks.glue.model import ClassificationTask, ClassifierModel
from bert_tf.tasks.glue.postprocess import GLUE_METRICS, glue_metrics
from bert_tf.tasks.glue.windows import WindowOptions
