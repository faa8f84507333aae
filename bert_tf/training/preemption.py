"""Stopping a training run cleanly on a signal (preemption, Ctrl-C), saving its state first.

On one host, `StopOnSignals` turns SIGTERM/SIGINT into a request the loop checks after
each step. Under multi-worker and TPU strategies a SIGTERM on one worker must make
every worker save at the same step, which TensorFlow's PreemptionCheckpointHandler
agrees through the cluster's coordination service (`cluster_handler`).
"""

import signal
import threading

from absl import logging
import tensorflow as tf


class StopOnSignals:
  """Turns the first SIGTERM or SIGINT into a request to stop after the current step.

  Python runs signal handlers between TensorFlow calls, so the step in flight
  always finishes. A second signal restores the previous handler and re-sends
  itself: Ctrl-C twice stops at once.
  """

  SIGNALS = (signal.SIGTERM, signal.SIGINT)

  def __init__(self):
    self.received = None
    self._previous = {}

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      for signum in self.SIGNALS:
        self._previous[signum] = signal.signal(signum, self._handle)
    return self

  def __exit__(self, *unused):
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)
    self._previous = {}

  def _handle(self, signum, unused_frame):
    if self.received is not None:
      signal.signal(signum, self._previous.pop(signum))
      signal.raise_signal(signum)
      return
    self.received = signum
    logging.warning("Received %s: finishing this step, saving the training state, then "
                    "stopping (send it again to stop at once).", signal.Signals(signum).name)


def cluster_handler(strategy, manager, on_stop):
  """TensorFlow's PreemptionCheckpointHandler for multi-worker/TPU strategies, else None."""
  if not isinstance(strategy, (tf.distribute.MultiWorkerMirroredStrategy,
                               tf.distribute.TPUStrategy)):
    return None
  return tf.distribute.experimental.PreemptionCheckpointHandler(
      strategy.cluster_resolver, manager,
      termination_config=tf.distribute.experimental.TerminationConfig(exit_fn=on_stop))

