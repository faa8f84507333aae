"""predict_beam.py: any export over a corpus on Beam, answers equal to the export's own, one
request at a time; bad rows to the dead letters with a reason; reruns write the same bytes."""

import functools
import json
import os

import numpy as np
import pytest

from bert_tf.errors import UserInputError
from bert_tf.inference import beam_inference
from bert_tf.utils import beam_options
from helpers import (
  TINY,
  VOCAB_UNCASED,
  ScriptSession,
  assert_float32_close,
  run_script,
  tiny_config,
  with_tiny_weights,
)

SEQ = 16
EXPORT_ULPS = 32  # as test_export: another batch (padding, kernels) moves float32 rounding
LABELS = ["contradiction", "entailment", "neutral"]
MULTI_LABELS = ["billing", "bug", "praise"]
NER_LABELS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


# ------------------------------------------------------------------------- cheap unit tests

def _info(inputs=("text_a", "text_b"), task="classification"):
  return beam_inference.ExportInfo("E", task, tuple(inputs), (), {})


def _parse(raw, input_format="jsonl", inputs=("text_a", "text_b"), **settings):
  settings = beam_inference.Settings(input_format=input_format, **settings)
  return beam_inference.parse_row(raw, beam_options.InputFile(0, "in.jsonl", 1), 7,
                                  _info(inputs), settings)


@pytest.mark.parametrize("raw, row_id, error", [
    (b'{"id": "r1", "text_a": "caf\xff", "text_b": ""}', "r1", "not UTF-8 (at byte offset 27)"),
    (b"", None, "empty line"),
    (b"{oops", None, "malformed JSON"),
    (b'["a list"]', None, "not a JSON object"),
    (b'{"text_a": "a", "text_b": "b"}', None, "no 'id' field (--id_field)"),
    (b'{"id": 1.5, "text_a": "a", "text_b": "b"}', None,
     "the 'id' field is not a string or an integer"),
    (b'{"id": 3, "text_a": "a"}', 3, "missing input field 'text_b' (the export takes text_a, "
                                     "text_b)"),
    (b'{"id": 3, "text_a": 5, "text_b": ""}', 3, "input field 'text_a' is not a string"),
    (b'{"id": 3, "text_a": "  ", "text_b": "b"}', 3, "empty text in 'text_a'"),
    (b'{"id": 3, "text_a": "' + b"x" * 40 + b'", "text_b": ""}', None,
     "row of 77 bytes is over --max_row_bytes=50"),
])
def test_bad_jsonl_rows_are_dead_letters_with_their_reason(raw, row_id, error):
  dead = _parse(raw, max_row_bytes=50)
  assert isinstance(dead, dict), dead
  assert dead["id"] == row_id and dead["file"] == "in.jsonl" and dead["line"] == 7
  assert dead["error"].startswith(error), dead["error"]


def test_input_patterns_match_sorted_files_once_and_errors_name_the_flag(tmp_path):
  """Both Beam scripts expand their patterns here: file i of the sorted list is index i."""
  (tmp_path / "b.txt").write_bytes(b"1234567")
  (tmp_path / "a.txt").write_bytes(b"123")
  (tmp_path / "c.log").write_bytes(b"")
  got = beam_options.expand_input("%s, %s,," % (tmp_path / "*.txt", tmp_path / "a.txt"),
                                  "--input_file")
  assert [(f.index, os.path.basename(f.path), f.size) for f in got] == [(0, "a.txt", 3),
                                                                         (1, "b.txt", 7)]
  missing = str(tmp_path / "*.md")
  with pytest.raises(UserInputError) as e:
    beam_options.expand_input("%s,%s" % (tmp_path / "a.txt", missing), "--input")
  assert str(e.value) == "No file matches --input pattern %s." % missing
  with pytest.raises(UserInputError) as e:
    beam_options.expand_input(" , ", "--input_file")
  assert str(e.value) == "--input_file names no file."


