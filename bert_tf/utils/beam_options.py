"""Beam's pipeline options as the Beam scripts (create_pretraining_data_beam.py,
predict_beam.py) take them: the flags the script does not know go to Beam, a near-miss of
the script's own flag is an error rather than a flag silently passed on, and the local
runner defaults to one worker process per core."""

import difflib
import json
import os

from absl import logging
from apache_beam.options.pipeline_options import PipelineOptions

from bert_tf.errors import UserInputError

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
