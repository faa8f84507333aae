"""The tensorflow-text ops the exports need: exactly the two the README names for TF Serving."""


import pytest

from bert_tf import checkpoints
from bert_tf.export import tfhub
from bert_tf.tasks import glue, squad
from bert_tf.tasks.glue.export import export_classifier
from bert_tf.tasks.squad import export as squad_export
from helpers import PROGRAMS, TINY, VOCAB_UNCASED, printed_json, run_script, tiny_config

pytestmark = pytest.mark.slow

def test_exports_need_only_the_two_documented_tensorflow_text_ops(tmp_path):
  classifier = glue.ClassifierModel(tiny_config(), num_labels=2)
  checkpoints.load_checkpoint(TINY.ckpt, classifier.encoder)
  span = squad.SquadModel(tiny_config())
  checkpoints.load_checkpoint(TINY.ckpt, span.encoder)
  paths = {
      "classifier": export_classifier(str(tmp_path / "classifier"), classifier, VOCAB_UNCASED,
                                      True, 32, ["0", "1"], text_pair=True),
      "squad": squad_export.export_squad(str(tmp_path / "squad"), span, VOCAB_UNCASED, True, 64,
                                         32, 16, 30, 20),
  }
  paths["encoder"], paths["preprocessor"] = tfhub.export_from_checkpoint(
      TINY.config, VOCAB_UNCASED, TINY.ckpt, True, str(tmp_path / "encoder"),
      str(tmp_path / "preprocessor"), seq_length=32)
  # In a process that loads no tensorflow-text: the op types plain TensorFlow does not register.
  unregistered = printed_json(run_script(PROGRAMS + "unregistered_ops.py", *paths.values()))
  text_ops = ["FastWordpieceTokenizeWithOffsets", "RegexSplitWithOffsets"]
  assert {name: unregistered[str(path)] for name, path in paths.items()} == {
      "classifier": text_ops, "squad": text_ops, "preprocessor": text_ops, "encoder": []}
