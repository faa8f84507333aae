"""SavedModel export of SQuAD: raw question + context in, answer span out, all in the graph.

The in-graph windows and span choice are checked against the original run_squad
(features and predictions in fixtures/squad), and whole exports against a plain
Python reference written here (whitespace split, FullTokenizer, windows, the span
rules) that runs the same encoder and head in-process.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints, export, tokenization
from bert_tf.errors import UserInputError
from bert_tf.tasks import squad
from bert_tf.tasks.squad import export as squad_export
from bert_tf.tasks.squad import graph_features, graph_postprocess
from bert_tf.text import BertTextTokenizer
from helpers import (
  FIXTURES,
  PROGRAMS,
  TINY,
  VOCAB_UNCASED,
  call_concurrently,
  printed_json,
  run_script,
  tiny_config,
)

pytestmark = pytest.mark.slow  # every test here runs a runner, an export or a pipeline

SQUAD = FIXTURES / "squad"
HEAD_CKPT = str(FIXTURES / "checkpoint" / "squad_head" / "head.ckpt")
SEQ, STRIDE, MAX_QUERY = 64, 32, 16
V1 = {"max_answer_length": 30, "n_best_size": 20}
V2 = {"max_answer_length": 10, "n_best_size": 5}
SPACES = " \t\r\n\u202f"  # run_squad's is_whitespace.
ORIGINAL = json.loads((SQUAD / "squad_features.json").read_text())


def _squad_pairs(name, ids=None):
  """[(qas_id, question, context)] of a fixture file, in file order."""
  pairs = []
  for article in json.loads((SQUAD / name).read_text())["data"]:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        if ids is None or qa["id"] in ids:
          pairs.append((qa["id"], qa["question"], paragraph["context"]))
  return pairs


# lh-*: a 324-word context (12 windows); lh-05: a question over 16 pieces; ex-*:
# accents and "(1895-1943)."; rw-02: U+202F inside the answer.
PAIRS = [(q, c) for _, q, c in _squad_pairs("squad_v1_tiny.json", {
    "lh-01", "lh-02", "lh-05", "lh-06", "ex-01", "ex-02", "ex-03", "rw-02", "sf-01",
    "sf-02"})] + [
        ("Wer eröffnete das Café 1923?",
         "東京駅の近くにある Café Müller は 1923 年に開店した。店主は Zoë Ångström、"
         "naïve résumé 中文字符 です。"),
        ("Which\u00a0words?", "tab\tseparated\nlines\r\nand\u00a0no-break\u00a0spaces  "
                              "ΟΔΟΣ Σίσυφος\u2028end"),
    ]


# ----------------------------------------------------------- Python reference

def _words(context):
  """run_squad's whitespace words, with their [begin, end) code point offsets."""
  words, spans = [], []
  for i, char in enumerate(context):
    if char in SPACES:
      continue
    if i == 0 or context[i - 1] in SPACES:
      words.append(char)
      spans.append([i, i + 1])
    else:
      words[-1] += char
      spans[-1][1] = i + 1
  return words, spans


def _owner(doc_spans, position):
  """Index of the window where `position` has the most context (first one wins)."""
  best, owner = None, None
  for index, (start, length) in enumerate(doc_spans):
    if start <= position <= start + length - 1:
      score = min(position - start, start + length - 1 - position) + 0.01 * length
      if best is None or score > best:
        best, owner = score, index
  return owner


