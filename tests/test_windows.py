"""The in-graph windows and max-context rule (bert_tf/text/windows.py) against the Python ones
of bert_tf/data/packing.py, on many random documents and the edge cases."""

import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import packing
from bert_tf.text import windows as text_windows

# (tokens, max_tokens, stride): empty, exactly one window, one token over, stride over the
# window, stride equal to it, stride 1, windows of one token.
EDGES = [(0, 5, 2), (0, 1, 1), (5, 5, 2), (6, 5, 2), (7, 5, 9), (12, 5, 5), (9, 4, 1),
         (4, 1, 1), (1, 1, 3), (1, 300, 128), (300, 300, 1), (301, 300, 300), (37, 10, 3)]


def _random_rows(seed, count):
  rng = random.Random(seed)
  rows = []
  for _ in range(count):
    max_tokens = rng.choice([1, 2, 3, 7, 16, 61, 126, 300, rng.randint(1, 320)])
    stride = rng.choice([1, 2, max_tokens // 2 or 1, max_tokens, max_tokens + 5,
                         rng.randint(1, 2 * max_tokens)])
    tokens = rng.choice([0, max_tokens, max_tokens + 1, rng.randint(0, 300)])
    rows.append((tokens, max_tokens, stride))
  return rows


def _python_owner(spans, position):
  """The window that check_is_max_context says owns `position`, -1 if none; only windows
  holding it are asked (any other says False), to keep the test quick."""
  holders = [i for i, s in enumerate(spans) if s.start <= position < s.start + s.length]
  return next((i for i in holders if packing.check_is_max_context(spans, i, position)), -1)


def _check(rows, stride_per_row, at_least_one=False):
  """doc_windows and max_context_window of a batch of `rows` equal the Python functions."""
  tokens, max_tokens, strides = (np.array(column, np.int64) for column in zip(*rows))
  if not stride_per_row:  # One stride for the batch, as the NER export passes it.
    strides = strides[:1]
  windows = text_windows.doc_windows(tf.constant(tokens), tf.constant(max_tokens),
                                     tf.constant(strides if stride_per_row else strides[0]),
                                     at_least_one)
  want_windows, queries, want_owner, first = [], [], [], 0
  for row, (n, max_length, _) in enumerate(rows):
    spans = packing.doc_spans_for(int(n), int(max_length),
                                  int(strides[row] if stride_per_row else strides[0]))
    if not spans and at_least_one:
      spans_got = [packing.DocSpan(0, 0)]
    else:
      spans_got = spans
    want_windows += [(row, s.start, s.length) for s in spans_got]
    for position in list(range(-2, n + 2)):
      queries.append((row, position))
      owner = _python_owner(spans, position)
      want_owner.append(-1 if owner < 0 else first + owner)
    first += len(spans_got)
  got_windows = list(zip(*(t.numpy().tolist() for t in windows)))
  assert got_windows == want_windows
  query = tf.constant(queries, tf.int64)
  owner = text_windows.max_context_window(windows, query[:, 0], query[:, 1])
  assert owner.dtype == tf.int64
  mismatches = [(q, g, w) for q, g, w in zip(queries, owner.numpy().tolist(), want_owner)
                if g != w]
  assert not mismatches, mismatches[:5]


@pytest.mark.parametrize("stride_per_row", [True, False])
def test_edge_cases_match_python(stride_per_row):
  rows = EDGES if stride_per_row else [(n, m, 2) for n, m, _ in EDGES]
  _check(rows, stride_per_row)


@pytest.mark.parametrize("seed", range(4))
def test_random_documents_match_python(seed):
  _check(_random_rows(seed, 150), stride_per_row=True)


def test_at_least_one_window_per_row():
  """An empty row gets one window of length 0, which holds no token."""
  _check([(0, 4, 2), (9, 4, 2), (0, 4, 2), (3, 4, 2)], stride_per_row=True, at_least_one=True)


def test_shapes_and_graph_mode():
  """2-D positions with a broadcast row, an empty batch, and inside a tf.function."""

  @tf.function
  def owners(tokens, max_tokens, stride, row, position):
    windows = text_windows.doc_windows(tokens, max_tokens, stride)
    return windows, text_windows.max_context_window(windows, row, position)

  windows, owner = owners(tf.constant([10, 0, 3]), 4, tf.constant(3),
                          tf.constant([[0], [2]]), tf.constant([[3, 4, 5], [0, 2, 3]]))
  assert windows.start.numpy().tolist() == [0, 3, 6, 0]
  assert owner.numpy().tolist() == [[0, 1, 1], [3, 3, -1]]
  windows, owner = owners(tf.zeros([0], tf.int32), 4, tf.constant(2), tf.zeros([0], tf.int32),
                          tf.zeros([0], tf.int32))
  assert windows.row.shape == [0] and owner.shape == [0]
  windows, owner = owners(tf.constant([0, 0]), 4, tf.constant(2), tf.constant([0, 1]),
                          tf.constant([0, 0]))
  assert windows.row.shape == [0] and owner.numpy().tolist() == [-1, -1]
