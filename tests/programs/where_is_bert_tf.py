"""Prints the file bert_tf is imported from, after importing bert_tf.tasks too
(tests/test_packaging.py: an installed wheel, not the checkout)."""

import bert_tf
import bert_tf.tasks  # noqa: F401  (the subpackages are in the wheel)

print(bert_tf.__file__)
