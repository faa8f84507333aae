"""SavedModel export of a run_swag model: a context and four endings in, probabilities out."""

import tensorflow as tf

from bert_tf import export
from bert_tf.checkpoints import checks
from bert_tf.tasks.swag.data import NUM_CHOICES


def _per_example(features):
  """[batch * NUM_CHOICES, seq] rows (choice-major) -> the model's [batch, NUM_CHOICES, seq]."""
  return {k: tf.reshape(v, [-1, NUM_CHOICES, tf.shape(v)[-1]]) for k, v in features.items()}


def export_swag(export_dir, model, vocab_file, do_lower_case, max_seq_length, overwrite=False,
                strip_accents=None):
  """Exports a MultipleChoiceModel.

  Signatures:
    serving_default: context, ending0..ending3 string [batch] -> probabilities
      float32 [batch, 4], label_ids int32 [batch] (the most likely ending).
    serve_ids: input_word_ids, input_mask, input_type_ids int32 [batch * 4, seq]
      (choice-major within each example) -> logits float32 [batch, 4].
  Each choice is packed like run_swag: `[CLS] context [SEP] ending_i [SEP]`.
  """
  export.check_export_dir(export_dir, overwrite)
  checks.check_seq_length(max_seq_length, model.config, 3, flag="max_seq_length")
  tokenizer = export.make_tokenizer(vocab_file, do_lower_case, strip_accents)
  module = export.ServingModule(tokenizer, [model])

  def scores_of(features):
    return tf.cast(model(_per_example(features), training=False), tf.float32)

  def from_text(context, *endings):
    # Rows of all choices, choice-major per example: [batch, choices] -> [batch * choices].
    contexts = tf.reshape(tf.repeat(context[:, None], NUM_CHOICES, axis=1), [-1])
    flat_endings = tf.reshape(tf.stack(endings, axis=1), [-1])
    with model.packing_tokens():
      logits = scores_of(module.tokenizer.encode(contexts, flat_endings,
                                                 seq_length=max_seq_length))
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "label_ids": tf.argmax(logits, axis=-1, output_type=tf.int32)}

  def from_ids(input_word_ids, input_mask, input_type_ids):
    return {"logits": scores_of(export.checked_ids(input_word_ids, input_mask, input_type_ids,
                                                   model.config))}

  names = ["context"] + ["ending%d" % i for i in range(NUM_CHOICES)]
  serve_text = export.serving_function(from_text, [export.text_spec(name) for name in names])
  signatures = {export.DEFAULT_SIGNATURE: serve_text,
                export.IDS_SIGNATURE: export.serving_function(from_ids, export.ids_specs())}
  metadata = {"task": "multiple_choice", "num_choices": NUM_CHOICES,
              "max_seq_length": max_seq_length, "dynamic_length": model.dynamic_length}
  return export.save_serving_module(export_dir, module, signatures, metadata,
                                    overwrite=overwrite)
