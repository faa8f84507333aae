"""SavedModel export of a run_classifier model: raw text in, labels and probabilities out."""

import tensorflow as tf

from bert_tf import checks, export
from bert_tf.errors import UserInputError


def export_classifier(export_dir, model, vocab_file, do_lower_case, max_seq_length, label_list,
                      text_pair, overwrite=False, strip_accents=None):
  """Exports a ClassifierModel (classification, or regression with one output).

  Args:
    export_dir: destination folder (see `export.save_serving_module`).
    model: bert_tf.tasks.glue.ClassifierModel.
    vocab_file: vocab.txt of the checkpoint; its content is embedded.
    do_lower_case, strip_accents: as used for training.
    max_seq_length: packed length of raw-text inputs.
    label_list: label strings in label-id order, or None for regression (then the
      model must have one output).
    text_pair: whether the task takes sentence pairs (adds the `text_b` input).
    overwrite: replace an existing non-empty export_dir.

  Signatures:
    serving_default: text_a (and text_b) string [batch] -> classification:
      probabilities float32 [batch, num_labels], label_ids int32 [batch], labels
      string [batch]; regression: predictions float32 [batch].
    serve_ids: input_word_ids, input_mask, input_type_ids int32 [batch, seq] ->
      logits float32 [batch, num_labels] (and predictions for regression).

  Returns export_dir.
  """
  num_labels = model.classifier.num_labels
  regression = label_list is None
  if regression and num_labels != 1:
    raise UserInputError("A regression export (label_list=None) needs a head with one "
                         "output, got num_labels=%d." % num_labels)
  if not regression:
    label_list = [str(label) for label in label_list]
    if len(label_list) != num_labels:
      raise UserInputError("label_list has %d labels but the head has num_labels=%d."
                           % (len(label_list), num_labels))
  export.check_export_dir(export_dir, overwrite)
  text_pair = bool(text_pair)
  checks.check_seq_length(max_seq_length, model.config, 3 if text_pair else 2,
                         flag="max_seq_length")
  tokenizer = export.make_tokenizer(vocab_file, do_lower_case, strip_accents)
  module = export.ServingModule(tokenizer, [model])

  def logits_of(features):
    return tf.cast(model(features, training=False), tf.float32)

  def answer(logits):
    if regression:
      return {"predictions": logits[:, 0]}
    label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "label_ids": label_ids,
            "labels": tf.gather(tf.constant(label_list), label_ids)}

  def from_text(text_a, text_b=None):
    return answer(logits_of(module.tokenizer.encode(text_a, text_b, seq_length=max_seq_length)))

  def from_ids(input_word_ids, input_mask, input_type_ids):
    logits = logits_of(export.checked_ids(input_word_ids, input_mask, input_type_ids,
                                          model.config))
    outputs = {"logits": logits}
    if regression:
      outputs["predictions"] = logits[:, 0]
    return outputs

  if text_pair:
    serve_text = export.serving_function(from_text, [export.text_spec("text_a"),
                                                     export.text_spec("text_b")])
  else:

    def from_single_text(text_a):
      return from_text(text_a)

    serve_text = export.serving_function(from_single_text, [export.text_spec("text_a")])
  signatures = {export.DEFAULT_SIGNATURE: serve_text,
                export.IDS_SIGNATURE: export.serving_function(from_ids, export.ids_specs())}
  metadata = {
      "task": "regression" if regression else "classification",
      "labels": label_list,
      "num_labels": num_labels,
      "max_seq_length": max_seq_length,
      "dynamic_length": model.dynamic_length,
      "text_pair": text_pair,
  }
  return export.save_serving_module(export_dir, module, signatures, metadata,
                                    overwrite=overwrite)
