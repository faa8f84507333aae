"""Named entity recognition on CoNLL-2003 (paper section 5.3), both approaches of the paper:
fine-tuning (the default; windows over whole documents, "the maximal document context") and
feature-based (Table 7: a BiLSTM over frozen BERT features, --approach=feature_based).
Outputs, flags and the conlleval scores: docs/ner.md.

  python run_ner.py --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --do_lower_case=false --data_dir=$CONLL_DIR \
    --do_train=true --do_eval=true --do_predict=true --output_dir=/tmp/ner
"""

import sys

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags

from bert_tf import runner
from bert_tf.runner import shared_flags
from bert_tf.tasks import ner
from bert_tf.tasks.ner.hooks import APPROACHES
from bert_tf.utils import cli

flags.DEFINE_string("data_dir", None,
                    "Folder of the CoNLL files: train.txt, dev.txt (or valid.txt), test.txt, or "
                    "the original eng.train, eng.testa, eng.testb.")
flags.DEFINE_enum("tag_scheme", "auto", ["auto"] + list(ner.SCHEMES),
                  "The files' tag scheme (predictions are written in it): auto = detected from "
                  "the training file (else the one stored by training, else the dev/test file).")
flags.DEFINE_list("labels", None,
                  "Comma-separated IOB2 labels (O, B-PER, I-PER, ...). Default: those of the "
                  "training file; runs without --do_train read them from --output_dir.")
flags.DEFINE_integer("doc_stride", 128,
                     "When splitting up a long document into windows, how much stride to take "
                     "between windows.")
flags.DEFINE_enum("approach", "fine_tuning", ["fine_tuning", "feature_based"],
                  "fine_tuning: BERT and the token classifier trained end to end; "
                  "feature_based: BERT frozen, a BiLSTM over its cached features (Table 7).")
flags.DEFINE_enum("features", None, list(ner.REPRESENTATIONS),
                  "The BERT representation of --approach=feature_based (default "
                  "concat_last_four, the paper's best).")
flags.DEFINE_integer("lstm_units", 768, "Units of each direction of the feature-based BiLSTM.")
shared_flags.define_finetuning_flags(
    do_predict_help="Whether to tag the test file.",
    export_help="If set, write a SavedModel here: `serving_default` takes raw text and "
                "returns the entities; `serve_ids` returns per-position logits.")
shared_flags.define_eval_flags()


def main(_):
  runner.main(APPROACHES[flags.FLAGS.approach], sys.modules[__name__],
              ["data_dir", "bert_config_file", "vocab_file", "output_dir"])


if __name__ == "__main__":
  cli.run(main)
