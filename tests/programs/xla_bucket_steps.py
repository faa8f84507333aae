"""Four training steps of the tiny classifier under XLA on cut batches, three of length bucket
32 and one of 48 (tests/test_dynamic_length.py counts the compilations XLA_FLAGS dumps)."""

import numpy as np
import tensorflow as tf

from bert_tf import checkpoints, optimization, training
from bert_tf.tasks import glue
from helpers import tiny_config

lengths = [[18, 25], [30, 21], [27, 29], [40, 12]]  # three batches in bucket 32, one in 48
mask = (np.arange(64)[None, None, :] < np.array(lengths)[..., None]).astype(np.int32)
features = {"input_word_ids": 7 * mask, "input_mask": mask, "input_type_ids": 0 * mask,
            "label_ids": np.zeros((4, 2, 1), np.int32),
            "is_real_example": np.ones((4, 2, 1), np.int32)}
strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
task = glue.ClassificationTask(tiny_config(), 2, dynamic_length=True, length_bucket=16)
with strategy.scope():
  model = task.create_model()
  optimizer = optimization.create_optimizer(
      1e-3, 10, 2, checkpoints.variable_map(model.encoder, model.heads))
step = training.TrainStep(strategy, task, model, optimizer, jit_compile=True)
iterator = iter(tf.data.Dataset.from_tensor_slices(features))
for _ in range(4):
  step.step(iterator)