def test_good_rows_keep_their_id_and_inputs():
  key, inputs = _parse(b'{"id": "r1", "text_a": "A cat.", "text_b": "", "extra": 1}')
  assert key == (0, 7, "r1") and inputs == {"text_a": "A cat.", "text_b": ""}
  key, inputs = _parse("Héllo".encode(), input_format="text", inputs=("sentences",))
  assert key == (0, 7, 7) and inputs == {"sentences": "Héllo"}
  key, _ = _parse(b"x", input_format="text", inputs=("text",), several_files=True)
  assert key == (0, 7, "in.jsonl:7")
  assert _parse(b"\xfe", input_format="text", inputs=("text",))["id"] == 7  # line is the id


def test_batches_sorted_by_length_whatever_the_arrival_order():
  rows = [((0, i, i), {"text": "x" * n}) for i, n in enumerate([5, 1, 9, 1, 3, 7, 2])]
  batches = beam_inference.batches_of_group(rows, 3)
  lengths = [[len(r[1]["text"]) for r in b] for b in batches]
  assert lengths == [[1, 1, 2], [3, 5, 7], [9]]
  assert [r[0] for r in batches[0]] == [(0, 1, 1), (0, 3, 3), (0, 6, 6)]  # ties: input order
  assert beam_inference.batches_of_group(rows[::-1], 3) == batches


def test_a_row_the_export_refuses_becomes_an_error_not_a_failed_batch():
  import tensorflow as tf

  def signature(text_a):
    if b"bad" in text_a.numpy():
      raise tf.errors.InvalidArgumentError(None, None, "input is bad\nmore")
    return {"label_ids": tf.zeros_like(text_a, tf.int32)}

  handler = beam_inference.BertExportModelHandler(_info(("text_a",)))
  results = handler.run_inference([{"text_a": "ok"}, {"text_a": "bad"}, {"text_a": "fine"}],
                                  signature)
  answers = [r.inference for r in results]
  assert answers == [{"label_ids": 0}, {"error": "the export refused the row: input is bad"},
                     {"label_ids": 0}]
  assert handler.batch_elements_kwargs() == {"min_batch_size": 1, "max_batch_size": 32}


@pytest.mark.parametrize("files, message", [
    ({}, "does not exist"),
    ({"x.txt": ""}, "is not a SavedModel"),
    ({"saved_model.pb": ""}, "is not a bert_tf export"),
    ({"saved_model.pb": "", "assets.extra/bert_tf_export.json": json.dumps(
        {"task": "tfhub_encoder", "signatures": {"serving_default": {"inputs": {}, "outputs": {}}}
         })}, "predict_beam.py runs the raw-text exports"),
])
def test_folders_that_are_not_raw_text_exports_are_refused(tmp_path, files, message):
  folder = tmp_path / "export"
  for name, text in files.items():
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
  with pytest.raises(UserInputError, match=message):
    beam_inference.describe_export(folder)


# ------------------------------------------------------------------------- end to end

