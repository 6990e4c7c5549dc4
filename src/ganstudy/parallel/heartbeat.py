"""Heartbeat: a dead or stalled rank aborts the job with its name instead of hanging to the wall-time limit.

The training loop calls ``beat()`` at every mini-batch and wraps its collectives in ``waiting()``.
A watcher thread on every rank tells rank 0, every ``interval``, how long ago its rank last beat and
whether it is waiting for others; rank 0 sends a pulse back. Rank 0 aborts when no rank has beaten for
``timeout`` seconds and names the rank that stopped first: among the ranks whose watchers fell silent
(a dead process, a lost node: whatever it was doing, a collective included), else among those not
waiting for others (the ones waiting are blocked by it). The others abort when rank 0's pulse has been
missing for ``timeout``. A slow rank that still advances is not a stall, however long the others wait.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
        self._beat_at = time.monotonic()
        self._waiting = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ganstudy-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        from mpi4py import MPI

        if self.size > 1:
            if MPI.Query_thread() == MPI.THREAD_MULTIPLE:
                self._thread.start()
            elif self.rank == 0:
                # Its thread would call MPI beside the training's collectives: undefined below THREAD_MULTIPLE.
                print(
                    "ganstudy heartbeat: MPI was not started with MPI_THREAD_MULTIPLE; running without a heartbeat",
                    file=sys.stderr,
                    flush=True,
                )
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
        self._beat_at = time.monotonic()

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Mark a collective: a rank blocked here waits for another rank, it is not the one stalled."""
        self.beat()
        self._waiting = True
        try:
            yield
        finally:
            self._waiting = False
            self.beat()

    def _abort(self, message: str) -> None:
        print(f"ganstudy heartbeat: {message}; aborting the job", file=sys.stderr, flush=True)
        self.comm.Abort(3)

    def _culprit(
        self, now: float, last_beat: dict[int, float], last_heard: dict[int, float], waiting: dict[int, bool]
    ) -> str:
        """The rank that stopped first, and how rank 0 knows. A rank that died inside a collective reported
        itself waiting, as do the ones it blocks: its silence names it, not its flag. Silent: no report for
        half the timeout, many intervals, which a busy machine's watcher threads do not miss."""
        silent = [r for r in last_heard if now - last_heard[r] > self.timeout / 2]
        if silent:
            culprit = min(silent, key=last_heard.__getitem__)
            return (
                f"rank {culprit} ({self.describe(culprit)}) stopped first, {now - last_heard[culprit]:.0f} s ago: "
                "it died or stalled (its heartbeat fell silent)"
            )
        suspects = [r for r in last_beat if not waiting[r]] or list(last_beat)
        culprit = min(suspects, key=last_beat.__getitem__)
        return (
            f"rank {culprit} ({self.describe(culprit)}) stopped first, {now - last_beat[culprit]:.0f} s ago: "
            "it died or stalled"
        )

    def _watch(self) -> None:
        last_beat = dict.fromkeys(range(self.size), time.monotonic())  # rank -> when it last beat (rank 0's clock)
        last_heard = dict(last_beat)  # rank -> when rank 0 last had its watcher's report
        waiting = dict.fromkeys(range(self.size), False)
        last_pulse = time.monotonic()
        pending = []
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            pending = [r for r in pending if not r.Test()]
            if self.rank == 0:
                last_beat[0], waiting[0], last_heard[0] = self._beat_at, self._waiting, now
                while self.comm.Iprobe(source=self._any_source, tag=_TAG_PROGRESS):
                    sender, age, waits = self.comm.recv(source=self._any_source, tag=_TAG_PROGRESS)
                    last_beat[sender], waiting[sender], last_heard[sender] = (
                        max(last_beat[sender], now - age),
                        waits,
                        now,
                    )
                newest = max(last_beat.values())
                if now - newest > self.timeout:
                    self._abort(
                        f"no rank made progress for {now - newest:.0f} s; "
                        f"{self._culprit(now, last_beat, last_heard, waiting)}"
                    )
                pending += [self.comm.isend(None, dest=r, tag=_TAG_PULSE) for r in range(1, self.size)]
            else:
                # An age, not a time: clocks of different nodes do not agree.
                pending.append(
                    self.comm.isend((self.rank, now - self._beat_at, self._waiting), dest=0, tag=_TAG_PROGRESS)
                )
                while self.comm.Iprobe(source=0, tag=_TAG_PULSE):
                    self.comm.recv(source=0, tag=_TAG_PULSE)
                    last_pulse = now
                if now - last_pulse > self.timeout:
                    self._abort(
                        f"rank 0 ({self.describe(0)}) sent no heartbeat for {now - last_pulse:.0f} s: it died or "
                        "stalled"
                    )
