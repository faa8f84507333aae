"""Fine-tune BERT on GLUE / XNLI sentence(-pair) classification (paper section 4.1).

Same flags as Google's run_classifier.py, plus distribution, precision, XLA,
gradient accumulation, --export_dir (a SavedModel that takes raw text) and GLUE
submission files:

  python run_classifier.py --task_name=MRPC --do_train=true --do_eval=true \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
    --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/mrpc_output/

Tasks: cola, mnli, mnli-mm, mrpc, xnli, sst-2, qqp, qnli, rte, wnli, sts-b.
Re-running the same command resumes training from --output_dir. --long_document=windows reads
texts longer than --max_seq_length whole, as windows (docs/runners.md).
Your own .csv/.tsv/.jsonl files instead of a GLUE task: --train_file, --eval_file,
--predict_file (single-label, multi-label or regression, long texts as windows too;
docs/runners.md, "Your own data").
"""

import sys

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags

from bert_tf import runner
from bert_tf.tasks.glue import classifier_flags
from bert_tf.tasks.glue.hooks import ClassifierHooks
from bert_tf.tasks.own_data.hooks import OwnDataHooks
from bert_tf.utils import cli

FLAGS = flags.FLAGS

# The flags list under this script in --helpfull (absl names a script run as __main__ by its
# path), as when it defined them itself.
classifier_flags.define(sys.argv[0] if __name__ == "__main__" else __name__)


def main(_):
  script = sys.modules[__name__]
  if classifier_flags.reads_own_files(FLAGS):
    runner.main(OwnDataHooks, script, ["vocab_file", "bert_config_file", "output_dir"])
  else:
    runner.main(ClassifierHooks, script,
                ["data_dir", "task_name", "vocab_file", "bert_config_file", "output_dir"])


if __name__ == "__main__":
  cli.run(main)
