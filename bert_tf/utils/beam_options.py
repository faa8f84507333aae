"""What the Beam scripts (create_pretraining_data_beam.py, predict_beam.py) share.

Beam's pipeline options as they take them: the flags the script does not know go to Beam, a
near-miss of the script's own flag is an error rather than a flag silently passed on, and the
local runner defaults to one worker process per core. Also their input files (matched on any of
Beam's file systems), running the pipeline (a worker's UserInputError is one line) and reading
its counters.
"""

import dataclasses
import difflib
import json
import logging as std_logging
import os
import re

from absl import logging
import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from bert_tf.errors import UserInputError, io_reason

# Workers log the scripts' own progress; a failing element's traceback reaches the launcher
# with the error, so workers need not log it as well.
_WORKER_LOG_LEVELS = {"apache_beam": "ERROR", "apache_beam.runners.common": "CRITICAL",
                      "apache_beam.runners.worker": "CRITICAL", "__main__": "ERROR"}


def pipeline_options(beam_args, own_flags, root, share_cores=False):
  """PipelineOptions of `beam_args` (what the script's flags left). `own_flags`: the script's
  flag names, for "did you mean"; `root`: the checkout local workers import bert_tf from;
  `share_cores`: each local worker is a TensorFlow, so split the cores' thread pools between
  them."""
  args = list(beam_args)
  given = {a.split("=", 1)[0] for a in args if a.startswith("--")}
  parsed = PipelineOptions(args).get_all_options()
  unknown = set(PipelineOptions(args).get_all_options(retain_unknown_options=True)) - set(parsed)
  for name in sorted(unknown):
    close = difflib.get_close_matches(name, own_flags, n=1, cutoff=0.75)
    if close:
      raise UserInputError("Unknown flag --%s; did you mean --%s?" % (name, close[0]))
  if unknown:
    logging.warning("Flags neither this script nor Beam's Python SDK knows (passed on to the "
                    "runner): %s", ", ".join("--" + n for n in sorted(unknown)))
  if parsed["runner"] in (None, "DirectRunner", "direct"):
    if "--runner" not in given:
      args.append("--runner=DirectRunner")
    mode = parsed["direct_running_mode"]
    if "--direct_running_mode" not in given:
      mode = "multi_processing"
      args.append("--direct_running_mode=" + mode)
    if "--direct_num_workers" not in given and mode != "in_memory":
      args.append("--direct_num_workers=0")  # 0: one per CPU core
    if "--sdk_harness_log_level_overrides" not in given:
      args.append("--sdk_harness_log_level_overrides=" + json.dumps(_WORKER_LOG_LEVELS))
    if share_cores:
      workers = int(parsed["direct_num_workers"] or 0) if "--direct_num_workers" in given else 0
      workers = workers or os.cpu_count() or 1  # 0: one per core
      if mode != "in_memory" and workers > 1:
        for pool in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
          os.environ.setdefault(pool, str(max(1, (os.cpu_count() or 1) // workers)))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p)
  return PipelineOptions(args)


@dataclasses.dataclass(frozen=True)
class InputFile:
  index: int  # position in the sorted list (create_pretraining_data_beam: seed random_seed + i)
  path: str
  size: int


def expand_input(patterns, flag):
  """Comma-separated globs (local, gs://, ...) -> InputFile list, sorted by path, each file
  once; errors name the flag (`flag`, e.g. "--input") the patterns came from."""
  sizes = {}
  for pattern in (p.strip() for p in patterns.split(",")):
    if not pattern:
      continue
    try:
      matched = FileSystems.match([pattern])[0].metadata_list
    except Exception as e:  # noqa: BLE001  (a bad bucket, an unknown scheme)
      raise UserInputError("Cannot list %s pattern %s: %s."
                           % (flag, pattern, io_reason(e))) from None
    matched = [m for m in matched if not m.path.endswith("/")]
    if not matched:
      raise UserInputError("No file matches %s pattern %s." % (flag, pattern))
    for m in matched:
      sizes[m.path] = m.size_in_bytes
  if not sizes:
    raise UserInputError("%s names no file." % flag)
  return [InputFile(i, path, sizes[path]) for i, path in enumerate(sorted(sizes))]


def quiet_local_runner(*loggers):
  """Beam's local chatter off (its warnings stay), and the relays of a worker's error, which the
  script says once, plus `loggers`."""
  std_logging.getLogger("apache_beam").setLevel(std_logging.WARNING)
  for relay in ("apache_beam.runners.portability.local_job_service",
                "apache_beam.runners.worker", "apache_beam.runners.common") + loggers:
    std_logging.getLogger(relay).setLevel(std_logging.CRITICAL)


def _worker_error(error):
  """The one-line message of a UserInputError raised on a worker, if that is what failed."""
  if isinstance(error, UserInputError):
    return re.sub(r" \[while running .*$", "", str(error), flags=re.S)
  found = re.search(r"UserInputError: (.*)", str(error))
  return re.sub(r" \[while running .*$", "", found.group(1)) if found else None


def run(pipeline, clean_up):
  """Runs `pipeline` to its end and returns its result. If it fails, `clean_up()` removes what
  it left, and a worker's UserInputError is raised again as one line."""
  try:
    result = pipeline.run()
    result.wait_until_finish()
  except Exception as e:  # noqa: BLE001  (a worker's UserInputError arrives wrapped)
    clean_up()
    message = _worker_error(e)
    if message:
      raise UserInputError(message) from None
    raise
  return result


def counters(result, namespace, names=()):
  """{name: total} of a finished pipeline's counters in `namespace`; `names` start at 0."""
  out = dict.fromkeys(names, 0)
  query = result.metrics().query(beam.metrics.MetricsFilter().with_namespace(namespace))
  for counter in query["counters"]:
    value = counter.committed if counter.committed is not None else counter.attempted
    out[counter.key.metric.name] = out.get(counter.key.metric.name, 0) + (value or 0)
  return out


class Count(beam.DoFn):
  """Passes each element on, counting it in the counter `name` of `namespace`."""

  def __init__(self, namespace, name):
    self.counter = beam.metrics.Metrics.counter(namespace, name)

  def process(self, element):
    self.counter.inc()
    yield element
