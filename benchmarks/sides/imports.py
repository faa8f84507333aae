"""Which of some modules a peer's Python cannot import: peers.check_python asks before anything
slow runs."""

import importlib

from benchmarks import sides


def missing(modules):
  """The names of `modules` that fail to import (a broken install is as missing as none)."""
  absent = []
  for name in modules:
    try:
      importlib.import_module(name)
    except Exception:  # pylint: disable=broad-except
      absent.append(name)
  return absent


if __name__ == "__main__":
  sides.main({"missing": missing})
