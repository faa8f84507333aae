"""Named entity recognition on CoNLL-2003 (paper section 5.3): data (CoNLL files, IOB1/IOB2
schemes, the label list), labels (the labels and tag scheme of one run: --labels, the trained
model's order, the files' tags), features (document windows, first-piece labels, max-context
word predictions), model (TokenClassifierModel + NerTask, the
fine-tuning approach), feature_based (frozen BERT features cached on disk + a BiLSTM, the
approach of Table 7), postprocess (conlleval scores and prediction files) and export (a
SavedModel tagging raw text) and hooks (run_ner.py's TaskHooks of both approaches); the last
two are imported on their own."""

from bert_tf.tasks.ner.data import (
    DOCSTART,
    RUN_SPLITS,
    SCHEMES,
    SPLIT_FILES,
    Document,
    Sentence,
    detect_scheme,
    from_iob2,
    label_list,
    read_conll,
    split_file,
    to_iob2,
)
from bert_tf.tasks.ner.feature_based import REPRESENTATIONS
from bert_tf.tasks.ner.features import (
    NerFeature,
    convert_document,
    document_windows,
    encode_feature,
    feature_spec,
    word_pieces,
    word_predictions,
)
from bert_tf.tasks.ner.labels import RunLabels
from bert_tf.tasks.ner.model import NerTask, TokenClassifierModel
from bert_tf.tasks.ner.postprocess import (
    PREDICTION_FILES,
    chunk_counts,
    conlleval,
    per_document,
    scores_of,
    sentence_predictions,
    write_conll,
    write_predictions,
)
