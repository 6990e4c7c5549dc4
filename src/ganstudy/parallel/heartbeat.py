"""Heartbeat: a dead or stalled rank aborts the job with its name instead of hanging to the wall-time limit.

Each rank counts its progress (the training loop calls ``beat()`` every mini-batch). A watcher
thread on every rank sends that counter to rank 0, and rank 0 sends a pulse back. Rank 0 aborts
when the whole job has made no progress for ``timeout`` seconds and names the rank that stopped
first; the others abort when rank 0's pulse has been missing for ``timeout``. A slow rank that
still advances is not a stall, however long its neighbours wait for it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

_TAG_PROGRESS = 101
_TAG_PULSE = 102


class Heartbeat:
    def __init__(self, comm: Any, timeout: float, describe: Callable[[int], str], interval: float | None = None):
        """``comm`` is a communicator used by the heartbeat alone; ``describe(rank)`` names a rank's cells."""
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.timeout = timeout
        self.interval = interval if interval is not None else max(0.05, min(1.0, timeout / 10))
        self.describe = describe
        from mpi4py import MPI

        self._any_source, self._any_tag = MPI.ANY_SOURCE, MPI.ANY_TAG
        self._progress = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ganstudy-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        if self.size > 1:
            self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if exc_type is None:
            # Drain what peers sent before they stopped, so that the communicator can be freed.
            self.comm.Barrier()
            while self.comm.Iprobe(source=self._any_source, tag=self._any_tag):
                self.comm.recv(source=self._any_source, tag=self._any_tag)

    def beat(self) -> None:
        self._progress += 1

    def _abort(self, message: str) -> None:
        print(f"ganstudy heartbeat: {message}; aborting the job", file=sys.stderr, flush=True)
        self.comm.Abort(3)

    def _watch(self) -> None:
        started = time.monotonic()
        last_seen = {rank: (0, started) for rank in range(self.size)}  # rank -> (progress, when it advanced)
        last_pulse = started
        pending = []
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            pending = [r for r in pending if not r.Test()]
            if self.rank == 0:
                last_seen[0] = (self._progress, now) if self._progress != last_seen[0][0] else last_seen[0]
                while self.comm.Iprobe(source=self._any_source, tag=_TAG_PROGRESS):
                    status_rank, progress = self.comm.recv(source=self._any_source, tag=_TAG_PROGRESS)
                    if progress != last_seen[status_rank][0]:
                        last_seen[status_rank] = (progress, now)
                newest = max(when for _, when in last_seen.values())
                if now - newest > self.timeout:
                    culprit = min(last_seen, key=lambda r: last_seen[r][1])
                    self._abort(
                        f"no rank made progress for {now - newest:.0f} s; rank {culprit} ({self.describe(culprit)}) "
                        f"stopped first, {now - last_seen[culprit][1]:.0f} s ago: it died or stalled"
                    )
                pending += [self.comm.isend(None, dest=r, tag=_TAG_PULSE) for r in range(1, self.size)]
            else:
                pending.append(self.comm.isend((self.rank, self._progress), dest=0, tag=_TAG_PROGRESS))
                while self.comm.Iprobe(source=0, tag=_TAG_PULSE):
                    self.comm.recv(source=0, tag=_TAG_PULSE)
                    last_pulse = now
                if now - last_pulse > self.timeout:
                    self._abort(f"rank 0 ({self.describe(0)}) sent no heartbeat for {now - last_pulse:.0f} s: it died or stalled")
