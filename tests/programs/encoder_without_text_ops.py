"""The TF Hub encoder export called in a process without tensorflow_text (it needs none);
prints its pooled output's shape (tests/test_export_tfhub.py). argv: the encoder export."""

import sys

import tensorflow as tf

encoder = tf.saved_model.load(sys.argv[1])
assert "tensorflow_text" not in sys.modules
ones = tf.ones([1, 4], tf.int32)
out = encoder(dict(input_word_ids=ones, input_mask=ones, input_type_ids=0 * ones))
print(out["pooled_output"].shape)
