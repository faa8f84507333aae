"""SavedModel export of a run_squad model: question and context in, the answer span out.

The graph reproduces run_squad's prediction path with tensor ops: the windows of
`graph_features`, the encoder over them in chunks, and write_predictions' choice of
the best span in `graph_postprocess`; this module builds and saves the signatures.
"""

import tensorflow as tf

from bert_tf import export
from bert_tf.checkpoints import checks
from bert_tf.errors import UserInputError
from bert_tf.tasks.squad import graph_features, graph_postprocess

# Windows per encoder call in serving_default: bounds the memory of one request
# with a very long context (the windows are run in a loop of such chunks).
SQUAD_WINDOW_BATCH = 64


def _check_int_at_least(name, value, minimum):
  if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
    raise UserInputError("%s=%r must be an integer >= %d." % (name, value, minimum))


def export_squad(export_dir, model, vocab_file, do_lower_case, max_seq_length, doc_stride,
                 max_query_length, max_answer_length, n_best_size=20,
                 version_2_with_negative=False, overwrite=False,
                 window_batch_size=SQUAD_WINDOW_BATCH, strip_accents=None):
  """Exports a run_squad model that answers questions about raw text.

  Args:
    export_dir: destination folder (see `save_serving_module`).
    model: bert_tf.tasks.squad.SquadModel.
    vocab_file: vocab.txt of the checkpoint; its content is embedded.
    do_lower_case, strip_accents: as used for training.
    max_seq_length, doc_stride, max_query_length: windowing, as in run_squad.
    max_answer_length, n_best_size: span selection, as in write_predictions.
    version_2_with_negative: SQuAD 2.0 model (adds the null answer).
    overwrite: replace an existing non-empty export_dir.
    window_batch_size: windows per encoder call in serving_default (memory bound
      for long contexts; does not change the answers).

  Signatures:
    serving_default: question, context string [batch] (one pair per row) ->
      answer string [batch], a substring of the context: from the first
      character of the word holding the chosen start piece to the last
      character of the word holding the end piece (the original's "orig_doc"
      text, kept with the context's own whitespace);
      score float32 [batch]: start_logit + end_logit of that span;
      start_char, end_char int32 [batch]: code point offsets into the context
      (end exclusive), so context[start_char:end_char] == answer;
      v2 also null_score float32 [batch] and is_impossible bool [batch]: when the
      null answer wins, answer is "" and the offsets are -1, and score stays
      the best span's, so null_score - score is the original's null_odds value.
      A row without any candidate span (an empty context, or none of the
      n_best_size best starts and ends form a valid span: the original's
      "empty" nonce in v1, a crash in v2) gets "", -1 and score 0.0; in v2
      is_impossible True, and null_score 0.0 if the row has no window.
    serve_ids: input_word_ids, input_mask, input_type_ids int32 [batch, seq] ->
      start_logits, end_logits float32 [batch, seq].

  Differences from run_squad's predictions.json: the original then trims the
  word-level text to the predicted pieces with get_final_text (e.g. "1895" out
  of "(1895-1943)."), which is not done in the graph; so the served answer
  equals the original's prediction when the predicted span starts and ends on
  context word boundaries, and otherwise contains it. Words inside the span are
  joined by the context's whitespace, not by single spaces. Invalid UTF-8 bytes
  are dropped before anything else (offsets index the context without them).
  All valid (start, end) pairs among the n_best_size best starts and ends are
  searched, as in the original.

  Returns export_dir.
  """
  export.check_export_dir(export_dir, overwrite)
  _check_int_at_least("max_query_length", max_query_length, 0)
  _check_int_at_least("doc_stride", doc_stride, 1)
  _check_int_at_least("max_answer_length", max_answer_length, 1)
  _check_int_at_least("n_best_size", n_best_size, 1)
  _check_int_at_least("window_batch_size", window_batch_size, 1)
  checks.check_seq_length(max_seq_length, model.config, 3, flag="max_seq_length")
  if max_seq_length <= max_query_length + 3:
    raise UserInputError("The max_seq_length (%d) must be greater than max_query_length "
                         "(%d) + 3." % (max_seq_length, max_query_length))
  tokenizer = export.make_tokenizer(vocab_file, do_lower_case, strip_accents)
  if tokenizer.cls_id is None or tokenizer.sep_id is None:
    raise UserInputError("The vocabulary lacks [CLS] or [SEP]; it cannot pack inputs.")
  module = export.ServingModule(tokenizer, [model])
  v2 = bool(version_2_with_negative)

  def logits_of(features):
    outputs = model(features, training=False)
    return tf.cast(outputs["start_logits"], tf.float32), tf.cast(outputs["end_logits"], tf.float32)

  def window_logits(windows):
    """Start and end logits of all windows, window_batch_size windows per call."""
    ids, mask, types = (windows[k] for k in export.IDS_INPUTS)
    total = tf.shape(ids)[0]
    chunks = (total + window_batch_size - 1) // window_batch_size

    def body(i, starts, ends):
      rows = tf.range(i * window_batch_size, tf.minimum((i + 1) * window_batch_size, total))
      start, end = logits_of({"input_word_ids": tf.gather(ids, rows),
                              "input_mask": tf.gather(mask, rows),
                              "input_type_ids": tf.gather(types, rows)})
      return i + 1, starts.write(i, start), ends.write(i, end)

    def array():
      return tf.TensorArray(tf.float32, size=chunks, infer_shape=False,
                            element_shape=[None, max_seq_length])

    _, starts, ends = tf.while_loop(lambda i, *_: i < chunks, body,
                                    (tf.constant(0), array(), array()),
                                    parallel_iterations=1)
    return starts.concat(), ends.concat()

  def from_text(question, context):
    windows = graph_features.squad_windows(module.tokenizer, question, context,
                                           max_seq_length, doc_stride, max_query_length)
    start_logits, end_logits = window_logits(windows)
    best = graph_postprocess.squad_best_spans(windows, start_logits, end_logits, n_best_size,
                                              max_answer_length, v2)
    answered = best["has_span"]
    if v2:
      answered = tf.logical_and(answered, tf.logical_not(best["is_impossible"]))
    start_char = graph_features.safe_gather(windows["word_begin"], best["start_word"], -1)
    end_char = graph_features.safe_gather(windows["word_end"], best["end_word"], -1)
    start_char = tf.cast(tf.where(answered, start_char, -1), tf.int32)
    end_char = tf.cast(tf.where(answered, end_char, -1), tf.int32)
    answer = tf.strings.substr(windows["context"], tf.maximum(start_char, 0),
                               tf.maximum(end_char - start_char, 0), unit="UTF8_CHAR")
    outputs = {"answer": answer, "score": tf.cast(best["score"], tf.float32),
               "start_char": start_char, "end_char": end_char}
    if v2:
      outputs["null_score"] = tf.cast(best["null_score"], tf.float32)
      outputs["is_impossible"] = best["is_impossible"]
    return outputs

  def from_ids(input_word_ids, input_mask, input_type_ids):
    start, end = logits_of(export.checked_ids(input_word_ids, input_mask, input_type_ids,
                                              model.config))
    return {"start_logits": start, "end_logits": end}

  signatures = {
      export.DEFAULT_SIGNATURE: export.serving_function(
          from_text, [export.text_spec("question"), export.text_spec("context")]),
      export.IDS_SIGNATURE: export.serving_function(from_ids, export.ids_specs()),
  }
  metadata = {
      "task": "squad",
      "version_2_with_negative": v2,
      "null_score_diff_threshold": 0.0 if v2 else None,
      "max_seq_length": max_seq_length,
      "doc_stride": doc_stride,
      "max_query_length": max_query_length,
      "max_answer_length": max_answer_length,
      "n_best_size": n_best_size,
      "answer_text": "word-level context span (no get_final_text trimming)",
  }
  return export.save_serving_module(export_dir, module, signatures, metadata,
                                    overwrite=overwrite)
