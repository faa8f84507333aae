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

import os

import bert_tf  # noqa: F401  (TensorFlow environment defaults, before TF loads)
from absl import flags, logging

from bert_tf import cli, example_codec, input_pipeline, runner, runner_flags
from bert_tf.tasks import swag

FLAGS = flags.FLAGS

flags.DEFINE_string("data_dir", None, "Folder with SWAG's train.csv, val.csv and test.csv.")
runner_flags.define_finetuning_flags(
    train_batch_size=16, learning_rate=2e-5, do_predict_help="Whether to predict test.csv.",
    export_help="If set, write a SavedModel: `serving_default` takes `context` and four "
                "`ending0..3` strings; `serve_ids` takes word ids.")
runner_flags.define_eval_flags("Whether to evaluate on val.csv.")


def write_feature_file(examples, tokenizer, path, description):
  records = (swag.encode_features(swag.convert_example(e, FLAGS.max_seq_length, tokenizer))
             for e in examples)
  return example_codec.write_records(path, records, len(examples), description)


def main(_):
  run = runner.prepare(FLAGS, ["data_dir", "vocab_file", "bert_config_file", "output_dir"])
  spec = swag.feature_spec(FLAGS.max_seq_length)
  data = lambda name: os.path.join(FLAGS.data_dir, name)
  out = lambda name: os.path.join(FLAGS.output_dir, name)
  # Every data file is read before training (a bad val.csv is reported up front).
  train_examples = swag.read_swag_examples(data("train.csv"), True) if FLAGS.do_train else []
  dev_examples = swag.read_swag_examples(data("val.csv"), True) if FLAGS.do_eval else []
  test_examples = swag.read_swag_examples(data("test.csv"), False) if FLAGS.do_predict else []

  num_train_steps, num_warmup_steps = runner.num_train_steps(FLAGS, len(train_examples))
  task = swag.MultipleChoiceTask(run.config, **runner.task_options(FLAGS))
  trainer = runner.make_trainer(FLAGS, run.strategy, task, num_train_steps, num_warmup_steps)

  def write_train_file(path):
    write_feature_file(train_examples, run.tokenizer, path, "train features")
    return "%d examples" % len(train_examples)

  runner.train_or_restore(FLAGS, trainer, spec, num_train_steps, write_train_file)

  if FLAGS.do_eval:
    eval_file = out("eval.tf_record")
    write_feature_file(dev_examples, run.tokenizer, eval_file, "eval features")
    result = trainer.evaluate(input_pipeline.record_dataset([eval_file], spec,
                                                            FLAGS.eval_batch_size, False))
    runner.write_eval_results(trainer, FLAGS.output_dir, result)

  if FLAGS.do_predict:
    predict_file = out("predict.tf_record")
    write_feature_file(test_examples, run.tokenizer, predict_file, "predict features")
    outputs = trainer.predict(input_pipeline.record_dataset([predict_file], spec,
                                                            FLAGS.predict_batch_size, False))
    runner.write_test_results(trainer, out("test_results.tsv"), outputs["probabilities"])

  if FLAGS.export_dir and trainer.chief:
    from bert_tf.tasks.swag.export import export_swag
    export_swag(FLAGS.export_dir, trainer.model, FLAGS.vocab_file, FLAGS.do_lower_case,
                FLAGS.max_seq_length, strip_accents=FLAGS.strip_accents)
    logging.info("Exported a SavedModel to %s", FLAGS.export_dir)


if __name__ == "__main__":
  cli.run(main)
