"""SavedModel export of the classifier: answers equal the Python path, anywhere it loads."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints, export, tokenization
from bert_tf.data import packing
from bert_tf.errors import UserInputError
from bert_tf.tasks import glue
from bert_tf.tasks.glue.export import export_classifier
from helpers import (
  FIXTURES,
  PROGRAMS,
  TINY,
  VOCAB_UNCASED,
  assert_float32_close,
  call_concurrently,
  printed_json,
  run_script,
  tiny_config,
)

pytestmark = pytest.mark.slow  # every test here runs a runner, an export or a pipeline

HEAD_CKPT = str(FIXTURES / "checkpoint" / "classifier_head_3labels" / "head.ckpt")
LABELS = ["contradiction", "entailment", "neutral"]
SEQ = 32
PAIRS = [
    ("Hello world!", "This is a test."),
    ("The quick brown fox", ""),  # An empty b gives the single-sentence layout.
    ("", "only b"),
    ("Héllo ΟΔΟΣ wörld 中文字符", "naïve café résumé"),
    ("a long first sentence " * 12, "and a long second one " * 12),
]
# The export runs the Python path's float32 weights in another graph, cut to each batch's longest
# sequence: other kernels and sum orders, whose rounding differences grow through the layers. The
# bound: 32 float32 ulps (3.8e-6) of the largest expected value.
EXPORT_ULPS = 32


@pytest.fixture(scope="module")
def model():
  """Cut to each request's longest sequence; the reference below runs at full SEQ."""
  model = glue.ClassifierModel(tiny_config(), num_labels=3, dynamic_length=True)
  checkpoints.load_checkpoint(TINY.ckpt, model.encoder)
  checkpoints.load_checkpoint(HEAD_CKPT, heads=model.heads)
  return model


@pytest.fixture(scope="module")
def python_logits(model):
  """The reference: FullTokenizer + pack_tokens + the encoder and head, eagerly."""
  encoder, head = model.encoder, model.classifier
  tokenizer = tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case=True)

  def run(texts_a, texts_b=None):
    texts_b = texts_b if texts_b is not None else [None] * len(texts_a)
    packed = [packing.pack_tokens(tokenizer.tokenize(a),
                                  tokenizer.tokenize(b) if b else None, SEQ, tokenizer)
              for a, b in zip(texts_a, texts_b)]
    inputs = {"input_word_ids": np.array([p.input_ids for p in packed], np.int32),
              "input_mask": np.array([p.input_mask for p in packed], np.int32),
              "input_type_ids": np.array([p.segment_ids for p in packed], np.int32)}
    pooled = encoder(inputs, training=False)["pooled_output"]
    return np.asarray(head(pooled, training=False)), inputs

  return run


def _softmax(logits):
  e = np.exp(logits - logits.max(axis=-1, keepdims=True))
  return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def pair_export(model, tmp_path_factory):
  """A sentence-pair export made from a vocab copy that is deleted right after."""
  root = tmp_path_factory.mktemp("pair")
  vocab = root / "vocab_copy.txt"
  shutil.copy(VOCAB_UNCASED, vocab)
  out = export_classifier(root / "export", model, vocab, True, SEQ, LABELS, text_pair=True)
  vocab.unlink()
  return {"dir": out, "vocab": str(vocab)}


@pytest.fixture(scope="module")
def loaded(pair_export):
  return tf.saved_model.load(pair_export["dir"])


def test_fresh_process_without_bert_tf_matches_python_path(pair_export, python_logits, tmp_path):
  a, b = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
  logits, inputs = python_logits(a, b)
  ids = {"input_word_ids": inputs["input_word_ids"].tolist(),
         "input_mask": inputs["input_mask"].tolist(),
         "input_type_ids": inputs["input_type_ids"].tolist()}
  got = printed_json(run_script(PROGRAMS + "serve_classifier.py",
                                json.dumps({"a": a, "b": b, "ids": ids}), pair_export["dir"],
                                isolated=True, cwd=tmp_path, timeout=120))
  assert_float32_close(got["probabilities"], _softmax(logits), ulps=EXPORT_ULPS)
  assert got["label_ids"] == logits.argmax(-1).tolist()
  assert got["labels"] == [LABELS[i] for i in got["label_ids"]]
  assert_float32_close(got["logits"], logits, ulps=EXPORT_ULPS)