def reference_windows(tokenizer, question, context, seq=SEQ, stride=STRIDE,
                      max_query=MAX_QUERY):
  """(windows, word spans) for one pair, as convert_examples_to_features."""
  words, spans = _words(context)
  pieces, piece_word = [], []
  for index, word in enumerate(words):
    for piece in tokenizer.tokenize(word):
      pieces.append(piece)
      piece_word.append(index)
  query = tokenizer.tokenize(question)[:max_query]
  room = seq - len(query) - 3
  doc_spans, start = [], 0
  while start < len(pieces):
    length = min(len(pieces) - start, room)
    doc_spans.append((start, length))
    if start + length == len(pieces):
      break
    start += min(length, stride)
  windows = []
  for index, (start, length) in enumerate(doc_spans):
    tokens = ["[CLS]"] + query + ["[SEP]"]
    word_at, owns = {}, {}
    for piece in range(start, start + length):
      word_at[len(tokens)] = piece_word[piece]
      owns[len(tokens)] = _owner(doc_spans, piece) == index
      tokens.append(pieces[piece])
    tokens.append("[SEP]")
    ids = tokenizer.convert_tokens_to_ids(tokens)
    pad = [0] * (seq - len(ids))
    windows.append({"ids": ids + pad, "mask": [1] * len(ids) + pad,
                    "types": [0] * (len(query) + 2) + [1] * (length + 1) + pad,
                    "word_at": word_at, "owns": owns})
  return windows, spans


def reference_choice(windows, starts, ends, n_best_size, max_answer_length):
  """(best candidate or None, null score) as write_predictions ranks them.

  A candidate is (score, window, start, end, start_logit, end_logit); Python's
  stable sort keeps the original's order among equal scores.
  """
  candidates, null = [], None
  for index, window in enumerate(windows):
    start_logits = [float(x) for x in starts[index]]
    end_logits = [float(x) for x in ends[index]]
    window_null = start_logits[0] + end_logits[0]
    null = window_null if null is None or window_null < null else null
    best_starts = sorted(range(SEQ), key=lambda i: start_logits[i], reverse=True)[:n_best_size]
    best_ends = sorted(range(SEQ), key=lambda i: end_logits[i], reverse=True)[:n_best_size]
    for s in best_starts:
      for e in best_ends:
        if (s in window["word_at"] and e in window["word_at"] and window["owns"][s]
            and s <= e < s + max_answer_length):
          candidates.append((start_logits[s] + end_logits[e], index, s, e, start_logits[s],
                             end_logits[e]))
  candidates.sort(key=lambda c: c[0], reverse=True)
  return (candidates[0] if candidates else None), null


@pytest.fixture(scope="module")
def model():
  config = tiny_config()
  model = squad.SquadModel(config)
  checkpoints.load_checkpoint(TINY.ckpt, model.encoder)
  checkpoints.load_checkpoint(HEAD_CKPT, heads=model.heads)
  return model


@pytest.fixture(scope="module")
def full_tokenizer():
  return tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case=True)


def _logits(model, windows):
  encoder, head = model.encoder, model.span
  inputs = {"input_word_ids": np.array([w["ids"] for w in windows], np.int32),
            "input_mask": np.array([w["mask"] for w in windows], np.int32),
            "input_type_ids": np.array([w["types"] for w in windows], np.int32)}
  start, end = head(encoder(inputs, training=False)["sequence_output"])
  return np.asarray(start), np.asarray(end)


@pytest.fixture(scope="module")
def reference(model, full_tokenizer):
  """Answers (text, start, end, score, null_score, is_impossible) of the Python path."""

  def run(questions, contexts, max_answer_length, n_best_size):
    answers = []
    for question, context in zip(questions, contexts):
      if isinstance(question, bytes):
        question = question.decode("utf-8", "ignore")
      if isinstance(context, bytes):
        context = context.decode("utf-8", "ignore")
      windows, spans = reference_windows(full_tokenizer, question, context)
      if not windows:
        answers.append(("", -1, -1, 0.0, 0.0, True))
        continue
      best, null = reference_choice(windows, *_logits(model, windows), n_best_size,
                                    max_answer_length)
      if best is None:
        answers.append(("", -1, -1, 0.0, null, True))
        continue
      _, index, s, e, start_logit, end_logit = best
      begin = spans[windows[index]["word_at"][s]][0]
      end = spans[windows[index]["word_at"][e]][1]
      answers.append((context[begin:end], begin, end, start_logit + end_logit, null,
                      null - start_logit - end_logit > 0.0))
    return answers

  return run


