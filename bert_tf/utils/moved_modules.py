"""The flat module paths of bert_tf 0.1's first layout, kept importable for one release.

`import bert_tf.input_pipeline` (and every other module that moved into a folder) still
works: the old name is the new module, with a DeprecationWarning naming where it went. The
folders that kept their old module's name (text, training, checkpoints, runner, export) hand
on its public names themselves.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

# Old module (under bert_tf.) -> where it is now (under bert_tf.).
MOVED = {
    "beam_inference": "inference.beam_inference",
    "beam_options": "utils.beam_options",
    "checkpoint_keeper": "training.checkpoint_keeper",
    "checks": "checkpoints.checks",
    "cli": "utils.cli",
    "conversion": "checkpoints.conversion",
    "cpu": "utils.cpu",
    "distribution": "training.distribution",
    "example_codec": "data.example_codec",
    "feature_extraction": "inference.feature_extraction",
    "head_labels": "checkpoints.head_labels",
    "hf_checkpoints": "checkpoints.hf_files",
    "hf_state": "checkpoints.hf_state",
    "input_pipeline": "data.input_pipeline",
    "litert_export": "export.litert",
    "names": "checkpoints.names",
    "packing": "data.packing",
    "precision": "utils.precision",
    "preemption": "training.preemption",
    "pretraining_corpus": "tasks.pretraining.corpus",
    "pretraining_data": "tasks.pretraining.records",
    "pretraining_data_beam": "tasks.pretraining.records_beam",
    "pretraining_instances": "tasks.pretraining.instances",
    "progress": "utils.progress",
    "run_folder": "checkpoints.run_folder",
    "run_lock": "runner.run_lock",
    "runner_flags": "runner.shared_flags",
    "sentence_models": "checkpoints.sentence_models",
    "text_embedder": "inference.text_embedder",
    "text_packing": "text.packing",
    "text_unicode": "text.unicode",
    "text_windows": "text.windows",
    "tf_shims": "text.tf_shims",
    "tfhub_export": "export.tfhub",
    "user_files": "utils.user_files",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Finds bert_tf.<old> and loads it as the module now at bert_tf.<new>."""

  def find_spec(self, fullname, path=None, target=None):
    package, _, old = fullname.partition(".")
    if package != "bert_tf" or old not in MOVED:
      return None
    return importlib.util.spec_from_loader(fullname, self)

  def create_module(self, spec):
    new = "bert_tf." + MOVED[spec.name.partition(".")[2]]
    warnings.warn(f"{spec.name} moved to {new}; the old name goes in bert_tf 0.2.",
                  DeprecationWarning, stacklevel=3)
    return importlib.import_module(new)

  def exec_module(self, module):
    """The module is the moved one, already run."""


def install():
  """Makes the old paths importable (once per process)."""
  if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
    sys.meta_path.append(_Alias())