def test_saved_model_cli_show_and_run(pair_export, loaded, tmp_path):
  show = run_script("tensorflow.python.tools.saved_model_cli", "show", "--dir",
                    pair_export["dir"], "--all", isolated=True, cwd=tmp_path, timeout=120)
  assert show.returncode == 0, show.stderr[-3000:]
  for name in ("serving_default", "serve_ids"):
    assert "signature_def['%s']" % name in show.stdout
  for name in ("text_a", "text_b", "input_word_ids", "probabilities", "logits"):
    assert "['%s']" % name in show.stdout
  # `saved_model_cli run` (with tensorflow_text imported) is also the TF1-style loader TF
  # Serving uses.
  run = run_script(PROGRAMS + "saved_model_cli.py", "run", "--dir", pair_export["dir"],
                   "--tag_set", "serve", "--signature_def", "serving_default", "--input_exprs",
                   'text_a=["hello world"];text_b=["a test"]', isolated=True, cwd=tmp_path,
                   timeout=120)
  assert run.returncode == 0, run.stderr[-3000:]
  printed = run.stdout.split("Result for output key probabilities:")[1].split("Result")[0]
  want = loaded.signatures["serving_default"](text_a=tf.constant(["hello world"]),
                                              text_b=tf.constant(["a test"]))
  assert_float32_close(np.array(printed.replace("[", " ").replace("]", " ").split(), np.float32),
                       want["probabilities"].numpy()[0], ulps=EXPORT_ULPS)
  assert "Result for output key labels" in run.stdout


def test_vocab_travels_inside_and_metadata(pair_export, loaded, python_logits):
  assert not os.path.exists(pair_export["vocab"])
  with open(os.path.join(pair_export["dir"], "saved_model.pb"), "rb") as f:
    assert pair_export["vocab"].encode() not in f.read()
  out = loaded.signatures["serving_default"](text_a=tf.constant(["hello"]),
                                             text_b=tf.constant(["world"]))
  logits, _ = python_logits(["hello"], ["world"])
  assert_float32_close(out["probabilities"].numpy(), _softmax(logits), ulps=EXPORT_ULPS)
  meta = export.read_metadata(pair_export["dir"])
  assert meta["task"] == "classification"
  assert meta["labels"] == LABELS
  assert meta["max_seq_length"] == SEQ and meta["do_lower_case"] is True
  assert sorted(meta["signatures"]["serving_default"]["inputs"]) == ["text_a", "text_b"]
  assert sorted(meta["signatures"]["serve_ids"]["inputs"]) == sorted(export.IDS_INPUTS)
  assert meta["signatures"]["serve_ids"]["outputs"]["logits"]["shape"] == [None, 3]


def test_concurrent_calls_match_serial(loaded):
  serve = loaded.signatures["serving_default"]
  batches = [([("thread %d sentence %d " % (t, i)) * (t + 1) for i in range(t + 1)],
              ["other text %d" % i if (i + t) % 2 else "" for i in range(t + 1)])
             for t in range(8)]

  def call(a, b):
    out = serve(text_a=tf.constant(a), text_b=tf.constant(b))
    return out["probabilities"].numpy(), out["label_ids"].numpy()

  serial = [call(a, b) for a, b in batches]
  for want, got in zip(serial, call_concurrently(call, batches)):
    for probabilities, label_ids in got:
      np.testing.assert_allclose(probabilities, want[0], atol=1e-6)
      np.testing.assert_array_equal(label_ids, want[1])


def test_hostile_inputs_and_batch_sizes(loaded, python_logits):
  serve = loaded.signatures["serving_default"]
  long_text = " ".join("word%d" % i for i in range(10000))
  a = [b"", long_text.encode(), b"caf\xe9 \xff", b"", "ok".encode()]
  b = [b"", b"caf\xe9 \xff", long_text.encode(), b"\xff\xfe", b""]
  out = serve(text_a=tf.constant(a), text_b=tf.constant(b))
  logits, _ = python_logits(a, b)  # FullTokenizer decodes bytes with errors="ignore".
  assert_float32_close(out["probabilities"].numpy(), _softmax(logits), ulps=EXPORT_ULPS)
  for size in (1, 17):
    texts = ["sentence number %d" % i for i in range(size)]
    out = serve(text_a=tf.constant(texts), text_b=tf.constant(texts[::-1]))
    logits, _ = python_logits(texts, texts[::-1])
    assert_float32_close(out["probabilities"].numpy(), _softmax(logits), ulps=EXPORT_ULPS)
    np.testing.assert_array_equal(out["label_ids"].numpy(), logits.argmax(-1))
    assert [s.decode() for s in out["labels"].numpy()] == [LABELS[i] for i in logits.argmax(-1)]
  ids = loaded.signatures["serve_ids"]
  with pytest.raises(tf.errors.InvalidArgumentError, match="max_position_embeddings"):
    too_long = tf.ones([1, 65], tf.int32)
    ids(input_word_ids=too_long, input_mask=too_long, input_type_ids=too_long * 0)


