"""Stopping a training job at its next safe point when the scheduler says its time is up.

Slurm (``sbatch --signal``) and LSF (``bsub -wa -wt``) warn a job by a signal some minutes before its
wall time, and Slurm sends SIGTERM at the limit itself, some seconds before SIGKILL. The handler only
records the signal: the training loops look at it between iterations, where every state is consistent,
write a checkpoint and leave through ``TrainingStopped``. The job then exits non-zero, so that
Snakemake's retry resubmits it, and the new job resumes from that checkpoint.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any

from ganstudy.errors import GanstudyError

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
# EX_TEMPFAIL: the job did not fail, it ran out of time; a retry carries on.
STOPPED_EXIT_CODE = 75


class TrainingStopped(GanstudyError):
    """Training left early on a scheduler's signal, after writing a checkpoint to resume from."""


class StopSignal:
    """Records SIGTERM / SIGUSR1 while installed (a context manager around the training)."""

    def __init__(self) -> None:
        self.received: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignal:
        # Python delivers signals to the main thread only; elsewhere (tests driving a mode from a worker
        # thread) the process keeps its own handlers.
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handle) for sig in STOP_SIGNALS}
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signal.Signals(signum).name
            print(
                f"ganstudy: {self.received} received: stopping at the next checkpoint-safe point",
                file=sys.stderr,
                flush=True,
            )

    @property
    def requested(self) -> bool:
        return self.received is not None

    def agreed(self, comm: Any) -> bool:
        """Collective over ``comm``: true on every rank once any rank has received a signal, so that all
        ranks stop after the same iteration."""
        from mpi4py import MPI

        return bool(comm.allreduce(self.requested, op=MPI.LOR))

    def stopped(self, what: str, iteration: int, checkpoint: str | None) -> TrainingStopped:
        """The error that ends the job; ``checkpoint`` is where the resumable state went (None: nowhere)."""
        cause = self.received or "a stop signal on another rank"
        if checkpoint is None:
            saved = "no checkpoint could be written (no --checkpoint-dir): a rerun starts from the beginning"
        else:
            saved = f"its state is in {checkpoint}: rerun the job (Snakemake's retries do) to resume there"
        return TrainingStopped(f"{what} stopped by {cause} after iteration {iteration}; {saved}")