with_weights = functools.partial(with_tiny_weights, head_scale=2.0)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  """Tiny exports: a pair classifier, a windows classifier, a multi-label classifier, NER,
  SQuAD, SWAG, a text embedder."""
  from bert_tf.inference import text_embedder, text_embedder_export
  from bert_tf.tasks.glue.export import export_classifier
  from bert_tf.tasks.glue.model import ClassifierModel
  from bert_tf.tasks.glue.windows import WindowOptions
  from bert_tf.tasks.ner.export import export_ner
  from bert_tf.tasks.ner.model import TokenClassifierModel
  from bert_tf.tasks.own_data.export import export_own_data
  from bert_tf.tasks.own_data.labels import Schema
  from bert_tf.tasks.own_data.model import OwnDataModel
  from bert_tf.tasks.squad.export import export_squad
  from bert_tf.tasks.squad.model import SquadModel
  from bert_tf.tasks.swag.export import export_swag
  from bert_tf.tasks.swag.model import MultipleChoiceModel
  root = tmp_path_factory.mktemp("beam_exports")
  made = {
      "classifier": export_classifier(
          root / "classifier", with_weights(ClassifierModel(tiny_config(), num_labels=3,
                                                            dynamic_length=True)),
          VOCAB_UNCASED, True, SEQ, LABELS, text_pair=True),
      "windows": export_classifier(  # long texts classified by pooling their windows
          root / "windows", with_weights(ClassifierModel(tiny_config(), num_labels=3,
                                                         dynamic_length=True)),
          VOCAB_UNCASED, True, SEQ, LABELS, text_pair=False,
          windows=WindowOptions(doc_stride=8)),
      "multi_label": export_own_data(
          root / "multi", with_weights(OwnDataModel(tiny_config(), num_labels=3,
                                                    problem_type="multi_label",
                                                    dynamic_length=True)),
          VOCAB_UNCASED, True, SEQ, Schema("multi_label", MULTI_LABELS), text_pair=False,
          threshold=0.5),
      "ner": export_ner(root / "ner", with_weights(TokenClassifierModel(tiny_config(),
                                                                        num_labels=5)),
                        VOCAB_UNCASED, True, SEQ, NER_LABELS, stride=8),
      "squad": export_squad(root / "squad", with_weights(SquadModel(tiny_config())),
                            VOCAB_UNCASED, True, SEQ * 2, 8, 10, 5),
      "swag": export_swag(root / "swag", with_weights(MultipleChoiceModel(
          tiny_config(), dynamic_length=True)), VOCAB_UNCASED, True, SEQ),
      "embedder": text_embedder_export.export_embedder(
          text_embedder.build(TINY.ckpt, "mean", True, SEQ, True, vocab_file=VOCAB_UNCASED,
                              config=tiny_config()), root / "embedder"),
  }
  return {kind: str(path) for kind, path in made.items()}


@pytest.fixture(scope="module")
def signatures(exports):
  import tensorflow as tf
  import tensorflow_text  # noqa: F401
  return {kind: tf.saved_model.load(path).signatures["serving_default"]
          for kind, path in exports.items()}


TEXTS = ["Anna Smith visited Paris, then Berlin.", "The cat sat.", "Héllo ΟΔΟΣ wörld 中文字符",
         "a long sentence that goes on and on " * 6, "my card was charged twice",
         "Zoe Wickham said so in Ashford.", "x", "the app crashes when I open settings"]


def run_pipeline(export_dir, input_glob, prefix, input_format="jsonl", output_format="jsonl",
                 batch_size=3, num_shards=2, groups=2):
  """The pipeline in this process on the in-memory DirectRunner; its counters."""
  import apache_beam as beam
  from apache_beam.options.pipeline_options import PipelineOptions
  info = beam_inference.describe_export(export_dir)
  files = beam_options.expand_input(str(input_glob), "--input")
  settings = beam_inference.Settings(
      input_format=input_format, batch_size=batch_size, groups=groups, num_shards=num_shards,
      output_format=output_format, several_files=len(files) > 1)
  pipeline = beam.Pipeline(options=PipelineOptions(["--runner=DirectRunner",
                                                    "--direct_running_mode=in_memory"]))
  beam_inference.build(pipeline, info, files, str(prefix), settings,
                       beam_inference.temp_dir_of(str(prefix)))
  result = pipeline.run()
  result.wait_until_finish()
  return beam_inference.counters(result)


def read_jsonl(prefix, count=2):
  rows = []
  for i in range(count):
    with open("%s-%05d-of-%05d.jsonl" % (prefix, i, count), encoding="utf-8") as f:
      rows.extend(json.loads(line) for line in f)
  return rows