@pytest.fixture(scope="module")
def exports(model, tmp_path_factory):
  """A v1 export (several encoder chunks per request) and a v2 export."""
  root = tmp_path_factory.mktemp("squad")
  v1 = squad_export.export_squad(root / "v1", model, VOCAB_UNCASED, True, SEQ, STRIDE,
                                 MAX_QUERY, window_batch_size=8, **V1)
  v2 = squad_export.export_squad(root / "v2", model, VOCAB_UNCASED, True, SEQ, STRIDE,
                                 MAX_QUERY, version_2_with_negative=True, **V2)
  return {"v1": v1, "v2": v2}


@pytest.fixture(scope="module")
def loaded(exports):
  return {k: tf.saved_model.load(v) for k, v in exports.items()}


def _serve(loaded_model, questions, contexts):
  out = loaded_model.signatures["serving_default"](question=tf.constant(questions, tf.string),
                                                   context=tf.constant(contexts, tf.string))
  return {k: v.numpy() for k, v in out.items()}


def _assert_matches_reference(got, want, contexts, v2):
  assert len(got["answer"]) == len(want)
  for i, (text, begin, end, score, null, impossible) in enumerate(want):
    context = contexts[i]
    if isinstance(context, bytes):
      context = context.decode("utf-8", "ignore")
    answer = got["answer"][i].decode("utf-8")
    if v2:
      assert bool(got["is_impossible"][i]) == impossible, i
      np.testing.assert_allclose(got["null_score"][i], null, atol=1e-4)
      if impossible:
        text, begin, end = "", -1, -1
    assert (answer, got["start_char"][i], got["end_char"][i]) == (text, begin, end), i
    if begin >= 0:
      assert context[begin:end] == answer
    np.testing.assert_allclose(got["score"][i], score, atol=1e-4)


# ------------------------------------------------------ against the original

