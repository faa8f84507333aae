"""run_classifier.py's own flags: a GLUE task's, the windows' and your own files', and which
of the two a command line asks for. Defined here for the script (`define`), listed under it
in --helpfull as when the script defined them itself."""

from absl import flags

from bert_tf.errors import UserInputError
from bert_tf.runner import shared_flags
from bert_tf.tasks.glue import windows as glue_windows
from bert_tf.tasks.own_data import data as own_data_files
from bert_tf.tasks.own_data import labels as own_labels

OWN_FILES = ("train_file", "eval_file", "predict_file")
OWN_FLAGS = ("text_column", "text_b_column", "label_column", "id_column", "labels",
             "problem_type", "label_delimiter", "threshold", "class_weights",
             "correct_class_weights")
GLUE_FLAGS = ("data_dir", "write_glue_submission", "xnli_language")


def define(module_name):
  """Defines the script's flags as the module `module_name`'s (the script's, as absl names it:
  its path when run, its name when imported) and the shared flags run_classifier takes."""
  m = module_name
  flags.DEFINE_string(
      "data_dir", None, "The input data dir. Should contain the .tsv files (or other data files) "
      "for the task.", module_name=m)
  flags.DEFINE_string("task_name", None, "The name of the task to train.", module_name=m)
  flags.DEFINE_bool(
      "write_glue_submission", False,
      "With --do_predict, also write <TASK>.tsv in the GLUE submission format.", module_name=m)
  flags.DEFINE_string("xnli_language", "zh",
                      "Language of the xnli task (the original used zh).", module_name=m)
  _define_windows_flags(m)
  _define_own_data_flags(m)
  shared_flags.define_finetuning_flags(
      export_help="If set, write a SavedModel here: `serving_default` takes raw text, "
                  "`serve_ids` takes word ids.")
  shared_flags.define_eval_flags()
  shared_flags.define_best_checkpoint_flags()


def _define_windows_flags(m):
  flags.DEFINE_enum(
      "long_document", "truncate", list(glue_windows.MODES),
      "truncate: cut every example to --max_seq_length (the original). windows: cut text_a into "
      "windows of what fits, --doc_stride apart (text_b whole in each); train on every window "
      "and pool an example's windows into one prediction (GLUE tasks and your own files alike).",
      module_name=m)
  flags.DEFINE_integer(
      "doc_stride", None,
      "With --long_document=windows: when splitting up a long document into windows, how much "
      "stride to take between windows (default %d)." % glue_windows.DEFAULT_DOC_STRIDE,
      module_name=m)
  flags.DEFINE_enum(
      "window_training", None, list(glue_windows.TRAINING_RULES),
      "With --long_document=windows, how training reads a document: first: its first window "
      "only (truncate's records; evaluation, prediction and the export read every window); "
      "document: its windows in one step, the loss on their pooled logits (--window_pooling), a "
      "batch of documents; window: every window a training example with its document's label, "
      "a batch of windows (default %s; docs/runners.md compares them)."
      % glue_windows.DEFAULT_TRAINING, module_name=m)
  flags.DEFINE_integer(
      "max_train_windows", None,
      "With --window_training=document: a training document's first windows that it trains on "
      "(evaluation and prediction read them all) (default %d)."
      % glue_windows.DEFAULT_MAX_TRAIN_WINDOWS, module_name=m)
  flags.DEFINE_enum(
      "window_pooling", None, list(glue_windows.POOLINGS),
      "With --long_document=windows: how an example's prediction combines its windows' logits: "
      "their mean, their max per label, or any: the window least likely to be the 'no' label "
      "decides (a yes/no task such as a topic: yes when any window says yes; the 'no' is the "
      "first label, or on your own files the label holding at least 80%% of a two-label "
      "training file's rows; multi_label: a label is predicted when any window predicts it, "
      "the max of each label's logit) (default %s; any for multi_label and for your own "
      "two-label files with such a label)." % glue_windows.DEFAULT_POOLING, module_name=m)


def _define_own_data_flags(m):
  """Your own files (no --task_name): bert_tf/tasks/own_data, docs/runners.md "Your own
  data"."""
  flags.DEFINE_string(
      "train_file", None,
      "Your own labeled training file, .csv, .tsv or .jsonl (the format from the extension), "
      "instead of --task_name and --data_dir.", module_name=m)
  flags.DEFINE_string("eval_file", None,
                      "Your own labeled file to evaluate on (as --train_file).", module_name=m)
  flags.DEFINE_string(
      "predict_file", None,
      "Your own file to predict (as --train_file; the label column may be absent).",
      module_name=m)
  flags.DEFINE_string("text_column", "text", "With --train_file...: the column of the text.",
                      module_name=m)
  flags.DEFINE_string("text_b_column", None,
                      "With --train_file...: the column of a pair's second text.", module_name=m)
  flags.DEFINE_string("label_column", "label",
                      "With --train_file...: the column of the label.", module_name=m)
  flags.DEFINE_string(
      "id_column", None,
      "With --train_file...: a column copied to each line of predictions.jsonl.", module_name=m)
  flags.DEFINE_list(
      "labels", None,
      "With --train_file...: the label names in output order (default: the training file's, "
      "sorted).", module_name=m)
  flags.DEFINE_enum(
      "problem_type", None, list(own_data_files.PROBLEM_TYPES),
      "With --train_file...: the problem type (default: read from the label column; the log "
      "says which and why).", module_name=m)
  flags.DEFINE_string(
      "label_delimiter", "|",
      "With --train_file...: what separates a multi-label CSV/TSV field's names.", module_name=m)
  flags.DEFINE_float(
      "threshold", None,
      "With --train_file... and multi_label: a label is predicted when its probability is over "
      "this (default: a run that does not train uses the training run's, else %s)."
      % own_labels.DEFAULT_THRESHOLD, module_name=m)
  flags.DEFINE_string(
      "class_weights", "none",
      "With --train_file...: none, balanced (from the training label counts) or one weight per "
      "label, comma-separated, in label order.", module_name=m)
  flags.DEFINE_bool(
      "correct_class_weights", None,
      "With --class_weights: take the weights back off each label's logit (minus log weight) "
      "at evaluation, prediction and export, so the probabilities are those of the data's "
      "own label shares and the weights act on training only; false answers with the "
      "weighted model's probabilities, which lean toward the up-weighted labels (more recall, "
      "less precision), as scikit-learn's class_weight does (default: true when training, "
      "else the training run's; docs/runners.md has the measurements).", module_name=m)


def reads_own_files(values=flags.FLAGS):
  """True when the command line names your own files (--train_file...), False for a GLUE
  task (--task_name); a flag of the other kind is refused."""
  if any(values[name].value for name in OWN_FILES):
    if values.task_name:
      raise UserInputError("--task_name=%s reads GLUE's files from --data_dir, --train_file/"
                           "--eval_file/--predict_file your own: pass one or the other."
                           % values.task_name)
    glue_only = [name for name in GLUE_FLAGS if values[name].present]
    if glue_only:
      raise UserInputError("--%s is for --task_name runs, not your own files "
                           "(--train_file...); drop it." % glue_only[0])
    return True
  own_only = [name for name in OWN_FLAGS if values[name].present]
  if own_only:
    raise UserInputError("--%s is for your own files (--train_file, --eval_file, "
                         "--predict_file), not --task_name runs; drop it." % own_only[0])
  return False
