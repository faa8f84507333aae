"""bert_tf: a faithful TensorFlow 2 / Keras 3 reimplementation of Google's BERT.

Importing the package before TensorFlow sets environment defaults TensorFlow reads
when it loads (a variable the user set is left alone):

- TF_ENABLED_DEVICE_TYPES: every device type but the CUDA ones (GPU, XLA_GPU), on a
  Linux machine without NVIDIA's driver library (libcuda.so.1) and without
  TensorFlow device plugins. TensorFlow's GPU device factory then never calls
  cuInit, which on such a machine fails and is logged as an error ("E0000 ...
  failed call to cuInit") that users read as a failed run. Where the driver exists
  nothing changes, so GPUs keep working; TPUs are not affected.
- TF_ENABLE_ONEDNN_OPTS=1: on x86 CPUs oneDNN's kernels run BERT's float32 matmuls
  markedly faster than TensorFlow's default Eigen kernels.
"""

import ctypes
import os
import site
import sys

# Every device factory TensorFlow registers, the CUDA ones (GPU, XLA_GPU) left out.
_NON_CUDA_DEVICE_TYPES = "CPU,XLA_CPU,TPU,TPU_SYSTEM"


def _without_cuda_driver():
  """True on Linux without NVIDIA's driver library and without TensorFlow device plugins
  (site-packages/tensorflow-plugins, where TensorFlow looks for them; their device types are
  theirs to name). Cheap: a few stat calls and one dlopen."""
  if not sys.platform.startswith("linux") or os.environ.get("TF_PLUGGABLE_DEVICE_LIBRARY_PATH"):
    return False
  folders = {p for p in sys.path if p} | set(getattr(site, "getsitepackages", list)())
  if site.ENABLE_USER_SITE and site.USER_SITE:
    folders.add(site.USER_SITE)
  if any(os.path.isdir(os.path.join(f, "tensorflow-plugins")) for f in folders):
    return False
  try:
    ctypes.CDLL("libcuda.so.1")  # What TensorFlow loads for cuInit (and would load anyway).
  except OSError:
    return True
  return False


if "TF_ENABLED_DEVICE_TYPES" not in os.environ and _without_cuda_driver():
  os.environ["TF_ENABLED_DEVICE_TYPES"] = _NON_CUDA_DEVICE_TYPES
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

__version__ = "0.1.0"

from bert_tf.utils import moved_modules  # noqa: E402  (after the environment defaults)

moved_modules.install()
