"""run_classifier's --long_document=windows: a long example read whole, as several windows.

The original truncates every example to max_seq_length (its tasks are short); a long
document then counts only by its first pieces. The same windows serve the GLUE tasks and the
user's own files (own_data, run_classifier --train_file...), whose multi-label runs pool each
label on its own (`label_pooling`). Here text_a is cut into windows of what
fits, `doc_stride` apart, by the rule of run_squad's and run_ner's windows
(`packing.doc_spans_for`); each window is a record of the truncate layout with the
example's label, and an example's prediction pools its windows' logits: their mean, their
max per label, or `any`: the window least likely to be the "no" label decides, so a yes/no
task (a topic) says yes when any window does. The "no" is the first label, or for your own
files the run's presence label (own_data.labels: the majority label of a two-label file
where it holds most rows), and then `any` is the default.

Training reads a document one of three ways (`TRAINING_RULES`):
* `first` (the default): its first window, the record truncate writes, so training is
  truncate's, records and steps; only evaluation, prediction and the export read every
  window. Of the three it lost least against truncate on every setting measured
  (docs/runners.md), at truncate's cost.
* `document`: a record per document holds its first `max_train_windows` windows (empty
  windows pad the rest); the model pools their logits as prediction does
  (ClassifierModel) and the loss is the document's, so a document is right when its
  pooled answer is (multiple-instance learning). A batch is documents.
* `window`: every window is a training example carrying its document's label (the first
  rule; for a label named in one part of the document, most positive windows are noise).

Pairs keep text_b in every window: `[CLS] window of a [SEP] b [SEP]`. When text_b would
leave text_a less than half of the max_seq_length - 3 pieces, text_b is cut at its end
to what that half leaves (`window_room`). An example that fits is one window, the very
record truncate writes. The export applies the same rule in-graph (glue/export.py).
"""

import dataclasses

import numpy as np

from bert_tf.checkpoints import checks
from bert_tf.data import packing
from bert_tf.errors import UserInputError
from bert_tf.tasks.glue.features import label_id_of

MODES = ("truncate", "windows")
POOLINGS = ("mean", "max", "any")
TRAINING_RULES = ("first", "document", "window")
DEFAULT_DOC_STRIDE = 128  # run_squad's and run_ner's default
DEFAULT_POOLING = "mean"
DEFAULT_TRAINING = "first"
DEFAULT_MAX_TRAIN_WINDOWS = 8
FLAGS = ("doc_stride", "window_pooling", "window_training", "max_train_windows")


@dataclasses.dataclass(frozen=True)
class WindowOptions:
  """How long examples become windows, how training reads them (`training`: one of
  TRAINING_RULES; `max_train_windows`: the windows a training document keeps with
  `document`) and how their logits make one prediction."""
  doc_stride: int = DEFAULT_DOC_STRIDE
  pooling: str = DEFAULT_POOLING
  training: str = DEFAULT_TRAINING
  max_train_windows: int = DEFAULT_MAX_TRAIN_WINDOWS
  no_label: int = 0  # `any`'s "no": the label a window must be least likely to be

  @property
  def by_document(self):
    return self.training == "document"

  @property
  def trains_truncated(self):
    """Training reads truncate's records (`first`)."""
    return self.training == "first"


def window_options(f, multi_label=False, presence=None):
  """The WindowOptions of run_classifier's windows flags `f` (None with
  --long_document=truncate), unchecked (check_flags says what is wrong with them).

  A run that reads as presence pools by `any` unless told otherwise: multi-label (a label is
  present when a window says so), and a single-label run with a presence label (`presence`:
  its index, own_data.labels.presence_label), whose `any` reads that label as the "no". Both
  beat truncate on Reuters topics where mean lost; on a balanced yes/no set mean won
  (docs/runners.md). The others pool by mean, and their `any` reads the first label as the
  "no"."""
  if f.long_document != "windows":
    return None
  return WindowOptions(
      DEFAULT_DOC_STRIDE if f.doc_stride is None else f.doc_stride,
      f.window_pooling or ("any" if multi_label or presence is not None else DEFAULT_POOLING),
      f.window_training or DEFAULT_TRAINING,
      DEFAULT_MAX_TRAIN_WINDOWS if f.max_train_windows is None else f.max_train_windows,
      presence or 0)


