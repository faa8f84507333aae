"""Fine-tune BERT on SQuAD v1.1 / v2.0 and predict answers (paper sections 4.2 and 4.3).

Same flags as Google's run_squad.py, plus distribution, precision, XLA, gradient
accumulation and --export_dir (a SavedModel answering raw question/context pairs):

  python run_squad.py --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
    --do_train=True --train_file=$SQUAD_DIR/train-v1.1.json \
    --do_predict=True --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 \
    --learning_rate=3e-5 --num_train_epochs=2.0 --max_seq_length=384 --doc_stride=128 \
    --output_dir=/tmp/squad_base/

After --do_predict, when the predict file has answers, the official v1.1 (or, with
--version_2_with_negative, v2.0) metrics are computed and written to
eval_results.json; for v2 its best_f1_thresh can be fed back as
--null_score_diff_threshold.
"""

import sys

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags

from bert_tf import runner
from bert_tf.runner import shared_flags
from bert_tf.tasks.squad.hooks import SquadHooks
from bert_tf.utils import cli

flags.DEFINE_string("train_file", None, "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string("predict_file", None,
                    "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
flags.DEFINE_integer("doc_stride", 128,
                     "When splitting up a long document into chunks, how much stride to take "
                     "between chunks.")
flags.DEFINE_integer("max_query_length", 64,
                     "The maximum number of tokens for the question. Questions longer than this "
                     "will be truncated to this length.")
flags.DEFINE_integer("n_best_size", 20,
                     "The total number of n-best predictions to generate in the "
                     "nbest_predictions.json output file.")
flags.DEFINE_integer("max_answer_length", 30,
                     "The maximum length of an answer that can be generated. This is needed "
                     "because the start and end predictions are not conditioned on one another.")
flags.DEFINE_bool("verbose_logging", False,
                  "If true, all of the warnings related to data processing will be printed.")
flags.DEFINE_bool("version_2_with_negative", False,
                  "If true, the SQuAD examples contain some that do not have an answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   "If null_score - best_non_null is greater than the threshold predict null.")
shared_flags.define_finetuning_flags(
    max_seq_length=384, do_predict_help="Whether to run eval on the dev set.",
    export_help="If set, write a SavedModel here: `serving_default` takes question and "
                "context strings and returns the answer; `serve_ids` returns logits.")


def main(_):
  runner.main(SquadHooks, sys.modules[__name__], ["bert_config_file", "vocab_file", "output_dir"])


if __name__ == "__main__":
  cli.run(main)
