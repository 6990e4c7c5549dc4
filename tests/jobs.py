"""Starting, watching and killing a background MPI job, for the resume tests."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable


def start_job(line: list[str], env: dict[str, str]) -> subprocess.Popen:
    # A session of its own, so that killing the job kills every rank of it.
    return subprocess.Popen(
        line, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )


def kill_job(job: subprocess.Popen) -> None:
    os.killpg(job.pid, signal.SIGKILL)
    job.communicate(timeout=60)


def wait_for(predicate: Callable[[], bool], job: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert job.poll() is None, job.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