def test_windows_and_choice_equal_the_originals():
  """Features of all 21 predict questions, and predictions from the fixed logits."""
  examples = ORIGINAL["predict"]["examples"]
  features = ORIGINAL["predict"]["features"]
  pairs = {q: (question, context) for q, question, context in _squad_pairs("squad_v2_tiny.json")}
  questions = [pairs[e["qas_id"]][0] for e in examples]
  contexts = [pairs[e["qas_id"]][1] for e in examples]
  tokenizer = BertTextTokenizer(VOCAB_UNCASED, do_lower_case=True)
  windows = graph_features.squad_windows(tokenizer, tf.constant(questions), tf.constant(contexts),
                                         SEQ, STRIDE, MAX_QUERY)
  windows = {k: v.numpy() if hasattr(v, "numpy") else v for k, v in windows.items()}
  assert windows["input_word_ids"].shape == (len(features), SEQ)
  word_row = windows["word_row"]
  first_word = {row: int(np.argmax(word_row == row)) for row in set(word_row.tolist())}
  for i, feature in enumerate(features):
    row = feature["example_index"]
    assert windows["window_row"][i] == row
    assert windows["input_word_ids"][i].tolist() == feature["input_ids"]
    assert windows["input_mask"][i].tolist() == feature["input_mask"]
    assert windows["input_type_ids"][i].tolist() == feature["segment_ids"]
    columns = np.flatnonzero(windows["in_context"][i])
    assert {str(c): int(windows["token_word"][i][c]) - first_word[row]
            for c in columns} == feature["token_to_orig_map"]
    assert {str(c): bool(windows["is_max_context"][i][c])
            for c in columns} == feature["token_is_max_context"]
  assert [e["doc_tokens"] for e in examples] == [
      [c[b:e] for b, e in zip(windows["word_begin"][word_row == row],
                              windows["word_end"][word_row == row])]
      for row, c in enumerate(contexts)]

  logits = np.load(SQUAD / "write_predictions_logits.npz")
  for v2 in (False, True):
    folder = SQUAD / "predictions" / ("random_nbest5_maxans10_v%d" % (2 if v2 else 1))
    predictions = json.loads((folder / "predictions.json").read_text())
    nbest = json.loads((folder / "nbest_predictions.json").read_text())
    best = graph_postprocess.squad_best_spans(windows, logits["random.start_logits"],
                                              logits["random.end_logits"], 5, 10, v2)
    best = {k: v.numpy() for k, v in best.items()}
    for row, example in enumerate(examples):
      qas_id = example["qas_id"]
      top = next(entry for entry in nbest[qas_id] if entry["text"])
      assert best["start_logit"][row] == top["start_logit"]  # float64, exactly.
      assert best["end_logit"][row] == top["end_logit"]
      words = slice(best["start_word"][row], best["end_word"][row])
      served = contexts[row][windows["word_begin"][words.start]:windows["word_end"][words.stop]]
      # get_final_text can cut inside the served words ("wicks" -> "cks").
      assert top["text"] in served, qas_id
      if v2:
        odds = json.loads((folder / "null_odds.json").read_text())[qas_id]
        assert best["null_score"][row] - best["start_logit"][row] - best["end_logit"][row] == odds
        assert best["is_impossible"][row] == (predictions[qas_id] == ""), qas_id
    if v2:
      assert best["is_impossible"].sum() == 3  # ex-04, rw-04 and sf-03.

  # Tied logits: the same span as the original's stable sort, for every tie pattern.
  original_windows = [{"word_at": {int(k): v for k, v in f["token_to_orig_map"].items()},
                       "owns": {int(k): v for k, v in f["token_is_max_context"].items()}}
                      for f in features]
  for name in ("ties_int", "ties_halfstep", "tiny_model", "random"):
    starts, ends = logits[name + ".start_logits"], logits[name + ".end_logits"]
    for n_best_size, max_answer_length in ((5, 10), (20, 30), (1, 3)):
      best = graph_postprocess.squad_best_spans(windows, starts, ends, n_best_size,
                                                max_answer_length, True)
      best = {k: v.numpy() for k, v in best.items()}
      for row in range(len(examples)):
        rows = np.flatnonzero(windows["window_row"] == row)
        want, null = reference_choice([original_windows[i] for i in rows], starts[rows],
                                      ends[rows], n_best_size, max_answer_length)
        assert best["null_score"][row] == null
        if want is None:
          assert not best["has_span"][row] and best["is_impossible"][row]
          continue
        got = (best["window"][row] - rows[0], best["start_index"][row], best["end_index"][row])
        assert got == want[1:4], (name, n_best_size, row)
        assert best["score"][row] == want[0]


@pytest.mark.parametrize("seq,stride,max_query", [(64, 5, 16), (40, 100, 8), (24, 1, 20)])
def test_windows_equal_python_reference_for_other_strides(full_tokenizer, seq, stride,
                                                          max_query):
  """Short strides give many overlapping windows per piece (the max-context search)."""
  pairs = PAIRS[2:3] + PAIRS[-2:] + [("q", ""), ("", "one two")]
  tokenizer = BertTextTokenizer(VOCAB_UNCASED, do_lower_case=True)
  got = graph_features.squad_windows(tokenizer, tf.constant([p[0] for p in pairs]),
                                     tf.constant([p[1] for p in pairs]), seq, stride, max_query)
  got = {k: v.numpy() for k, v in got.items()}
  want = [w for q, c in pairs for w in reference_windows(full_tokenizer, q, c, seq, stride,
                                                          max_query)[0]]
  assert len(want) == len(got["window_row"]) > 10
  assert got["input_word_ids"].tolist() == [w["ids"] for w in want]
  assert got["input_mask"].tolist() == [w["mask"] for w in want]
  assert got["input_type_ids"].tolist() == [w["types"] for w in want]
  for i, window in enumerate(want):
    columns = np.flatnonzero(got["in_context"][i])
    assert sorted(window["owns"]) == columns.tolist()
    assert [window["owns"][c] for c in columns] == got["is_max_context"][i][columns].tolist()


# ---------------------------------------------------- the exported SavedModel

