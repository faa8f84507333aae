"""SQuAD v1.1 / v2.0 question answering (paper sections 4.2 and 4.3): data (reading the
JSON files), features (windows and the record layout), model (SquadModel + SquadTask),
postprocess (n-best spans and prediction files), metrics (the official evaluation) and
export (a SavedModel answering raw text, on graph_features' windows and graph_postprocess'
best spans; the three are imported on their own), and hooks (run_squad.py's TaskHooks,
imported on its own: it imports the runner)."""

from bert_tf.tasks.squad.data import (
    WHITESPACE_CODE_POINTS,
    SquadExample,
    load_squad_json,
    read_squad_examples,
    split_context,
)
from bert_tf.tasks.squad.features import (
    FIRST_UNIQUE_ID,
    DocSpan,
    InputFeatures,
    check_is_max_context,
    convert_examples_to_features,
    doc_spans_for,
    encode_feature,
    feature_spec,
    improve_answer_span,
)
from bert_tf.tasks.squad.model import SquadModel, SquadTask
from bert_tf.tasks.squad.postprocess import (
    NO_SPAN_SCORE_DIFF,
    RawResult,
    compute_predictions,
    compute_softmax,
    get_best_indexes,
    get_final_text,
    write_json,
    write_predictions,
)
