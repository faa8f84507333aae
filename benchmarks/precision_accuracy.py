"""Accuracy cost of the bfloat16 and int8 inference paths on a fine-tuned classifier.

    # 1. Reuters-21578 ModApte (columns `grain corn text`) -> SST-2 layout for run_classifier:
    python -m benchmarks.precision_accuracy --prepare_dir=DATA \\
        --reuters_train=reuters21578_modapte_train.tsv \\
        --reuters_test=reuters21578_modapte_test.tsv --label_column=grain
    # 2. fine-tune in float32: python run_classifier.py --task_name=sst-2 --data_dir=DATA ...
    # 3. compare the precisions on the labelled test set:
    python -m benchmarks.precision_accuracy --checkpoint=OUTPUT_DIR \\
        --bert_config_file=... --vocab_file=... --test_file=DATA/dev.tsv \\
        [--precisions=float32,bfloat16,int8] [--int8_keep_float32=pooler ...] \\
        [--export_dir=EXPORT_DIR]   # run_classifier --export_dir of the same run: adds LiteRT

Step 3 builds the GLUE classifier, loads the fine-tuned checkpoint, applies
bert_tf.utils.precision.for_inference for each precision and predicts the test set through the
features of run_classifier's eval (the sst-2 processor and convert_single_example). A
precision is only worth having if it keeps a trained model's decisions, which goldens on
random weights cannot show. One row per precision: accuracy, F1 of the positive class
(label 1), both in points against float32, the share of predicted labels equal to
float32's, max and mean |P(label 1) - float32's|, the seconds of the first batch (tracing
included) and of the whole test set after it; then each document whose label changed, with
its P(1) in float32 and in that precision (a change at P(1) near 0.5 is noise, not damage).
--int8_keep_float32 adds int8 rows with some Dense layers left float32, to find the layers
that cost int8 its accuracy. Prints figures only; the seconds are incidental (use the speed
benchmarks for timings).

--export_dir adds the served forms of the same classifier: its SavedModel (`serve_ids`, the
reference of the next rows), and the LiteRT .tflite files bert_tf.export.litert converts from it,
float32 and int8 (dynamic range), each scored one document a call as LiteRT serves, the request
cut to its real length. Then one request's p50/p99 of the three on the first test documents,
in a fresh process with one thread each (as a small serving host runs them). Prints figures
only (common.Results).
"""

import os
import re
import shutil
import sys
import tempfile

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import flags

from benchmarks import common, timing
from bert_tf.errors import UserInputError
from bert_tf.utils import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("prepare_dir", None,
                    "Only convert the Reuters TSVs (--reuters_train/--reuters_test) into the "
                    "SST-2 layout that run_classifier --task_name=sst-2 reads (train.tsv, "
                    "dev.tsv: header row, sentence<TAB>label) in this folder, then stop.")
flags.DEFINE_string("reuters_train", None,
                    "With --prepare_dir: Reuters-21578 ModApte training TSV (header "
                    "`grain corn text`, one document a row).")
flags.DEFINE_string("reuters_test", None,
                    "With --prepare_dir: the ModApte test TSV (same columns); becomes dev.tsv.")
flags.DEFINE_string("label_column", "grain",
                    "With --prepare_dir: the binary topic column that becomes the label.")
flags.DEFINE_string("checkpoint", None,
                    "The fine-tuned classifier: a run_classifier --output_dir or a checkpoint "
                    "prefix in one.")
flags.DEFINE_string("bert_config_file", None, "The model's config (as given to run_classifier).")
flags.DEFINE_string("vocab_file", None, "The model's vocabulary.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (as the fine-tuning did).")
flags.DEFINE_string("test_file", None,
                    "Labelled test set in the SST-2 layout (header row, sentence<TAB>label "
                    "0/1), e.g. the dev.tsv that --prepare_dir wrote.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per document (as the fine-tuning used).")
flags.DEFINE_integer("batch_size", 32, "Documents per predicted batch.")
flags.DEFINE_list("precisions", ["float32", "bfloat16", "int8"],
                  "Inference precisions to compare (bert_tf.utils.precision.PRECISIONS); float32 "
                  "is always run first, as the reference.")