def read_dead(prefix):
  with open("%s-dead_letter-00000-of-00001.jsonl" % prefix, encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def folder_bytes(folder):
  return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def write_rows(path, rows, tail=b""):
  with open(path, "wb") as f:
    for row in rows:
      f.write(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
    f.write(tail)


@pytest.mark.slow
def test_classifier_answers_bad_rows_and_rerun(exports, signatures, tmp_path):
  import tensorflow as tf
  pairs = [(a, b) for a, b in zip(TEXTS, TEXTS[1:] + [""])]
  rows = [{"id": "p%d" % i, "text_a": a, "text_b": b} for i, (a, b) in enumerate(pairs)]
  write_rows(tmp_path / "in.jsonl", rows,
             tail=b'{"id": "bad", "text_a": "\xff", "text_b": ""}\n\n{"id": "e", "text_a": ""'
                  b', "text_b": "b"}\n{"id": "m", "text_a": "no b"}\n{broken\n')
  (tmp_path / "out").mkdir()
  counts = run_pipeline(exports["classifier"], tmp_path / "in.jsonl", tmp_path / "out" / "cls")
  got = {row["id"]: row for row in read_jsonl(tmp_path / "out" / "cls")}
  assert sorted(got) == sorted(r["id"] for r in rows)
  for row in rows:  # the export, one request of one row at a time
    want = signatures["classifier"](text_a=tf.constant([row["text_a"]]),
                                    text_b=tf.constant([row["text_b"]]))
    answer = got[row["id"]]
    assert set(answer) == {"id", "labels", "label_ids", "probabilities"}
    assert answer["labels"] == want["labels"].numpy()[0].decode()
    assert answer["label_ids"] == int(want["label_ids"].numpy()[0])
    assert_float32_close(answer["probabilities"], want["probabilities"].numpy()[0],
                         ulps=EXPORT_ULPS)
  spread = np.ptp([r["probabilities"] for r in got.values()], axis=0)
  assert spread.max() > 1e-3  # the rows' answers differ: a row's answer is its own
  dead = read_dead(tmp_path / "out" / "cls")
  assert [(d["id"], d["line"], d["error"].split(" (")[0].split(":")[0]) for d in dead] == [
      ("bad", 9, "not UTF-8"), (None, 10, "empty line"), ("e", 11, "empty text in 'text_a'"),
      ("m", 12, "missing input field 'text_b'"), (None, 13, "malformed JSON")]
  assert counts["rows"] == 13 and counts["answered"] == 8 and counts["dead_letters"] == 5
  assert counts["batches"] == 4  # 8 rows in 2 groups, 3 a batch: no batch spans two groups
  # A rerun writes the same bytes; another batch size only moves float32 rounding.
  first = folder_bytes(tmp_path / "out")
  run_pipeline(exports["classifier"], tmp_path / "in.jsonl", tmp_path / "out" / "cls")
  assert folder_bytes(tmp_path / "out") == first
  assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]


@pytest.mark.slow
def test_text_lines_through_multi_label_windows_and_ner_exports(exports, signatures, tmp_path):
  import tensorflow as tf
  (tmp_path / "in.txt").write_text("\n".join(TEXTS[:4]) + "\n\n" + "\n".join(TEXTS[4:]) + "\n",
                                   encoding="utf-8")
  lines = {i + 1: t for i, t in enumerate(TEXTS[:4])}
  lines.update({i + 6: t for i, t in enumerate(TEXTS[4:])})
  for kind in ("multi_label", "windows", "ner"):
    prefix = tmp_path / kind
    counts = run_pipeline(exports[kind], tmp_path / "in.txt", prefix, input_format="text")
    got = {row["id"]: row for row in read_jsonl(prefix)}
    assert sorted(got) == sorted(lines) and counts["dead_letters"] == 1
    assert read_dead(prefix) == [{"id": 5, "file": str(tmp_path / "in.txt"), "line": 5,
                                  "error": "empty text in %r" % ("text" if kind == "ner"
                                                                 else "text_a")}]
    for line, text in lines.items():
      if kind == "multi_label":
        want = signatures[kind](text_a=tf.constant([text]))
        assert got[line]["labels"] == [s.decode() for s in want["labels"].numpy()[0] if s]
        assert got[line]["predicted"] == want["predicted"].numpy()[0].tolist()
        assert_float32_close(got[line]["probabilities"], want["probabilities"].numpy()[0],
                             ulps=EXPORT_ULPS)
      elif kind == "windows":
        want = signatures[kind](text_a=tf.constant([text]))
        assert got[line]["labels"] == want["labels"].numpy()[0].decode()
        assert_float32_close(got[line]["probabilities"], want["probabilities"].numpy()[0],
                             ulps=EXPORT_ULPS)
      else:
        want = {k: v.numpy()[0] for k, v in signatures[kind](text=tf.constant([text])).items()}
        entities = got[line]["entities"]
        assert [(e["text"], e["type"], e["start"], e["end"]) for e in entities] == [
            (want["entity_texts"][k].decode(), want["entity_types"][k].decode(),
             int(want["entity_starts"][k]), int(want["entity_ends"][k]))
            for k in range(int(want["entity_count"]))]
        assert_float32_close([e["score"] for e in entities] or [0.0],
                             want["entity_scores"][:len(entities)].tolist() or [0.0],
                             ulps=EXPORT_ULPS)
    if kind == "multi_label":
      assert {len(r["labels"]) for r in got.values()} == {1, 2}  # the padding "" dropped
    elif kind == "ner":
      assert sum(len(r["entities"]) for r in got.values()) > 2


@pytest.mark.slow
def test_embeddings_as_jsonl_tfrecord_and_parquet(exports, signatures, tmp_path):
  import pyarrow.parquet as pq
  import tensorflow as tf
  write_rows(tmp_path / "in.jsonl", [{"id": i, "sentences": t} for i, t in enumerate(TEXTS)])
  out = {}
  for output_format in ("jsonl", "tfrecord", "parquet"):
    run_pipeline(exports["embedder"], tmp_path / "in.jsonl", tmp_path / output_format,
                 output_format=output_format, num_shards=1)
    out[output_format] = "%s-00000-of-00001.%s" % (tmp_path / output_format, output_format)
  got = {row["id"]: row["embedding"] for row in read_jsonl(tmp_path / "jsonl", 1)}
  for i, text in enumerate(TEXTS):
    want = signatures["embedder"](sentences=tf.constant([text]))["embedding"].numpy()[0]
    assert_float32_close(got[i], want, ulps=EXPORT_ULPS)
  jsonl = {str(i): np.float32(v) for i, v in got.items()}
  records = [tf.train.Example.FromString(r.numpy())
             for r in tf.data.TFRecordDataset(out["tfrecord"])]
  table = pq.read_table(out["parquet"]).to_pydict()
  assert [r.features.feature["id"].bytes_list.value[0].decode() for r in records] == \
      table["id"] == [str(i) for i in range(len(TEXTS))]  # in input order
  for record, row_id, embedding in zip(records, table["id"], table["embedding"]):
    np.testing.assert_array_equal(record.features.feature["embedding"].float_list.value,
                                  jsonl[row_id])
    np.testing.assert_array_equal(np.float32(embedding), jsonl[row_id])


@pytest.mark.slow
def test_command_line_refusals_and_two_local_workers(exports, tmp_path):
  """Everything wrong before the pipeline is one line and exit 2, nothing written; a run on
  two worker processes writes the bytes of the in-process run."""
  write_rows(tmp_path / "in.jsonl", [{"id": i, "text_a": t, "text_b": ""}
                                     for i, t in enumerate(TEXTS)], tail=b"{bad\n")
  (tmp_path / "a_file").write_text("")
  good = ["--export_dir=" + exports["classifier"], "--input=%s" % (tmp_path / "in.jsonl")]
  out = "--output=%s" % (tmp_path / "out" / "cls")
  cases = [
      (["--export_dir=%s" % (tmp_path / "none"), good[1], out], "does not exist"),
      (["--export_dir=%s" % tmp_path, good[1], out], "is not a SavedModel"),
      ([good[0], "--input=%s" % (tmp_path / "*.missing"), out], "No file matches --input pattern"),
      (good + ["--output=%s" % (tmp_path / "a_file" / "cls")], "Cannot write under --output="),
      (good + [out, "--input_format=text"], "--input_format=text gives one text a row, but"),
      (good + [out, "--output_format=parquet"], "is for a text embedder's embeddings"),
      (good + [out, "--batch_sise=4"], "Unknown flag --batch_sise; did you mean --batch_size?"),
      (good + [out, "--num_shards=2", "--batch_size=3", "--direct_num_workers=2",
               "--direct_running_mode=multi_processing"], None),
  ]
  with ScriptSession("predict_beam.py") as process:  # its command lines in one process
    session = functools.partial(run_script, "predict_beam.py", shared=process)
    for args, message in cases[:-1]:
      result = session(*args)
      last = result.stderr.strip().splitlines()[-1]
      assert result.returncode == 2 and last.startswith("error: ") and message in last, (
          args, last)
    assert not (tmp_path / "out").exists()  # nothing written
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "cls-00000-of-00003.jsonl").write_text("")  # another --num_shards
    result = session(*cases[-1][0])
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 2 and "1 file(s) of an earlier run with another --num_shards" \
        in last, last
    # A killed run's leftovers: its temporary folder, and a shard of the run before it.
    (tmp_path / "out" / "cls-00000-of-00003.jsonl").unlink()
    (tmp_path / "out" / ".cls.beam-temp-0123").mkdir()
    (tmp_path / "out" / ".cls.beam-temp-0123" / "cls-00000-of-00002.jsonl").write_text("half")
    (tmp_path / "out" / "cls-00001-of-00002.jsonl").write_text("old\n")
    result = session(*cases[-1][0])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "9 rows (8 answered, 1 dead letters)" in result.stderr
  (tmp_path / "here").mkdir()
  run_pipeline(exports["classifier"], tmp_path / "in.jsonl", tmp_path / "here" / "cls",
               groups=beam_inference.default_groups(
                   beam_options.expand_input(str(tmp_path / "in.jsonl"), "--input"), 3))
  assert folder_bytes(tmp_path / "out") == folder_bytes(tmp_path / "here")  # leftovers gone


