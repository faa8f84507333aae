"""create_pretraining_data_beam: the union of create_pretraining_data.py's single-file runs."""

import collections

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
import pytest
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.data import example_codec
from bert_tf.tasks.pretraining import records_beam
from bert_tf.utils import beam_options
from helpers import FIXTURES, VOCAB_UNCASED, run_script

pytestmark = pytest.mark.slow  # every test here runs a runner, an export or a pipeline

DATA = FIXTURES / "pretraining_data"
FLAGS = ["--vocab_file=%s" % VOCAB_UNCASED, "--dupe_factor=2", "--max_seq_length=64",
         "--max_predictions_per_seq=10"]


def _beam(*args):
  return run_script("create_pretraining_data_beam.py", *args)


def _records(paths):
  """Multiset of the parsed records in the files."""
  return collections.Counter(
      tuple(sorted((name, tuple(values)) for name, values in
                   example_codec.parse_example(r.numpy()).items()))
      for r in tf.data.TFRecordDataset([str(p) for p in paths]))


def _split_corpus(folder, names):
  """The fixture corpus dealt out document by document into several files."""
  documents = (DATA / "corpus.txt").read_text(encoding="utf-8").strip().split("\n\n")
  folder.mkdir()
  for k, name in enumerate(names):
    (folder / name).write_text("\n\n".join(documents[k::len(names)]) + "\n", encoding="utf-8")
  return [folder / name for name in sorted(names)]


def _error_lines(result):
  return [line for line in result.stderr.splitlines() if line.startswith("error: ")]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  # Names out of glob order: the contract is about the sorted list.
  return _split_corpus(tmp_path_factory.mktemp("corpus") / "in", ["c.txt", "a.txt", "b.txt"])


@pytest.fixture(scope="module")
def single_file_runs(corpus, tmp_path_factory):
  """create_pretraining_data.py run on each file alone, seed 100 + its sorted position."""
  out = tmp_path_factory.mktemp("single")
  files = []
  for i, path in enumerate(corpus):
    files.append(out / ("%d.tfrecord" % i))
    result = run_script("create_pretraining_data.py", "--input_file=%s" % path,
                        "--output_file=%s" % files[-1], "--random_seed=%d" % (100 + i), *FLAGS)
    assert result.returncode == 0, result.stderr
  return files


def test_beam_records_are_the_union_of_the_single_file_runs(corpus, single_file_runs, tmp_path):
  prefix = tmp_path / "out" / "examples"
  prefix.parent.mkdir()
  result = _beam("--input_file=%s,%s" % (corpus[2].parent / "[ab].txt", corpus[2]),
                 "--output_file=%s" % prefix, "--random_seed=100", "--direct_num_workers=2",
                 *FLAGS)
  assert result.returncode == 0, result.stderr
  shards = sorted(prefix.parent.iterdir())
  assert [p.name for p in shards] == ["examples-00000-of-00002", "examples-00001-of-00002"]
  want = _records(single_file_runs)
  assert sum(want.values()) > 300 and len(want) == sum(want.values())  # no record repeats
  assert _records(shards) == want
  assert all(_records([s]) for s in shards)  # both workers wrote
  assert "Wrote %d records from 3 input file(s) to 2 shard(s)" % sum(want.values()) in result.stderr
  # The output is never mixed with an earlier run's.
  again = _beam("--input_file=%s" % corpus[0], "--output_file=%s" % prefix, *FLAGS)
  assert again.returncode == 2
  assert _error_lines(again) == [
      "error: 2 shard(s) of an earlier run are in the way (%s-00000-of-00002, ...); a reader "
      "would mix them with this run's. Delete them or choose another --output_file." % prefix]


def test_one_file_gives_the_original_scripts_records(tmp_path):
  """One input file with seed s: the records Google's script wrote for it (fixture)."""
  tokenizer = tokenization.FullTokenizer(VOCAB_UNCASED, do_lower_case=True)
  files = beam_options.expand_input(str(DATA / "corpus.txt"), "--input_file")
  settings = records_beam.Settings(random_seed=12345, max_seq_length=128,
                                            max_predictions_per_seq=20, dupe_factor=2)
  prefix = str(tmp_path / "one")
  with beam.Pipeline(options=PipelineOptions(["--runner=DirectRunner"])) as pipeline:
    records_beam.build(pipeline, files, prefix, tokenizer, settings, num_shards=3)
  shards = sorted(tmp_path.glob("one-*"))
  assert [p.name for p in shards] == ["one-0000%d-of-00003" % k for k in range(3)]
  want = _records([DATA / "a_seq128.tfrecord"])
  assert sum(want.values()) == 354
  assert _records(shards) == want


