"""The timing loops of every benchmark, for bert_tf's side and the peers' sides alike.

Standard library only (numpy, which every side has, is imported where the fixed inputs are
made): the peers' interpreters (torch, ONNX Runtime, MediaPipe; no TensorFlow, no absl) run
benchmarks/sides modules that time their calls with these same functions, so that no side
is timed by a loop of its own.
"""

import statistics
import time


def timed(fn):
  """(fn(), the seconds it took): for work that runs once, such as a stage or a whole pass."""
  start = time.perf_counter()
  result = fn()
  return result, time.perf_counter() - start


def call_seconds(call, inputs):
  """Seconds of `call(x)` for each x of `inputs`, after one untimed call on the first (it pays
  the tracing, compiling and allocating that no later call pays)."""
  call(inputs[0])
  seconds = []
  for x in inputs:
    start = time.perf_counter()
    call(x)
    seconds.append(time.perf_counter() - start)
  return seconds


def best_seconds(fn, repeats):
  """Fastest of `repeats` calls of fn() after a warm-up: the machine's capability, since the
  noise of a shared machine only ever adds time."""
  return min(call_seconds(lambda _: fn(), [None] * repeats))


def interleaved_seconds(calls, inputs):
  """{name: seconds of calls[name](x) for each x of `inputs`}, the calls taking turns on each
  input (after one untimed call each on the first), so that load on a shared machine falls on
  all of them alike."""
  for call in calls.values():
    call(inputs[0])
  seconds = {name: [] for name in calls}
  for x in inputs:
    for name, call in calls.items():
      start = time.perf_counter()
      call(x)
      seconds[name].append(time.perf_counter() - start)
  return seconds


def wall_and_cpu_ms(call, repeats):
  """Median wall and process-CPU milliseconds of call() over `repeats` calls, after two untimed
  ones (a runtime instantiates functions on the first calls); another job sharing the CPU
  inflates the CPU time less than the wall time."""
  call()
  call()
  wall, cpu = [], []
  for _ in range(repeats):
    start, start_cpu = time.perf_counter(), time.process_time()
    call()
    cpu.append(time.process_time() - start_cpu)
    wall.append(time.perf_counter() - start)
  return {"p50_ms": 1000 * statistics.median(wall), "cpu_ms": 1000 * statistics.median(cpu)}


def latency_stats(seconds, items):
  """p50 / p99 milliseconds of request times, and `items` per request over the median time."""
  ordered = sorted(seconds)
  median = statistics.median(ordered)
  return {"p50_ms": 1000 * median,
          "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
          "per_second": items / median}


def serving_workloads(call, workload):
  """latency_stats of the serving comparisons' workloads, `call(texts)` answering a list of
  strings: one short request, one long request (a quarter as many) and batches of sentences."""
  requests, batch = workload["requests"], workload["batch"]
  return {"short": latency_stats(call_seconds(call, [[workload["short"]]] * requests), 1),
          "long": latency_stats(call_seconds(call, [[workload["long"]]] * max(1, requests // 4)),
                                1),
          "batch32": latency_stats(call_seconds(call, [batch] * workload["batches"]), len(batch))}


def answers(call, workload):
  """The answers of `call` to every text the serving workloads time, one list per text: what
  the benchmarks compare across loaders and formats."""
  rows = []
  for texts in ([workload["short"]], [workload["long"]], workload["batch"]):
    rows.extend([float(p) for p in row] for row in call(texts))
  return rows


def fixed_inputs(batch, seq, vocab_size):
  """The fixed batch every side of the encoder comparison runs: ids from numpy's
  default_rng(0), every position real."""
  import numpy as np
  ids = np.random.default_rng(0).integers(min(1000, vocab_size // 2), min(30000, vocab_size),
                                          (batch, seq))
  return ids, np.ones((batch, seq), ids.dtype), np.zeros((batch, seq), ids.dtype)