@pytest.mark.slow
def test_squad_and_swag_answers_equal_one_request_at_a_time(exports, signatures, tmp_path):
  import tensorflow as tf
  rows = {
      "squad": [{"id": i, "question": q, "context": c} for i, (q, c) in enumerate([
          ("Who visited Paris?", TEXTS[0]), ("What sat?", "The cat sat on the mat. " * 5),
          ("Where?", TEXTS[2]), ("Which app?", TEXTS[7])])],
      "swag": [{"id": i, "context": c, "ending0": TEXTS[(i + 1) % 8], "ending1": TEXTS[i + 2],
                "ending2": "x", "ending3": TEXTS[3]} for i, c in enumerate(TEXTS[:4])],
  }
  for kind, kind_rows in rows.items():
    write_rows(tmp_path / ("%s.jsonl" % kind), kind_rows)
    counts = run_pipeline(exports[kind], tmp_path / ("%s.jsonl" % kind), tmp_path / kind,
                          batch_size=2)
    assert counts["answered"] == len(kind_rows) and counts["dead_letters"] == 0
    got = {row.pop("id"): row for row in read_jsonl(tmp_path / kind)}
    for row in kind_rows:
      want = {k: v.numpy()[0] for k, v in signatures[kind](
          **{name: tf.constant([row[name]]) for name in row if name != "id"}).items()}
      answer = got[row["id"]]
      assert sorted(answer) == sorted(want)
      for name, value in want.items():
        if isinstance(value, bytes):
          assert answer[name] == value.decode(), name
        elif value.dtype.kind == "f":
          assert_float32_close(answer[name], value, ulps=EXPORT_ULPS, err_msg=name)
        else:
          assert answer[name] == value.tolist(), name
      if kind == "squad" and answer["start_char"] >= 0:  # the offsets index the context
        assert row["context"][answer["start_char"]:answer["end_char"]] == answer["answer"]
