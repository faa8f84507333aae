"""bert_tf: a faithful TensorFlow 2 / Keras 3 reimplementation of Google's BERT.

Importing the package before TensorFlow turns on oneDNN's CPU kernels (unless the
user already chose with TF_ENABLE_ONEDNN_OPTS): on x86 CPUs they run BERT's float32
matmuls markedly faster than TensorFlow's default Eigen kernels.
"""

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

__version__ = "0.1.0"
