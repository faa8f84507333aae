"""Pretrain BERT with masked LM and next sentence prediction (paper section 3.1, appendix A),
or with one of the paper's Table 5 ablations (--pretraining_objective).

Same flags as Google's run_pretraining.py, plus distribution, precision, XLA,
gradient accumulation and optimizer choice:

  python run_pretraining.py --input_file=/tmp/tf_examples.tfrecord --output_dir=/tmp/pretraining \
    --do_train=True --do_eval=True --bert_config_file=$BERT_DIR/bert_config.json \
    --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
    --num_train_steps=20 --num_warmup_steps=10 --learning_rate=2e-5

Re-running the same command resumes from the last checkpoint in --output_dir.

--pretraining_objective=mlm trains the masked LM alone ("No NSP"); =ltr a left-to-right
LM ("LTR & No NSP"): the encoder gets a causal attention mask, recorded as
causal_attention in the bert_config.json written to --output_dir, so every fine-tuning
runner given that config keeps the left-to-right mask, as the paper's LTR model did.
"""

import sys

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags

from bert_tf import runner
from bert_tf.runner import shared_flags
from bert_tf.tasks.pretraining import OBJECTIVES
from bert_tf.tasks.pretraining.hooks import PretrainingHooks
from bert_tf.utils import cli

flags.DEFINE_string("input_file", None,
                    "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence. Must match the data.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
flags.DEFINE_enum("pretraining_objective", "mlm_nsp", list(OBJECTIVES),
                  "mlm_nsp: masked LM + next sentence prediction (the original). The paper's "
                  "Table 5 ablations: mlm, the masked LM alone (No NSP); ltr, a left-to-right "
                  "LM on a causal encoder, each position predicting the next token (LTR & No "
                  "NSP). Both read the same create_pretraining_data records.")
shared_flags.define_training_flags(
    128, "The maximum total input sequence length after WordPiece tokenization. "
         "Must match the data.")
shared_flags.define_eval_flags()


def main(_):
  runner.main(PretrainingHooks, sys.modules[__name__],
              ["bert_config_file", "input_file", "output_dir"])


if __name__ == "__main__":
  cli.run(main)