def _op_types(signature):
  graph = signature.graph.as_graph_def()
  found = {node.op for node in graph.node}
  for function in graph.library.function:
    found |= {node.op for node in function.node_def}
  return found


def test_raw_text_skips_padding_and_ids_keep_the_padded_pass(loaded):
  """The raw-text signature packs the real tokens (their answers, equal to the padded Python
  path's on batches of unequal pairs, are checked above); serve_ids takes any mask, so it
  keeps the padded pass."""
  assert {"Cumsum", "ScatterNd"} <= _op_types(loaded.signatures["serving_default"])
  assert not {"Cumsum", "ScatterNd"} & _op_types(loaded.signatures["serve_ids"])


def test_refuses_non_empty_export_dir_unless_overwrite(model, python_logits, tmp_path):
  target = tmp_path / "export"
  target.mkdir()
  (target / "keep.txt").write_text("previous export")
  with pytest.raises(UserInputError, match="overwrite=True"):
    export_classifier(target, model, VOCAB_UNCASED, True, SEQ, LABELS, False)
  assert (target / "keep.txt").exists()
  with pytest.raises(UserInputError, match="label_list has 2 labels"):
    export_classifier(tmp_path / "x", model, VOCAB_UNCASED, True, SEQ, ["a", "b"],
                             False)
  with pytest.raises(UserInputError, match="max_seq_length"):
    export_classifier(tmp_path / "x", model, VOCAB_UNCASED, True, 65, LABELS,
                             False)
  export_classifier(target, model, VOCAB_UNCASED, True, SEQ, LABELS,
                           text_pair=False, overwrite=True)
  assert not (target / "keep.txt").exists()
  assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # No temp leftovers.
  # Through a symlink to an empty folder: written where it points, the link kept (replacing
  # one through a link: test_runner's test_an_export_replaced_through_a_symlink_keeps_the_link).
  (tmp_path / "empty").mkdir()
  (tmp_path / "link").symlink_to(tmp_path / "empty")
  assert export_classifier(tmp_path / "link", model, VOCAB_UNCASED, True, SEQ, LABELS,
                           text_pair=False) == str(tmp_path / "link")
  assert (tmp_path / "link").is_symlink() and (tmp_path / "empty" / "saved_model.pb").exists()
  assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "export", "link"]
  # Doubles as the single-sentence export: serving_default takes only text_a.
  single = tf.saved_model.load(str(target))
  serve = single.signatures["serving_default"]
  args, kwargs = serve.structured_input_signature
  assert not args and sorted(kwargs) == ["text_a"]
  texts = ["Hello world!", "", "naïve café"]
  got = serve(text_a=tf.constant(texts))
  assert sorted(got) == ["label_ids", "labels", "probabilities"]
  logits, _ = python_logits(texts)
  assert_float32_close(got["probabilities"].numpy(), _softmax(logits), ulps=EXPORT_ULPS)
  assert export.read_metadata(str(target))["text_pair"] is False


def test_regression_export(model, python_logits, tmp_path):
  regression = glue.ClassifierModel(tiny_config(), num_labels=1)
  checkpoints.load_checkpoint(TINY.ckpt, regression.encoder)
  encoder, head = regression.encoder, regression.classifier
  with pytest.raises(UserInputError, match="num_labels=3"):
    export_classifier(tmp_path / "bad", model, VOCAB_UNCASED, True, SEQ, None, True)
  target = tmp_path / "regression"
  target.mkdir()  # An existing empty folder is fine.
  export_classifier(target, regression, VOCAB_UNCASED, True, SEQ, None, True)
  loaded = tf.saved_model.load(str(target))
  a, b = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
  got = loaded.signatures["serving_default"](text_a=tf.constant(a), text_b=tf.constant(b))
  assert sorted(got) == ["predictions"] and got["predictions"].shape == (len(a),)
  _, inputs = python_logits(a, b)
  want = np.asarray(head(encoder(inputs, training=False)["pooled_output"]))
  assert_float32_close(got["predictions"].numpy(), want[:, 0], ulps=EXPORT_ULPS)
  by_ids = loaded.signatures["serve_ids"](input_word_ids=inputs["input_word_ids"],
                                          input_mask=inputs["input_mask"],
                                          input_type_ids=inputs["input_type_ids"])
  assert by_ids["logits"].shape == (len(a), 1)
  assert_float32_close(by_ids["logits"].numpy(), want, ulps=EXPORT_ULPS)
  meta = export.read_metadata(str(target))
  assert meta["task"] == "regression" and meta["labels"] is None