def _run_with_a_bad_file(corpus, tmp_path, bad_bytes):
  """The Beam script on a good file and b.txt holding `bad_bytes`, into an empty folder;
  it must fail. (result, the path of b.txt, the output folder)."""
  folder = tmp_path / "in"
  folder.mkdir()
  (folder / "a.txt").write_bytes(corpus[0].read_bytes())
  (folder / "b.txt").write_bytes(bad_bytes)
  out = tmp_path / "out"
  out.mkdir()
  result = _beam("--input_file=%s" % (folder / "*.txt"), "--output_file=%s" % (out / "examples"),
                 *FLAGS)
  assert result.returncode == 2
  return result, folder / "b.txt", out


def test_file_without_text_stops_before_anything_is_written(corpus, tmp_path):
  result, bad, out = _run_with_a_bad_file(corpus, tmp_path, b"\n \n\t\n")
  assert _error_lines(result) == [
      "error: Input file %s has no text to make pretraining examples from (it is empty, or "
      "every line is blank or tokenizes to nothing); remove it from --input_file." % bad]
  assert "Running the pipeline" not in result.stderr
  assert not list(out.iterdir())


def test_a_workers_error_is_one_line_and_leaves_no_output(corpus, tmp_path):
  # Not UTF-8 on line 3: found only by a worker.
  result, bad, out = _run_with_a_bad_file(corpus, tmp_path, b"Good line.\n\nAnother caf\xe9.\n")
  assert _error_lines(result) == [
      "error: Input file %s line 3 is not UTF-8 (byte 12); convert the corpus to UTF-8." % bad]
  assert result.stderr.rstrip().endswith(_error_lines(result)[0])
  assert not list(out.iterdir())  # neither shards nor Beam's temporary folder


def test_flags_help_and_typos(tmp_path):
  result = _beam("--help")
  assert "--input_file" in result.stdout and "--runner" in result.stdout
  assert "Traceback" not in result.stderr
  result = _beam("--input_file=x.txt", "--output_file=%s" % (tmp_path / "o"),
                 "--max_seq_lenght=64", *FLAGS)
  assert result.returncode == 2
  assert _error_lines(result) == ["error: Unknown flag --max_seq_lenght; did you mean "
                                  "--max_seq_length?"]
  result = _beam("--input_file=%s" % (tmp_path / "none*.txt"),
                 "--output_file=%s" % (tmp_path / "o"), *FLAGS)
  assert result.returncode == 2
  assert _error_lines(result) == ["error: No file matches --input_file pattern %s." %
                                  (tmp_path / "none*.txt")]


def test_masking_shares_give_the_single_process_records(tmp_path):
  """A Table 8 row other than the default (MASK/SAME/RND 0/20/80) reaches the workers: the
  records are create_pretraining_data.py's with the same flags."""
  corpus = DATA / "corpus.txt"
  flags = FLAGS + ["--random_seed=12345", "--mask_token_prob=0.0", "--random_token_prob=0.8"]
  single = tmp_path / "single.tfrecord"
  result = run_script("create_pretraining_data.py", "--input_file=%s" % corpus,
                      "--output_file=%s" % single, *flags)
  assert result.returncode == 0, result.stderr
  prefix = tmp_path / "out" / "examples"
  prefix.parent.mkdir()
  result = _beam("--input_file=%s" % corpus, "--output_file=%s" % prefix,
                 "--direct_running_mode=in_memory", *flags)
  assert result.returncode == 0, result.stderr
  want = _records([single])
  assert sum(want.values()) > 300
  assert _records(sorted(prefix.parent.iterdir())) == want
  mask_id = tokenization.FullTokenizer(VOCAB_UNCASED).vocab["[MASK]"]
  predicted = masks = 0
  for record, count in want.items():
    fields = dict(record)
    for position, weight in zip(fields["masked_lm_positions"], fields["masked_lm_weights"]):
      if weight:
        predicted += count
        masks += count * (fields["input_ids"][position] == mask_id)
  assert predicted > 3000 and masks <= 3  # [MASK] only when the random word is [MASK]
