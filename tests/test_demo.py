"""demo.py end to end (--quick), its re-run behaviour, and the sample data it reads.

The demo is a newcomer's first command, so it is tested the way they run it:
as a subprocess of the real runners, checking every stage's output.
"""

import importlib.util
import json
import pathlib

import pytest

from helpers import ROOT, VOCAB_UNCASED, run_script

pytestmark = pytest.mark.slow  # every test here runs a runner, an export or a pipeline

DATA = pathlib.Path(ROOT) / "data"
QUICK_STEPS = 20  # demo.QUICK["pretrain_steps"]
QUICK_SEQ = 32  # demo.QUICK["max_seq_length"]


def run_demo(*args):
  return run_script("demo.py", *args, timeout=600)


def assert_one_line_error(result, message):
  """As the runners: exit code 2 and one line "error: ..." naming the problem, no traceback."""
  assert result.returncode == 2, result.stderr[-3000:]
  lines = result.stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


def answers(stdout):
  return [json.loads(line[len("answer: "):]) for line in stdout.splitlines()
          if line.startswith("answer: ")]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
  """One --quick demo run: (output folder, completed process)."""
  out = tmp_path_factory.mktemp("demo") / "demo_output"
  result = run_demo("--quick", "--output_dir=%s" % out)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  return out, result


def test_pretraining_records_parse(quick_run):
  import tensorflow as tf
  out, _ = quick_run
  records = list(tf.data.TFRecordDataset(str(out / "pretraining_data.tfrecord")).take(5))
  assert len(records) == 5
  for record in records:
    features = tf.train.Example.FromString(record.numpy()).features.feature
    assert len(features["input_ids"].int64_list.value) == QUICK_SEQ
    assert len(features["segment_ids"].int64_list.value) == QUICK_SEQ
    assert len(features["masked_lm_positions"].int64_list.value) == 5
    assert features["next_sentence_labels"].int64_list.value[0] in (0, 1)


def test_pretraining_checkpoint_in_google_layout(quick_run):
  import tensorflow as tf
  out, _ = quick_run
  prefix = out / "pretraining" / ("model.ckpt-%d" % QUICK_STEPS)
  reader = tf.train.load_checkpoint(str(prefix))
  shapes = reader.get_variable_to_shape_map()
  config = json.loads((out / "bert_config.json").read_text())
  assert shapes["bert/embeddings/word_embeddings"] == [config["vocab_size"], 128]
  assert reader.get_tensor("global_step") == QUICK_STEPS
  assert config["vocab_size"] == len((DATA / "vocab.txt").read_text(encoding="utf-8")
                                     .splitlines())


