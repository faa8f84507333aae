"""bert_tf as an installable package (pyproject.toml), and runs that say nothing alarming."""

import ast
import email
import importlib.metadata
import os
import re
import shutil
import sys
import zipfile

import pytest

from helpers import FIXTURES, PROGRAMS, ROOT, TINY, VOCAB_UNCASED, run_script


def _requirements(name):
  """The requirement lines of requirements/<name>.txt, comments and blanks dropped."""
  with open(os.path.join(ROOT, "requirements", name + ".txt"), encoding="utf-8") as f:
    lines = (line.split("#", 1)[0].strip() for line in f)
    return [line for line in lines if line]


def _project(requirement):
  """'tensorflow-text==2.21.1' -> 'tensorflow-text' (PEP 503 normalised)."""
  return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group()).lower()


def _source_modules():
  """bert_tf's .py files, relative to the checkout, walked independently of setuptools."""
  found = set()
  for folder, dirs, files in os.walk(os.path.join(ROOT, "bert_tf")):
    dirs[:] = [d for d in dirs if d != "__pycache__"]
    found.update(os.path.relpath(os.path.join(folder, f), ROOT).replace(os.sep, "/")
                 for f in files if f.endswith(".py"))
  return found


def test_every_third_party_import_of_the_package_is_a_declared_dependency():
  """An import the runtime requirements do not cover fails only in a fresh install."""
  runtime = {_project(r) for r in _requirements("runtime")}
  beam = {_project(r) for r in _requirements("beam")}
  distributions = importlib.metadata.packages_distributions()
  missing = []
  for path in sorted(_source_modules()):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
      elif isinstance(node, ast.ImportFrom) and not node.level:
        names = [node.module]
      else:
        continue
      for name in names:
        top = name.split(".")[0]
        if top == "bert_tf" or top in sys.stdlib_module_names:
          continue
        projects = {_project(d) for d in distributions.get(top, [top])}
        # The Beam modules need the beam extra (Parquet output: pyarrow, which apache-beam
        # requires; cli.import_beam says how to install it when it is missing); the MediaPipe
        # metadata writer runs in a Python of its own (mediapipe 0.10 cannot share
        # TensorFlow's protobuf).
        allowed = runtime | {"bert_tf/tasks/pretraining/records_beam.py": beam,
                             "bert_tf/utils/beam_options.py": beam, "bert_tf/utils/cli.py": beam,
                             "bert_tf/inference/beam_inference.py": beam | {"pyarrow"},
                             "bert_tf/export/mediapipe_metadata.py": {"mediapipe"}}.get(path, set())
        if not projects & allowed:
          missing.append("%s imports %s" % (path, top))
  assert not missing, missing


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
  """The wheel `pip wheel` builds offline from a copy of the checkout (a build writes build/
  and *.egg-info beside the sources; the checkout stays clean)."""
  root = tmp_path_factory.mktemp("wheel")
  source = root / "src"
  shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
      ".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache"))
  result = run_script("pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w",
                      root / "dist", source)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
  (path,) = (root / "dist").glob("bert_tf-*.whl")
  return path


@pytest.mark.slow
def test_wheel_holds_every_module_and_declares_the_pinned_requirements(wheel):
  with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    metadata = email.message_from_bytes(z.read(metadata))
  assert {n for n in names if n.endswith(".py")} == _source_modules()
  assert {n.split("/")[0] for n in names} == {"bert_tf", metadata["Name"].replace("-", "_") + "-"
                                              + metadata["Version"] + ".dist-info"}
  import bert_tf
  assert metadata["Version"] == bert_tf.__version__
  requires = metadata.get_all("Requires-Dist")

  def declared(extra=None):
    marker = '; extra == "%s"' % extra if extra else None
    return sorted(r.split(";")[0].replace(" ", "") for r in requires
                  if (marker is None and ";" not in r) or (marker and r.endswith(marker)))

  def normalised(reqs):  # metadata sorts the specifiers ('numpy<3,>=1.26')
    return sorted(_project(r) + ",".join(sorted(r[len(_project(r)):].split(","))) for r in reqs)

  for extra, name in ((None, "runtime"), ("beam", "beam"), ("test", "test")):
    assert normalised(declared(extra)) == normalised(_requirements(name)), name
  # requirements.txt (what CI installs) is exactly the three lists.
  with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as f:
    lines = [line.strip() for line in f if line.strip() and not line.startswith("#")]
  assert lines == ["-r requirements/runtime.txt", "-r requirements/beam.txt",
                   "-r requirements/test.txt"]


@pytest.mark.slow
def test_installed_wheel_runs_a_runner_from_any_folder(wheel, tmp_path):
  """Installed (here into a folder on PYTHONPATH, with this environment's dependencies), the
  package imports from anywhere and a runner copied out of the checkout runs on it."""
  site = tmp_path / "site"
  result = run_script("pip", "install", "--no-deps", "--no-index", "--target", site, wheel)
  assert result.returncode == 0, result.stderr[-2000:]
  work = tmp_path / "elsewhere"
  work.mkdir()
  shutil.copy(os.path.join(ROOT, "extract_features.py"), work)
  (work / "input.txt").write_text("Hello world ||| a second sentence\nJust one.\n")
  env = {"PYTHONPATH": site, "TF_CPP_MIN_LOG_LEVEL": "2"}
  where = run_script(PROGRAMS + "where_is_bert_tf.py", cwd=work, env=env, timeout=120)
  assert where.returncode == 0, where.stderr[-2000:]
  assert where.stdout.strip() == str(site / "bert_tf" / "__init__.py")
  result = run_script(str(work / "extract_features.py"), "--input_file=input.txt",
                      "--output_file=out.jsonl", "--vocab_file=%s" % VOCAB_UNCASED,
                      "--bert_config_file=%s" % TINY.config, "--init_checkpoint=%s" % TINY.ckpt,
                      "--do_lower_case=True", "--layers=-1", "--max_seq_length=16", cwd=work,
                      env=env)
  assert result.returncode == 0, result.stderr[-3000:]
  lines = (work / "out.jsonl").read_text().splitlines()
  assert len(lines) == 2 and '"token": "[CLS]"' in lines[0]


@pytest.mark.slow
def test_cpu_run_with_an_export_prints_no_error_level_line(tmp_path):
  """A CPU-only training run that exports: no glog error line (E<digits>, e.g. TensorFlow's
  'failed call to cuInit' where no NVIDIA driver exists) and no note about renamed inputs."""
  # As a user's shell has them: bert_tf decides, not this test process.
  env = dict.fromkeys(("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "TF_ENABLED_DEVICE_TYPES"))
  result = run_script(
      "run_classifier.py", "--task_name=MRPC",
      "--data_dir=%s" % os.path.join(FIXTURES, "classifier_data", "MRPC"),
      "--vocab_file=%s" % VOCAB_UNCASED, "--bert_config_file=%s" % TINY.config,
      "--init_checkpoint=%s" % TINY.ckpt, "--max_seq_length=32", "--do_train",
      "--train_batch_size=4", "--num_train_epochs=1", "--output_dir=%s" % (tmp_path / "out"),
      "--export_dir=%s" % (tmp_path / "export"), cwd=tmp_path, env=env, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  assert (tmp_path / "export" / "saved_model.pb").exists()
  errors = [line for line in result.stderr.splitlines() if re.match(r"[EF]\d", line)]
  assert not errors, errors
  assert "unsupported characters" not in result.stderr