flags.DEFINE_multi_string("int8_keep_float32", None,
                          "Also run int8 with the Dense layers whose path matches this regular "
                          "expression left float32 (e.g. 'pooler', 'output_dense', "
                          "'layer_5/'); repeat the flag for more rows. Shows which layers "
                          "cost int8 its accuracy.")
flags.DEFINE_string("export_dir", None,
                    "The classifier's SavedModel (run_classifier --export_dir of the same "
                    "run, float32): adds rows for it and for the LiteRT float32 and int8 "
                    ".tflite converted from it, and times one request of each.")
flags.DEFINE_string("litert_dir", None,
                    "With --export_dir: keep the .tflite files here (default: a temporary "
                    "folder, removed at the end).")
flags.DEFINE_integer("latency_requests", 100,
                     "With --export_dir: the test documents timed as single requests.")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too


def prepare_sst2_layout(train_file, test_file, label_column, output_dir):
  """Writes output_dir/{train,dev}.tsv (header `sentence label`) from the Reuters TSVs; returns
  {file name: (rows, positives)}. The source fields hold no tabs or newlines, so the texts are
  copied as they are."""
  from bert_tf.utils import user_files
  splits = {}
  for source, name in ((train_file, "train.tsv"), (test_file, "dev.tsv")):
    lines = [line.rstrip("\r") for line in
             user_files.read_text(source, "Reuters TSV").split("\n") if line.strip()]
    if not lines:
      raise UserInputError("Reuters TSV %s is empty." % source)
    header = lines[0].split("\t")
    if label_column not in header or "text" not in header:
      raise UserInputError("%s: header %s has no %r or 'text' column (check --label_column)." %
                           (source, header, label_column))
    label_at, text_at = header.index(label_column), header.index("text")
    rows = []
    for number, line in enumerate(lines[1:], 2):
      fields = line.split("\t")
      if len(fields) != len(header) or fields[label_at] not in ("0", "1"):
        raise UserInputError("%s line %d: expected %d tab-separated fields with a 0/1 %s." %
                             (source, number, len(header), label_column))
      rows.append((fields[text_at], fields[label_at]))
    splits[name] = rows
  os.makedirs(output_dir, exist_ok=True)
  for name, rows in splits.items():
    with open(os.path.join(output_dir, name), "w", encoding="utf-8") as writer:
      writer.write("sentence\tlabel\n")
      writer.writelines("%s\t%s\n" % row for row in rows)
  return {name: (len(rows), sum(label == "1" for _, label in rows))
          for name, rows in splits.items()}


def read_test_set(path, tokenizer, max_seq_length):
  """(features {encoder input: int32 [N, max_seq_length]}, labels int [N]) of an SST-2-layout
  file, read by run_classifier's sst-2 processor and packed as its eval packs them."""
  import numpy as np

  from bert_tf.tasks import glue
  processor = glue.Sst2Processor()
  processor.dev_file = os.path.basename(path)
  examples = processor.get_dev_examples(os.path.dirname(path) or ".")
  if not examples:
    raise UserInputError("Test file %s holds no examples (check --test_file)." % path)
  rows = [glue.convert_single_example(index, example, processor.get_labels(), max_seq_length,
                                      tokenizer) for index, example in enumerate(examples)]
  ids, mask, segments, labels, _ = (np.array(column) for column in zip(*rows))
  features = {"input_word_ids": ids.astype(np.int32), "input_mask": mask.astype(np.int32),
              "input_type_ids": segments.astype(np.int32)}
  return features, labels


def load_classifier(config, checkpoint):
  """The float32 ClassifierModel (2 labels) with every weight, head included, from `checkpoint`."""
  from bert_tf import checkpoints
  from bert_tf.tasks import glue
  model = glue.ClassifierModel(config, num_labels=2, dynamic_length=True)
  report = checkpoints.load_groups(checkpoint, model.checkpoint_groups(), config=config)
  if report.skipped_heads:
    raise UserInputError("Checkpoint %s has no %s weights: pass a fine-tuned classifier "
                         "(a run_classifier --output_dir), not a pre-trained encoder." %
                         (report.checkpoint, ", ".join(report.skipped_heads)))
  return model, report.checkpoint


