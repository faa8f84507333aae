"""Code that a benchmark runs in another interpreter: a peer's Python (torch, ONNX Runtime,
MediaPipe, sentence-transformers), or a fresh one of its own that serves a model with nothing
of bert_tf imported. common.run_side runs `python -m benchmarks.sides.NAME COMMAND JSON` with
the checkout's root as the only PYTHONPATH; these modules import only the standard library at
the top, and each command imports what its side has.
"""

import json
import sys


def main(commands):
  """Runs commands[argv[1]] with the keyword arguments of the JSON in argv[2] and prints its
  result as the last line, in JSON, for common.run_side to read."""
  if len(sys.argv) != 3 or sys.argv[1] not in commands:
    sys.exit("usage: python -m %s {%s} JSON_ARGUMENTS" % (
        sys.modules["__main__"].__spec__.name, ",".join(commands)))
  result = commands[sys.argv[1]](**json.loads(sys.argv[2]))
  print(json.dumps(result), flush=True)
