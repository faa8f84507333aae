"""Packages the bert_tf library, for Apache Beam workers on remote runners.

    python create_pretraining_data_beam.py ... --runner=DataflowRunner --setup_file=./setup.py

Beam builds a source package from this file and installs it on every worker. The
workers only tokenize, mask and encode records (pure Python; TensorFlow is not
needed there), so nothing beyond apache-beam itself is required. Everything else
runs from the checkout (see README.md).
"""

import setuptools

setuptools.setup(
    name="bert_tf",
    version="0.1.0",
    description="A faithful TensorFlow 2 / Keras 3 reimplementation of Google's BERT",
    packages=["bert_tf", "bert_tf.tasks", "bert_tf.tasks.glue", "bert_tf.tasks.pretraining",
              "bert_tf.tasks.squad", "bert_tf.tasks.swag"],
    python_requires=">=3.9",
)