def dense_layers(model):
  """The Dense layers of `model`: those bert_tf.utils.precision's int8 path quantizes."""
  import keras
  layers = model._flatten_layers(include_self=False)  # pylint: disable=protected-access
  return [layer for layer in layers if isinstance(layer, keras.layers.Dense)]


def check_keep_patterns(patterns, model):
  """Each --int8_keep_float32 is a regular expression that matches some Dense layer path."""
  paths = [layer.path for layer in dense_layers(model)]
  for pattern in patterns:
    try:
      matched = any(re.search(pattern, path) for path in paths)
    except re.error as e:
      raise UserInputError("--int8_keep_float32=%s is not a regular expression: %s." %
                           (pattern, e)) from None
    if not matched:
      raise UserInputError("--int8_keep_float32=%s matches no Dense layer (their paths: "
                           "layer_0/attention_self/query ... layer_N/output_dense, "
                           "pooler/dense)." % pattern)


def quantized_except(config, checkpoint, keep_float32):
  """The classifier with its Dense layers int8-quantized as bert_tf.utils.precision's int8 path
  does, except those whose path (e.g. `layer_5/output_dense`, `pooler/dense`) matches the
  regular expression `keep_float32`: shows which layers cost the accuracy."""
  model, _ = load_classifier(config, checkpoint)
  for layer in dense_layers(model):
    if not re.search(keep_float32, layer.path):
      layer.quantize("int8")
  return model


def predict_probabilities(model, features, batch_size):
  """([N, 2] float32 probabilities of `model` over `features`, seconds of a warm-up call on the
  first batch, seconds of the pass over all batches after it). One tf.function call a batch;
  the last batch is padded to full size (its padding rows dropped), so the function is traced
  once, in the warm-up."""
  import numpy as np
  import tensorflow as tf

  @tf.function
  def probabilities(batch):
    return tf.nn.softmax(tf.cast(model(batch, training=False), tf.float32), axis=-1)

  total = len(features["input_word_ids"])
  padding = -total % batch_size
  padded = {name: np.concatenate([values, values[:1].repeat(padding, 0)])
            for name, values in features.items()}
  batches = [{name: tf.constant(values[start:start + batch_size])
              for name, values in padded.items()} for start in range(0, total, batch_size)]
  _, warm_up = timing.timed(lambda: probabilities(batches[0]).numpy())
  outputs, seconds = timing.timed(lambda: [probabilities(batch).numpy() for batch in batches])
  return np.concatenate(outputs)[:total], warm_up, seconds


def check_export(export_dir, max_seq_length, do_lower_case):
  """The export's metadata, if it classifies 2 labels from the features this script packs."""
  from bert_tf.export import litert
  metadata = litert.read_export(export_dir)
  if metadata.get("task") != "classification" or len(metadata.get("labels", ())) != 2:
    raise UserInputError("--export_dir=%s is a %s export with labels %s; pass the 2-label "
                         "classifier's run_classifier --export_dir." %
                         (export_dir, metadata.get("task"), metadata.get("labels")))
  for name, ours in (("max_seq_length", max_seq_length), ("do_lower_case", do_lower_case)):
    if name in metadata and metadata[name] != ours:
      raise UserInputError("--export_dir=%s has %s=%s, this run --%s=%s: pass the flags the "
                           "export was made with." % (export_dir, name, metadata[name], name,
                                                      ours))
  return metadata