@pytest.mark.parametrize("version", ["v1", "v2"])
def test_answers_equal_python_reference(loaded, reference, version):
  params = V1 if version == "v1" else V2
  questions, contexts = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
  got = _serve(loaded[version], questions, contexts)
  want = reference(questions, contexts, **params)
  _assert_matches_reference(got, want, contexts, version == "v2")
  outputs = {"answer", "score", "start_char", "end_char"}
  if version == "v2":
    outputs |= {"null_score", "is_impossible"}
  assert set(got) == outputs
  assert any(len(c) > 1000 for c in contexts)  # Many windows in one batch.


def test_hostile_inputs(loaded, reference):
  long_context = " ".join("word%d" % i for i in range(3000)) + " The answer is here."
  questions = [b"", b"what?", b"", "caf\u00e9 \u4e2d?".encode() + b"\xff", b"q", b"\xe2\x80\x8b",
               b"where is the answer?"]
  contexts = [b"", b"", long_context.encode(), b"caf\xc3\xa9 \xff\xfe ok \xe4\xb8 end",
              " \t\r\n\u202f ".encode(), "\u200b\u00ad x\u200b".encode(), long_context.encode()]
  for version, params in (("v1", V1), ("v2", V2)):
    got = _serve(loaded[version], questions, contexts)
    want = reference(questions, contexts, **params)
    _assert_matches_reference(got, want, contexts, version == "v2")
    assert got["answer"][0] == b"" and got["start_char"][0] == -1 and got["score"][0] == 0.0
    if version == "v2":
      assert got["is_impossible"][0] and got["is_impossible"][4]
    empty = _serve(loaded[version], [], [])
    assert all(v.shape == (0,) for v in empty.values())
  with pytest.raises(tf.errors.InvalidArgumentError):
    _serve(loaded["v1"], ["one", "two"], ["only one context"])


def test_serve_ids_matches_encoder_and_head(loaded, model):
  features = ORIGINAL["predict"]["features"][:40]
  inputs = {"input_word_ids": np.array([f["input_ids"] for f in features], np.int32),
            "input_mask": np.array([f["input_mask"] for f in features], np.int32),
            "input_type_ids": np.array([f["segment_ids"] for f in features], np.int32)}
  encoder, head = model.encoder, model.span
  start, end = head(encoder(inputs, training=False)["sequence_output"])
  original = np.load(FIXTURES / "model_forward" / "squad_head_forward.npz")
  for version in ("v1", "v2"):
    got = loaded[version].signatures["serve_ids"](
        input_word_ids=tf.constant(inputs["input_word_ids"]),
        input_mask=tf.constant(inputs["input_mask"]),
        input_type_ids=tf.constant(inputs["input_type_ids"]))
    assert sorted(got) == ["end_logits", "start_logits"]
    np.testing.assert_allclose(got["start_logits"].numpy(), start, atol=1e-5)
    np.testing.assert_allclose(got["end_logits"].numpy(), end, atol=1e-5)
    # The original TF1 model on the same features.
    np.testing.assert_allclose(got["start_logits"].numpy(),
                               original["predict.start_logits"][:40], atol=1e-4)
  with pytest.raises(tf.errors.InvalidArgumentError, match="max_position_embeddings"):
    too_long = tf.ones([1, SEQ + 1], tf.int32)
    loaded["v1"].signatures["serve_ids"](input_word_ids=too_long, input_mask=too_long,
                                         input_type_ids=too_long * 0)


def test_concurrent_calls_match_serial(loaded):
  serve = loaded["v1"]  # Several encoder chunks per call.
  batches = [([PAIRS[(t + i) % len(PAIRS)][0] for i in range(t + 1)],
              [PAIRS[(t * 3 + i) % len(PAIRS)][1] for i in range(t + 1)]) for t in range(8)]
  serial = [_serve(serve, q, c) for q, c in batches]
  for want, runs in zip(serial, call_concurrently(lambda q, c: _serve(serve, q, c), batches)):
    for got in runs:
      for key in ("answer", "start_char", "end_char"):
        np.testing.assert_array_equal(got[key], want[key])
      np.testing.assert_allclose(got["score"], want["score"], atol=1e-6)


