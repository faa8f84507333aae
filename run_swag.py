"""Fine-tune BERT on SWAG multiple choice (paper section 4.4).

Flags in the style of run_classifier.py; --data_dir holds SWAG's train.csv, val.csv
and test.csv (test without labels):

  python run_swag.py --data_dir=$SWAG_DIR --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
    --do_train=True --do_eval=True --max_seq_length=128 --train_batch_size=16 \
    --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=/tmp/swag_output/

eval_results.txt has eval_accuracy and eval_loss; --do_predict writes test_results.tsv
with the four choice probabilities per example. The head's one vector is stored in
Google-layout checkpoints as cls/swag/output_weights [1, hidden_size].
"""

import sys

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags

from bert_tf import runner
from bert_tf.runner import shared_flags
from bert_tf.tasks.swag.hooks import SwagHooks
from bert_tf.utils import cli

flags.DEFINE_string("data_dir", None, "Folder with SWAG's train.csv, val.csv and test.csv.")
shared_flags.define_finetuning_flags(
    train_batch_size=16, learning_rate=2e-5, do_predict_help="Whether to predict test.csv.",
    export_help="If set, write a SavedModel: `serving_default` takes `context` and four "
                "`ending0..3` strings; `serve_ids` takes word ids.")
shared_flags.define_eval_flags("Whether to evaluate on val.csv.")


def main(_):
  runner.main(SwagHooks, sys.modules[__name__],
              ["data_dir", "vocab_file", "bert_config_file", "output_dir"])


if __name__ == "__main__":
  cli.run(main)
