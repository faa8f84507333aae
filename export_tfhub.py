"""Export a BERT checkpoint as a TF-Hub-style encoder and text preprocessor (two SavedModels).

  python export_tfhub.py --bert_config_file=$BERT_DIR/bert_config.json \
    --vocab_file=$BERT_DIR/vocab.txt --init_checkpoint=$BERT_DIR/bert_model.ckpt \
    --do_lower_case=True --encoder_export_dir=/tmp/bert_encoder \
    --preprocessor_export_dir=/tmp/bert_preprocess [--seq_length=128] [--with_mlm]

Then `encoder(preprocessor(strings))` works as with TF Hub's BERT models; the
interface is described in bert_tf/export/tfhub.py.
"""

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)  # isort: skip
from absl import flags, logging

from bert_tf.checkpoints import checks
from bert_tf.config import BertConfig
from bert_tf.export import tfhub
from bert_tf.utils import cli, precision

FLAGS = flags.FLAGS

flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model.")
flags.DEFINE_string("init_checkpoint", None,
                    "Checkpoint of the pre-trained BERT model (Google's layout).")
cli.define_tokenizer_flags()
flags.DEFINE_string("encoder_export_dir", None,
                    "Folder for the encoder SavedModel (must not exist or be empty).")
flags.DEFINE_string("preprocessor_export_dir", None,
                    "Folder for the preprocessor SavedModel (must not exist or be empty).")
flags.DEFINE_integer("seq_length", 128,
                     "Sequence length of the preprocessor's default packing (its bert_pack_inputs "
                     "takes any seq_length).")
flags.DEFINE_bool("with_mlm", False,
                  "Also export the masked-LM head as the encoder's `mlm` sub-object (the "
                  "checkpoint must contain cls/predictions/*).")
precision.define_flag("the encoder")
flags.adopt_module_key_flags(cli)  # --help lists the tokenizer flags too


def main(_):
  cli.require_flags(FLAGS, "bert_config_file", "vocab_file", "init_checkpoint",
                    "encoder_export_dir", "preprocessor_export_dir")
  checks.check_case(FLAGS.do_lower_case, FLAGS.init_checkpoint)
  checks.check_init_checkpoint(FLAGS.init_checkpoint)
  checks.check_causal_attention(FLAGS.init_checkpoint,
                                BertConfig.from_json_file(FLAGS.bert_config_file),
                                FLAGS.bert_config_file)
  encoder_dir, preprocessor_dir = tfhub.export_from_checkpoint(
      FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.init_checkpoint, FLAGS.do_lower_case,
      FLAGS.encoder_export_dir, FLAGS.preprocessor_export_dir, seq_length=FLAGS.seq_length,
      with_mlm=FLAGS.with_mlm, strip_accents=FLAGS.strip_accents,
      inference_precision=FLAGS.inference_precision)
  logging.info("Wrote the encoder to %s and the preprocessor to %s", encoder_dir,
               preprocessor_dir)


if __name__ == "__main__":
  cli.run(main)
