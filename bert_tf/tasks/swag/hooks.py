"""run_swag.py's task as the runner template asks for it: SWAG's CSV files, four endings per
example, one score per ending."""

import os

from bert_tf import runner
from bert_tf.tasks import swag


class SwagHooks(runner.TaskHooks):
  """SWAG: a context and four endings per example, one score per ending."""

  # The files of --data_dir per split.
  data_files = {"train": ("train.csv", True), "eval": ("val.csv", True),
                "predict": ("test.csv", False)}

  def read_examples(self, run, split):
    name, has_labels = self.data_files[split]
    return swag.read_swag_examples(os.path.join(self.flags.data_dir, name), has_labels)

  def encode(self, run, split, examples):
    for example in examples:
      yield swag.encode_features(swag.convert_example(example, run.options.max_seq_length,
                                                      run.tokenizer))

  def feature_spec(self, run, split):
    return swag.feature_spec(run.options.max_seq_length)

  def make_task(self, run):
    return swag.MultipleChoiceTask(run.config, **run.options.task_options())

  def postprocess_predict(self, run, examples, outputs, records):
    runner.write_test_results(run.output_path("test_results.tsv"), outputs["probabilities"])

  def export(self, run):
    from bert_tf.tasks.swag.export import export_swag
    options = run.options
    export_swag(options.export_dir, run.serving_model(), options.vocab_file, options.do_lower_case,
                options.max_seq_length, strip_accents=options.strip_accents)