def test_fresh_process_without_bert_tf(exports, loaded, tmp_path):
  questions, contexts = [p[0] for p in PAIRS[-4:]], [p[1] for p in PAIRS[-4:]]
  got = printed_json(run_script(PROGRAMS + "serve_squad.py",
                                json.dumps({"q": questions, "c": contexts}), exports["v2"],
                                isolated=True, cwd=tmp_path, timeout=120))
  want = _serve(loaded["v2"], questions, contexts)
  assert got["answer"] == [a.decode() for a in want["answer"]]
  assert got["start_char"] == want["start_char"].tolist()
  assert got["end_char"] == want["end_char"].tolist()
  assert got["is_impossible"] == want["is_impossible"].tolist()
  np.testing.assert_allclose(got["score"], want["score"], atol=1e-6)


def test_saved_model_cli_run(exports, loaded, tmp_path):
  """The TF1-style loader of TF Serving (with tensorflow_text imported) runs the loop too."""
  question, context = "Who designed the tower?", PAIRS[0][1]
  run = run_script(PROGRAMS + "saved_model_cli.py", "run", "--dir", exports["v1"], "--tag_set",
                   "serve", "--signature_def", "serving_default", "--input_exprs",
                   "question=[%r];context=[%r]" % (question, context), isolated=True,
                   cwd=tmp_path, timeout=120)
  assert run.returncode == 0, run.stderr[-3000:]
  printed = run.stdout.split("Result for output key start_char:")[1].split("Result")[0]
  want = _serve(loaded["v1"], [question], [context])
  assert want["start_char"][0] >= 0
  assert int(printed.strip(" []\n")) == want["start_char"][0]


def test_metadata_and_bad_arguments(exports, model, tmp_path):
  meta = export.read_metadata(exports["v2"])
  assert meta["task"] == "squad" and meta["version_2_with_negative"] is True
  assert (meta["max_seq_length"], meta["doc_stride"], meta["max_query_length"]) == (
      SEQ, STRIDE, MAX_QUERY)
  assert (meta["max_answer_length"], meta["n_best_size"]) == (10, 5)
  assert meta["null_score_diff_threshold"] == 0.0 and meta["do_lower_case"] is True
  signature = meta["signatures"]["serving_default"]
  assert sorted(signature["inputs"]) == ["context", "question"]
  assert sorted(signature["outputs"]) == ["answer", "end_char", "is_impossible", "null_score",
                                          "score", "start_char"]
  assert signature["outputs"]["start_char"] == {"dtype": "int32", "shape": [None]}
  assert sorted(meta["signatures"]["serve_ids"]["inputs"]) == sorted(export.IDS_INPUTS)
  assert meta["signatures"]["serve_ids"]["outputs"]["start_logits"]["shape"] == [None, None]
  assert export.read_metadata(exports["v1"])["version_2_with_negative"] is False

  args = (model, VOCAB_UNCASED, True)
  for bad, match in (({"max_seq_length": 19}, "greater than max_query_length"),
                     ({"max_seq_length": SEQ + 1}, "max_position_embeddings"),
                     ({"doc_stride": 0}, "doc_stride"),
                     ({"n_best_size": 0}, "n_best_size"),
                     ({"max_answer_length": 2.5}, "max_answer_length")):
    kwargs = dict(max_seq_length=SEQ, doc_stride=STRIDE, max_query_length=MAX_QUERY,
                  max_answer_length=30)
    kwargs.update(bad)
    with pytest.raises(UserInputError, match=match):
      squad_export.export_squad(tmp_path / "bad", *args, **kwargs)
  with pytest.raises(UserInputError, match="overwrite=True"):
    squad_export.export_squad(exports["v1"], *args, SEQ, STRIDE, MAX_QUERY, 30)
  assert not (tmp_path / "bad").exists()
