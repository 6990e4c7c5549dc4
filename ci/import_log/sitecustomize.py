"""Where a test suite's time goes to process starts: put this folder on PYTHONPATH and set
GANSTUDY_IMPORT_LOG to a file; every Python process then appends one line at its exit: pid, seconds alive,
CPU seconds, the seconds its first `import torch` and `import torch._dynamo` took (or None) and its
command. `python ci/import_log/summary.py FILE` adds them up by command. Measurement only: nothing
imports this module but Python's start, and only where it is asked for.
"""

import atexit
import importlib.abc
import importlib.machinery
import os
import sys
import time

_LOG = os.environ.get("GANSTUDY_IMPORT_LOG")
_TIMED = ("torch", "torch._dynamo")
_started, _cpu = time.monotonic(), time.process_time()
_seconds: dict[str, float | None] = {}


class _ImportTimer(importlib.abc.MetaPathFinder):
    """Times the first import of each of _TIMED by wrapping its loader's exec_module."""

    def find_spec(self, name, path, target=None):
        if name not in _TIMED or name in _seconds or name in sys.modules:
            return None
        _seconds[name] = None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        execute = spec.loader.exec_module

        def timed(module, execute=execute, name=name):
            start = time.monotonic()
            try:
                execute(module)
            finally:
                _seconds[name] = time.monotonic() - start

        spec.loader.exec_module = timed
        return spec


def _write() -> None:
    fields = [os.getpid(), f"{time.monotonic() - _started:.2f}", f"{time.process_time() - _cpu:.2f}"]
    fields += [_seconds.get(name) for name in _TIMED] + [" ".join(sys.argv[:4])[:200]]
    with open(_LOG, "a") as log:
        log.write("\t".join(map(str, fields)) + "\n")


if _LOG:
    sys.meta_path.insert(0, _ImportTimer())
    atexit.register(_write)