def savedmodel_probabilities(export_dir, features, batch_size):
  """As predict_probabilities, through the export's `serve_ids` (softmax of its logits)."""
  import numpy as np
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (the export's text signatures need its ops to load)

  from bert_tf import export
  serve = tf.saved_model.load(export_dir).signatures[export.IDS_SIGNATURE]
  total = len(features["input_word_ids"])
  batches = [{name: tf.constant(values[start:start + batch_size])
              for name, values in features.items()} for start in range(0, total, batch_size)]

  def probabilities(batch):
    return tf.nn.softmax(serve(**batch)["logits"], axis=-1).numpy()

  _, warm_up = timing.timed(lambda: probabilities(batches[0]))
  outputs, seconds = timing.timed(lambda: [probabilities(batch) for batch in batches])
  return np.concatenate(outputs), warm_up, seconds


def one_request(features, index):
  """Document `index` as one LiteRT request: [1, its real length] (the padding cut off)."""
  length = int(features["input_mask"][index].sum())
  return {name: values[index:index + 1, :length] for name, values in features.items()}


def litert_probabilities(path, features):
  """As predict_probabilities, through the .tflite at `path`, one document a call."""
  import numpy as np

  from bert_tf import export
  from bert_tf.export import litert
  runner = litert.interpreter(path).get_signature_runner(export.IDS_SIGNATURE)
  total = len(features["input_word_ids"])
  _, warm_up = timing.timed(lambda: runner(**one_request(features, 0)))
  outputs, seconds = timing.timed(lambda: [runner(**one_request(features, index))["probabilities"]
                                           for index in range(total)])
  return np.concatenate(outputs), warm_up, seconds


def convert_litert(export_dir, folder):
  """{row name: (.tflite path, MB)} of the export converted to LiteRT float32 and int8."""
  from bert_tf.export import litert
  files = {}
  for name, quantize in (("litert float32", "none"), ("litert int8", "int8")):
    path = os.path.join(folder, "classifier_%s.tflite" % quantize.replace("none", "float32"))
    conversion = litert.convert(export_dir, path, quantize=quantize)
    files[name] = (path, conversion.size_bytes / 1e6)
  return files


def single_request_latency(export_dir, files, features, requests):
  """{row name: latency_stats} of one request (the first `requests` test documents, each cut
  to its length), timed in a fresh process: the SavedModel's serve_ids and each .tflite."""
  import numpy as np
  count = min(requests, len(features["input_word_ids"]))
  with tempfile.TemporaryDirectory(prefix="precision_accuracy_") as folder:
    requests_file = os.path.join(folder, "requests.npz")
    np.savez(requests_file, **{name: values[:count] for name, values in features.items()})
    names = ["savedmodel float32"] + list(files)
    return common.run_side(
        sys.executable, "litert", "requests",
        {"requests_file": requests_file, "export_dir": export_dir,
         "files": {name: path for name, (path, _) in files.items()}, "names": names},
        env={"TF_ENABLE_ONEDNN_OPTS": "1"}, failure="timing the single requests failed")


def scores(probabilities, labels):
  """Accuracy and F1 of the positive class (label 1), both in [0, 1]."""
  predictions = probabilities.argmax(-1)
  true_positive = float(((predictions == 1) & (labels == 1)).sum())
  predicted, actual = float((predictions == 1).sum()), float((labels == 1).sum())
  f1 = 2 * true_positive / (predicted + actual) if predicted + actual else 0.0
  return float((predictions == labels).mean()), f1


def prepare(report):
  """--prepare_dir: the Reuters TSVs in the SST-2 layout, a row per file written."""
  cli.require_flags(FLAGS, "reuters_train", "reuters_test")
  counts = prepare_sst2_layout(FLAGS.reuters_train, FLAGS.reuters_test, FLAGS.label_column,
                               FLAGS.prepare_dir)
  report.settings.update(label_column=FLAGS.label_column)
  for name, (rows, positives) in counts.items():
    report.add(os.path.join(FLAGS.prepare_dir, name), {"documents": (rows, ""),
                                                       "positives": (positives, "")})
  report.report()


def main(_):
  report = common.Results("precision_accuracy")
  if FLAGS.prepare_dir:
    return prepare(report)
  cli.require_flags(FLAGS, "checkpoint", "bert_config_file", "vocab_file", "test_file")
  from bert_tf.checkpoints import checks
  from bert_tf.config import BertConfig
  from bert_tf.utils import precision
  precisions = [precision.check(p) for p in FLAGS.precisions]
  precisions = ["float32"] + [p for p in dict.fromkeys(precisions) if p != "float32"]
  config = BertConfig.from_json_file(FLAGS.bert_config_file)
  checks.check_seq_length(FLAGS.max_seq_length, config, 2)
  tokenizer = checks.checked_tokenizer(FLAGS.vocab_file, FLAGS.do_lower_case, None, config)
  features, labels = read_test_set(FLAGS.test_file, tokenizer, FLAGS.max_seq_length)
  model, checkpoint = load_classifier(config, FLAGS.checkpoint)
  check_keep_patterns(FLAGS.int8_keep_float32 or (), model)
  report.settings.update(checkpoint=checkpoint, test_documents=len(labels),
                         positives=int((labels == 1).sum()),
                         max_seq_length=FLAGS.max_seq_length, batch_size=FLAGS.batch_size)
  report.note("d_*: in points against the reference row (float32; the LiteRT rows: the "
              "SavedModel); agree: predicted labels equal to the reference's; |dp|: of P(label "
              "1); warm-up: the first batch, tracing included; run: the whole test set after it")
  runs = [(name, lambda name=name: precision.for_inference(model, name)) for name in precisions]
  for keep in FLAGS.int8_keep_float32 or ():
    runs.append(("int8 but %s" % keep, lambda keep=keep: quantized_except(
        config, FLAGS.checkpoint, keep)))
  if FLAGS.export_dir:
    check_export(FLAGS.export_dir, FLAGS.max_seq_length, FLAGS.do_lower_case)
  reference = None
  for name, make_model in runs:
    row = add_row(report, name, predict_probabilities(make_model(), features, FLAGS.batch_size),
                  labels, reference)
    reference = reference or row
  if FLAGS.export_dir:
    served_forms(report, features, labels, reference)
  report.report()


def served_forms(report, features, labels, reference):
  """The SavedModel's rows against the model's, LiteRT's against the SavedModel, and one
  request's latency of each."""
  served = add_row(report, "savedmodel float32", savedmodel_probabilities(
      FLAGS.export_dir, features, FLAGS.batch_size), labels, reference)
  folder = FLAGS.litert_dir or tempfile.mkdtemp(prefix="precision_accuracy_litert_")
  try:
    files = convert_litert(FLAGS.export_dir, folder)
    for name, (path, _) in files.items():
      add_row(report, name, litert_probabilities(path, features), labels, served)
    latency = single_request_latency(FLAGS.export_dir, files, features, FLAGS.latency_requests)
  finally:
    if not FLAGS.litert_dir:
      shutil.rmtree(folder, ignore_errors=True)
  lengths = latency.pop("lengths")
  report.note("LiteRT rows: against the SavedModel float32, one document a call, cut to its "
              "length. One request rows: 1 thread each, in a fresh process; the first %d test "
              "documents, %d-%d tokens, median %d" %
              (len(lengths), lengths[0], lengths[-1], lengths[len(lengths) // 2]))
  sizes = {name: size for name, (_, size) in files.items()}
  for name, stats in latency.items():
    report.add("one request, " + name, {"p50": (stats["p50_ms"], "ms"),
                                        "p99": (stats["p99_ms"], "ms"),
                                        "size": (sizes.get(name), "MB")})


def add_row(report, name, row, labels, reference):
  """Adds one row, (probabilities, warm-up s, run s), against `reference` (another row's return
  value; None: itself), and a note for each document whose label it changed; returns (name,
  probabilities, accuracy, F1)."""
  import numpy as np
  probabilities, warm_up, seconds = row
  this = (name, probabilities) + scores(probabilities, labels)
  reference_name, reference_probabilities, reference_accuracy, reference_f1 = reference or this
  delta = np.abs(probabilities[:, 1] - reference_probabilities[:, 1])
  changed = np.flatnonzero(probabilities.argmax(-1) != reference_probabilities.argmax(-1))
  report.add(name, {
      "accuracy": (this[2], ""), "F1": (this[3], ""),
      "d_acc": (100 * (this[2] - reference_accuracy), "pt"),
      "d_F1": (100 * (this[3] - reference_f1), "pt"),
      "agree": (100 * (1 - len(changed) / len(labels)), "%"),
      "max |dp|": (float(delta.max()), ""), "mean |dp|": (float(delta.mean()), ""),
      "warm-up": (warm_up, "s"), "run": (seconds, "s")}, {"reference": reference_name})
  for index in changed:  # how close to the boundary the reference was where the label changed
    report.note("%s changes document %d (label %d): P(1) %.4f in %s, %.4f here" %
                (name, index + 1, labels[index], reference_probabilities[index, 1],
                 reference_name, probabilities[index, 1]))
  return this


if __name__ == "__main__":
  cli.run(main)
