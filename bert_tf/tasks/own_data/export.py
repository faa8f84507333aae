"""SavedModel export of a model trained on the user's own file: raw text in, label names out.

single_label and regression are run_classifier's GLUE export (`labels`, `label_ids`,
`probabilities`; `predictions`). multi_label answers each label's sigmoid probability and the
names over the threshold, the same names predictions.jsonl lists for the row. With windows
(--long_document=windows) a long text is read as run_classifier reads it: its windows cut
in-graph and their logits pooled (glue/export.py), each label's on its own for multi_label.
"""

import tensorflow as tf

from bert_tf import export
from bert_tf.checkpoints import checks
from bert_tf.tasks.glue import windows as glue_windows
from bert_tf.tasks.glue.export import export_classifier, windowed_logits


def export_own_data(export_dir, model, vocab_file, do_lower_case, max_seq_length, schema,
                    text_pair, threshold=0.5, strip_accents=None, windows=None):
  """Exports an OwnDataModel of `schema` (labels.Schema); `windows`: a glue.WindowOptions to
  read long texts as run_classifier --long_document=windows does (None truncates).

  Signatures (multi_label; the others as glue's `export_classifier`):
    serving_default: text_a (and text_b) string [batch] -> probabilities float32
      [batch, labels] (sigmoid), predicted int32 [batch, labels] (1 over `threshold`),
      labels string [batch, labels]: the names over the threshold in label order, then ""s.
    serve_ids: input_word_ids, input_mask, input_type_ids int32 [batch, seq] -> logits.
  """
  if schema.problem_type != "multi_label":
    return export_classifier(export_dir, model, vocab_file, do_lower_case, max_seq_length,
                             schema.labels if schema.problem_type == "single_label" else None,
                             text_pair, strip_accents=strip_accents, windows=windows)
  export.check_export_dir(export_dir)
  min_length = glue_windows.min_seq_length(text_pair) if windows else 3 if text_pair else 2
  checks.check_seq_length(max_seq_length, model.config, min_length, flag="max_seq_length")
  if windows:
    checks.check_positive("doc_stride", windows.doc_stride)
  tokenizer = export.make_tokenizer(vocab_file, do_lower_case, strip_accents)
  module = export.ServingModule(tokenizer, [model])
  names = tf.constant(list(schema.labels))

  def logits_of(features):
    return tf.cast(model(features, training=False), tf.float32)

  def from_text(text_a, text_b=None):
    if windows:
      logits = windowed_logits(module.tokenizer, text_a, text_b, max_seq_length, windows,
                               logits_of, multi_label=True)
    else:
      logits = logits_of(module.tokenizer.encode(text_a, text_b, seq_length=max_seq_length))
    probabilities = tf.sigmoid(logits)
    predicted = tf.cast(probabilities > threshold, tf.int32)
    # The chosen labels first, in label order: a stable sort of the rows' 1s before their 0s.
    order = tf.argsort(-predicted, axis=-1, stable=True)
    chosen = tf.gather(predicted, order, batch_dims=1)
    labels = tf.where(chosen > 0, tf.gather(names, order), tf.constant(""))
    return {"probabilities": probabilities, "predicted": predicted, "labels": labels}

  def from_ids(input_word_ids, input_mask, input_type_ids):
    return {"logits": logits_of(export.checked_ids(input_word_ids, input_mask, input_type_ids,
                                                   model.config))}

  if text_pair:
    serve_text = export.serving_function(from_text, [export.text_spec("text_a"),
                                                     export.text_spec("text_b")])
  else:
    serve_text = export.serving_function(lambda text_a: from_text(text_a),
                                         [export.text_spec("text_a")])
  signatures = {export.DEFAULT_SIGNATURE: serve_text,
                export.IDS_SIGNATURE: export.serving_function(from_ids, export.ids_specs())}
  metadata = {"task": "multi_label", "labels": list(schema.labels),
              "num_labels": len(schema.labels), "threshold": threshold,
              "max_seq_length": max_seq_length, "dynamic_length": model.dynamic_length,
              "text_pair": bool(text_pair)}
  if windows:
    metadata.update(long_document="windows", doc_stride=windows.doc_stride,
                    window_pooling=windows.pooling)
    if windows.no_label:
      metadata["window_no_label"] = schema.labels[windows.no_label]
  return export.save_serving_module(export_dir, module, signatures, metadata)