def test_classifier_eval_and_export_agree(quick_run):
  """eval_results.txt's accuracy equals the exported SavedModel's answers on the dev set."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (registers the export's tokenizer ops)

  from bert_tf.tasks import glue
  out, _ = quick_run
  results = dict(line.split(" = ") for line in
                 (out / "classifier" / "eval_results.txt").read_text().splitlines())
  assert "eval_f1" in results
  assert (out / "saved_model" / "assets.extra" / "bert_tf_export.json").is_file()
  examples = glue.MrpcProcessor().get_dev_examples(str(DATA / "mrpc_sample"))
  serve = tf.saved_model.load(str(out / "saved_model")).signatures["serving_default"]
  labels = serve(text_a=tf.constant([e.text_a for e in examples]),
                 text_b=tf.constant([e.text_b for e in examples]))["labels"].numpy()
  accuracy = sum(l.decode() == e.label for l, e in zip(labels, examples)) / len(examples)
  # Same model, two paths (records + Trainer.evaluate vs raw text + in-graph tokenizer).
  assert float(results["eval_accuracy"]) == pytest.approx(accuracy, abs=1.01 / len(examples))


def test_fresh_process_answers(quick_run):
  _, result = quick_run
  found = answers(result.stdout)
  assert len(found) == 2
  for answer in found:
    assert answer["label"] in ("0", "1")
    assert len(answer["probabilities"]) == 2
    assert sum(answer["probabilities"]) == pytest.approx(1.0, abs=1e-5)
  assert "imported bert_tf: False" in result.stdout
  assert "eval_accuracy" in result.stdout and "Where everything went" in result.stdout


def test_rerun_skips_finished_stages(quick_run):
  out, _ = quick_run
  watched = [out / "pretraining_data.tfrecord",
             out / "pretraining" / ("model.ckpt-%d.index" % QUICK_STEPS),
             out / "pretraining" / "eval_results.txt",
             out / "classifier" / "eval_results.txt",
             out / "saved_model" / "saved_model.pb"]
  before = {path: path.stat().st_mtime_ns for path in watched}
  result = run_demo("--quick", "--output_dir=%s" % out)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.count("skipped: ") == 3
  assert "create_pretraining_data.py \\" not in result.stdout  # no stage command was run
  assert {path: path.stat().st_mtime_ns for path in watched} == before
  assert len(answers(result.stdout)) == 2


def test_other_settings_refused(quick_run):
  out, _ = quick_run
  result = run_demo("--output_dir=%s" % out)  # a full run into a --quick folder
  assert_one_line_error(result, "holds a demo run with other settings (quick)")


def test_clean_refuses_a_foreign_folder(tmp_path):
  keep = tmp_path / "notes.txt"
  keep.write_text("not a demo")
  result = run_demo("--quick", "--clean", "--output_dir=%s" % tmp_path)
  assert_one_line_error(result, "exists and is not a demo output folder")
  assert keep.read_text() == "not a demo"


def test_one_demo_at_a_time_per_folder(tmp_path):
  import fcntl
  with open(tmp_path / ".demo.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running demo.py holds it
    result = run_demo("--quick", "--output_dir=%s" % tmp_path)
  assert_one_line_error(result, "another demo.py is running in")
  assert sorted(p.name for p in tmp_path.iterdir()) == [".demo.lock"]


# ------------------------------------------------------------------ sample data

def load_generator():
  spec = importlib.util.spec_from_file_location("make_sample_data",
                                                DATA / "make_sample_data.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_committed_sample_data_is_the_generators_output():
  for relative, text in load_generator().build().items():
    assert (DATA / relative).read_bytes() == text.encode("utf-8"), relative


def test_sample_data_is_small():
  total = sum(path.stat().st_size for path in DATA.rglob("*") if path.is_file())
  assert total < 5 * 1024 * 1024


def test_vocab_is_bert_base_uncased():
  assert (DATA / "vocab.txt").read_bytes() == pathlib.Path(VOCAB_UNCASED).read_bytes()


def test_mrpc_sample_reads_and_is_balanced():
  from bert_tf.tasks import glue
  processor = glue.MrpcProcessor()
  for examples, size in [(processor.get_train_examples(str(DATA / "mrpc_sample")), 4000),
                         (processor.get_dev_examples(str(DATA / "mrpc_sample")), 600),
                         (processor.get_test_examples(str(DATA / "mrpc_sample")), 400)]:
    assert len(examples) == size
    assert all(e.text_a and e.text_b for e in examples)
  labels = [e.label for e in processor.get_train_examples(str(DATA / "mrpc_sample"))]
  assert 0.45 < labels.count("1") / len(labels) < 0.55


def test_pretraining_corpus_format():
  text = (DATA / "pretraining_corpus.txt").read_text(encoding="utf-8")
  documents = text.strip("\n").split("\n\n")
  assert len(documents) >= 300
  assert all(line.strip() for document in documents for line in document.split("\n"))


def test_squad_sample_reads():
  from bert_tf.tasks import squad
  examples = squad.read_squad_examples(str(DATA / "squad_sample.json"), is_training=True)
  data = json.loads((DATA / "squad_sample.json").read_text(encoding="utf-8"))["data"]
  questions = sum(len(p["qas"]) for article in data for p in article["paragraphs"])
  assert len(examples) == questions > 100  # none skipped: every answer is at its offset


def test_swag_sample_reads():
  from bert_tf.tasks import swag
  for name, size in [("train.csv", 400), ("val.csv", 100)]:
    examples = swag.read_swag_examples(str(DATA / "swag_sample" / name), has_labels=True)
    assert len(examples) == size
    assert all(len(e.endings) == 4 and 0 <= e.label < 4 for e in examples)