def check_flags(f, options, what, text_pair, regression=False, multi_label=False):
  """Checks run_classifier's windows flags `f` against the run's `options`; `what` names the
  data in an error (a GLUE task, or your file), `text_pair`: it reads pairs, `regression`: it
  has no labels (the GLUE tasks' and your own files' one check of these flags)."""
  if f.long_document != "windows":
    for name in FLAGS:
      if getattr(f, name) is not None:
        raise UserInputError("--%s=%s is for --long_document=windows; drop it or add "
                             "--long_document=windows." % (name, getattr(f, name)))
    return
  windows = window_options(f, multi_label)
  if f.max_train_windows is not None and not windows.by_document:
    raise UserInputError("--max_train_windows=%d is for --window_training=document; drop "
                         "it." % f.max_train_windows)
  checks.check_positive("doc_stride", windows.doc_stride)
  checks.check_positive("max_train_windows", windows.max_train_windows)
  if windows.by_document and options.do_train and (
      options.jit_compile or options.strategy == "tpu"):
    raise UserInputError("--window_training=document runs each batch's real windows only, a "
                         "count that changes from batch to batch, which %s cannot compile; "
                         "drop %s or add --window_training=first." % (
                             ("XLA", "--jit_compile") if options.jit_compile else
                             ("a TPU", "--use_tpu")))
  if regression and windows.pooling == "any":
    raise UserInputError("--window_pooling=any picks the window least likely to be the first "
                         "label, and %s has no labels (regression); use mean or max." % what)
  if text_pair and options.max_seq_length < min_seq_length(text_pair):
    raise UserInputError("--max_seq_length=%d leaves no room for a window of text_a beside "
                         "text_b ([CLS] a [SEP] b [SEP]); --long_document=windows on %s needs "
                         "at least %d." % (options.max_seq_length, what,
                                           min_seq_length(text_pair)))


# Below this many training steps windows lost to truncate with every rule and pooling measured
# (docs/runners.md: a balanced 206-article set, one epoch of 16).
FEW_STEPS = 50


# A run's presence label not worked out (the GLUE tasks: their labels' shares are not read).
UNKNOWN = "unknown"


def risks(windows, train_steps, regression, multi_label=False, presence=UNKNOWN):
  """What the measurements in docs/runners.md say may make these windows lose to truncate:
  the log's warnings for a training run (`presence`: the index of the run's presence label,
  None when it has none, UNKNOWN when not worked out)."""
  found = []
  if not (regression or multi_label or presence == UNKNOWN):
    if presence is not None and windows.pooling != "any":
      found.append("--window_pooling=%s on a yes/no file whose 'no' holds most rows: on such "
                   "topics windows pooled so lost to truncate (Reuters corn F1 0.45 against "
                   "0.59), and any, the default here, gained (0.85)." % windows.pooling)
    if presence is None and windows.pooling == "any":
      found.append("--window_pooling=any with no label holding most rows: on a balanced "
                   "yes/no set any lost to truncate by 1-4 points of accuracy, and mean, the "
                   "default here, by 0.5.")
  if train_steps < FEW_STEPS:
    found.append("%d training steps: below %d, windows lost to truncate with every rule and "
                 "pooling measured (by 0.5-2 points of accuracy)." % (train_steps, FEW_STEPS))
  return found


def min_seq_length(text_pair):
  """The least max_seq_length that gives text_a (and text_b, for pairs) a piece per window."""
  return 5 if text_pair else 3


