"""Progress with rate and ETA for long jobs: a live line on a terminal, log lines otherwise."""

import sys
import time


def _format_seconds(seconds):
  seconds = int(seconds)
  return "%d:%02d:%02d" % (seconds // 3600, seconds // 60 % 60, seconds % 60)


class Progress:
  """Call `update(n)` as work is done; prints at most every `interval` seconds.

  `total=None` means the amount of work is unknown: no ETA is shown, and
  `finish()` prints the final line.
  """

  def __init__(self, total, unit, description, stream=None, interval=2.0, initial=0):
    self.total, self.unit, self.description = total, unit, description
    self.stream = stream or sys.stderr
    self.interval = interval
    self.initial = self.done = initial  # work done before this run (a resumed job)
    self.info = ""
    self.start = self._last = time.monotonic()
    self.live = hasattr(self.stream, "isatty") and self.stream.isatty()

  def update(self, count=1, info=None):
    """Adds `count` units of work; `info` (e.g. "loss 2.31") is shown on the line."""
    self.done += count
    if info is not None:
      self.info = info
    now = time.monotonic()
    finished = self.total is not None and self.done >= self.total
    if now - self._last >= self.interval or finished:
      self._last = now
      self._print(now, finished)

  def finish(self):
    self._print(time.monotonic(), True)

  def _print(self, now, finished):
    elapsed = max(now - self.start, 1e-9)
    rate = (self.done - self.initial) / elapsed
    if self.total is None:
      line = "%s: %d %s (%.1f %s/s, elapsed %s)" % (
          self.description, self.done, self.unit, rate, self.unit, _format_seconds(elapsed))
    else:
      eta = (self.total - self.done) / rate if rate > 0 else 0
      line = "%s: %d/%d %s (%.1f %s/s, elapsed %s, ETA %s)" % (
          self.description, self.done, self.total, self.unit, rate, self.unit,
          _format_seconds(elapsed), _format_seconds(eta))
    if self.info:
      line += " " + self.info
    if self.live:
      self.stream.write("\r" + line + ("\n" if finished else ""))
    else:
      self.stream.write(line + "\n")
    self.stream.flush()
