"""The training loop, what a run keeps in --output_dir, preemption, distribution.

The loop's public names (bert_tf.training.trainer) are handed on here."""

from bert_tf.training.trainer import Trainer, TrainStep, write_results