def window_room(len_a, len_b, max_seq_length):
  """(pieces of text_a per window, pieces of text_b kept) for texts of these lengths.

  text_a keeps at least half of the room (rounded up), or all of itself if shorter; text_b
  takes the rest. When both fit, text_b is kept whole and text_a's one window holds it all.
  """
  if not len_b:
    return max_seq_length - 2, 0
  room = max_seq_length - 3
  keep_b = min(len_b, room - min(len_a, (room + 1) // 2))
  return room - keep_b, keep_b


def _spans(example, max_seq_length, tokenizer, doc_stride):
  """(text_a's pieces, text_b's kept pieces, the windows over text_a's pieces)."""
  tokens_a = tokenizer.tokenize(example.text_a)
  tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else []
  per_window, keep_b = window_room(len(tokens_a), len(tokens_b), max_seq_length)
  spans = packing.doc_spans_for(len(tokens_a), per_window, doc_stride)
  return tokens_a, tokens_b[:keep_b], spans or [packing.DocSpan(0, 0)]  # empty a: one window


def count_windows(example, max_seq_length, tokenizer, doc_stride):
  return len(_spans(example, max_seq_length, tokenizer, doc_stride)[2])


def window_inputs(example, max_seq_length, tokenizer, doc_stride):
  """(input_ids, input_mask, segment_ids) of each window of `example` (anything with text_a
  and text_b), in order."""
  tokens_a, tokens_b, spans = _spans(example, max_seq_length, tokenizer, doc_stride)
  windows = []
  for span in spans:
    packed = packing.pack_tokens(tokens_a[span.start:span.start + span.length], tokens_b,
                                 max_seq_length, tokenizer)
    windows.append((packed.input_ids, packed.input_mask, packed.segment_ids))
  return windows


def example_windows(example, label_list, max_seq_length, tokenizer, doc_stride):
  """convert_single_example's feature tuples of each window of `example`, in order."""
  label_id = label_id_of(example, label_list)
  return [(*inputs, label_id, 1)
          for inputs in window_inputs(example, max_seq_length, tokenizer, doc_stride)]


def document_inputs(windows, max_seq_length, max_windows):
  """(input_ids, input_mask, segment_ids) of a training document from its `windows`' (each
  starting with those three): the first `max_windows` end to end, empty (all-zero) windows
  after its last."""
  kept = windows[:max_windows]
  empty = [0] * max_seq_length
  return tuple([value for window in kept for value in window[part]] +
               empty * (max_windows - len(kept)) for part in range(3))


def document_features(example, label_list, max_seq_length, tokenizer, doc_stride, max_windows):
  """(feature tuple, windows the document has): its first `max_windows` windows end to end,
  empty (all-zero) windows after its last (input_ids, input_mask, segment_ids of
  max_windows * max_seq_length: glue.feature_spec of that length), the label once,
  is_real_example."""
  windows = example_windows(example, label_list, max_seq_length, tokenizer, doc_stride)
  flat = document_inputs(windows, max_seq_length, max_windows)
  return (*flat, windows[0][3], 1), len(windows)


def describe(counts, max_windows=None):
  """The log's account of the windows: how many examples were long, and what they gave
  (with `max_windows`, a training document's cap: how many documents it cut)."""
  counts = np.asarray(counts, np.int64)
  long = counts > 1
  text = "%d examples, %d windows (%d examples longer than a window gave %d of them)" % (
      len(counts), counts.sum(), long.sum(), counts[long].sum())
  if max_windows:
    cut = counts > max_windows
    text += "; %d documents have more than %d windows and train on their first %d" % (
        cut.sum(), max_windows, max_windows)
  return text


def label_pooling(pooling, multi_label=False):
  """The pooling applied to the logits. A multi-label run's labels are each a yes/no of their
  own (a sigmoid each, no first label to be least likely): `any`, a label predicted when any
  window predicts it, is the max of each label's logit. This rule serves `pool`, the training
  pooling (model.pool_windows) and the export's (export.windowed_logits) alike."""
  return "max" if multi_label and pooling == "any" else pooling


def pool(values, counts, pooling, multi_label=False, no_label=0):
  """Per example, the mean or max of its windows' rows of `values`, or (`any`) the row of the
  window with the lowest probability of the label `no_label`, the earliest on a tie (windows
  in example order, `counts[i]` of them for example i, each at least 1); `multi_label`: each
  label's logit on its own (`label_pooling`)."""
  values = np.asarray(values)
  pooling = label_pooling(pooling, multi_label)
  starts = np.cumsum(counts) - counts
  if pooling == "any":
    first = values[:, no_label] - np.logaddexp.reduce(values, axis=-1)
    example = np.repeat(np.arange(len(counts)), counts)
    return values[np.lexsort((first, example))[starts]]
  if pooling == "max":
    return np.maximum.reduceat(values, starts, axis=0)
  sums = np.add.reduceat(values, starts, axis=0)
  return (sums / np.reshape(counts, (-1,) + (1,) * (values.ndim - 1))).astype(values.dtype)


def softmax(logits):
  shifted = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
  return shifted / np.sum(shifted, axis=-1, keepdims=True)


def example_metrics(pooled, labels, regression):
  """eval_loss (and eval_accuracy) of the pooled logits, as the original's metric_fn takes
  them per example: the mean cross-entropy (squared error for regression) and accuracy."""
  pooled = np.asarray(pooled, np.float64)
  if regression:
    return {"eval_loss": float(np.mean((pooled - labels) ** 2))}
  shifted = pooled - np.max(pooled, axis=-1, keepdims=True)
  log_probabilities = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
  picked = np.take_along_axis(log_probabilities, labels[:, None], axis=-1)[:, 0]
  return {"eval_loss": float(-np.mean(picked)),
          "eval_accuracy": float(np.mean(np.argmax(pooled, axis=-1) == labels))}
