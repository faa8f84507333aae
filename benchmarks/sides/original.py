"""google-research/bert's create_pretraining_data.py, unmodified, on TensorFlow 2: its TF1 names
served by tf.compat.v1 and a minimal `six`. common.run_side puts the original's checkout first
on the path (and runs in it), so that its own modules are the ones imported."""

import sys
import types

from benchmarks import sides, timing


def run(argv):
  """Seconds the original's main takes with the flags `argv`."""
  import tensorflow as tf
  six = types.ModuleType("six")
  six.PY2, six.PY3, six.string_types = False, True, (str,)
  six.iteritems = lambda d: iter(d.items())
  sys.modules["six"] = six
  sys.modules["tensorflow"] = tf.compat.v1
  import create_pretraining_data as original  # pylint: disable=import-outside-toplevel

  def main():
    try:
      tf.compat.v1.app.run(original.main, argv=["create_pretraining_data.py"] + argv)
    except SystemExit:  # app.run exits when main returns
      pass

  return {"seconds": timing.timed(main)[1]}


if __name__ == "__main__":
  sides.main({"run": run})
