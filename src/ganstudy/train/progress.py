"""Live progress of a training job, for a user watching a cluster job: progress lines in the job's log
(through ``logging``, so they are written also when the output is a file) and the rows of losses.csv
appended as the run goes.

A line is written for the first and the last iteration of a trainer and otherwise at most every
``interval`` seconds (a 10,000-iteration job's log stays readable): time stamp, trainer, iteration /
total, seconds per iteration, ETA, the latest losses and the latest in-training score. Rows go to the
rank's live table (rank 0: losses.csv; another rank that trains pairs of its own, as per_class ranks
do: losses.rank<r>.csv), one whole line per write; a reader ignores a last line without its newline.
The job's final losses.csv replaces the live one when it ends.

Rank 0 also names its process in the log (``PROCESS``) and, while it trains, touches a heartbeat file
beside the outputs every ``HEARTBEAT_SECONDS`` (removed when the training ends), so that ``ganstudy
status`` can tell a running job from one whose process is gone: by the process id on the same host,
by the heartbeat's age from another (a login node).
"""

from __future__ import annotations

import logging
import math
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ganstudy.core.provenance import scheduler_job
from ganstudy.data.kinds import all_kinds

LOGGER = logging.getLogger("ganstudy.train")
# Seconds between two progress lines of one trainer.
INTERVAL = 30.0
# A progress line as TrainerReport.line writes it under the log's time stamp (ganstudy status reads it):
# time stamp, trainer, iteration, total, s/it, ETA, and the latest values and note.
LINE = re.compile(r"^(\S+ \S+) (.+?): iteration (\d+)/(\d+) \(\d+%\), (\S+) s/it, ETA (\S+)(?:; (.*))?$")
# Rank 0's line naming its process, as Progress writes it under the log's time stamp: process id, host, and
# the batch scheduler's job where there is one ("Slurm job 123").
PROCESS = re.compile(r"^\S+ \S+ training process (\d+) on host (\S+)(?: in (\w+ job \S+))?$")
HEARTBEAT = "heartbeat"
HEARTBEAT_SECONDS = 60.0


def score_columns() -> tuple[str, ...]:
    """The in-training score columns of losses.csv, each lower-is-better, in the order a run's curve is
    looked for (a run logs one of them): the pair trainer's FID, the grid's best cell's, then each
    registered data kind's held-out score (pix2pix's L1, a shower generator's physics score, a plugin
    kind's own). The run's status and the convergence check read them."""
    return ("fid", "fid_best", *(kind.held_out.column for kind in all_kinds() if kind.held_out is not None))


def live_table_name(rank: int) -> str:
    return "losses.csv" if rank == 0 else f"losses.rank{rank}.csv"


class LiveTable:
    """A CSV file that rows are appended to while a job runs; started empty with each job (a resumed
    trainer appends the rows its checkpoint restored first), its header from the first row."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._columns: list[str] | None = None
        # A new file, never the old one emptied: a finished run's outputs may be hard links of the copy kept
        # beside its checkpoints (ganstudy.core.checkpoint.FinishedOutputs).
        path.unlink(missing_ok=True)
        self._handle = path.open("w", encoding="utf-8")

    def append(self, rows: Iterable[dict[str, Any]]) -> None:
        lines = []
        for row in rows:
            if self._columns is None:
                self._columns = list(row)
                lines.append(",".join(self._columns))
            lines.append(",".join(_cell(row.get(column)) for column in self._columns))
        if lines:
            # One write per batch of whole lines, flushed: a reader on another node sees whole lines.
            self._handle.write("".join(line + "\n" for line in lines))
            self._handle.flush()

    def close(self) -> None:
        self._handle.close()


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def duration(seconds: float) -> str:
    """Seconds as the progress lines write a time: 1m04s, 2h05m."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


class TrainerReport:
    """One trainer's progress: ``row`` after every iteration."""

    def __init__(
        self,
        name: str,
        total: int,
        show: tuple[str, ...],
        table: LiveTable | None,
        fixed: dict[str, Any],
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name, self.total, self.show, self.table, self.fixed = name, total, show, table, fixed
        self.interval, self.clock = interval, clock
        self._started: tuple[int, float] | None = None
        self._logged = -math.inf
        self._latest: dict[str, tuple[int, float]] = {}

    def restored(self, rows: list[dict[str, Any]]) -> None:
        """Called as the trainer's loop starts, with the rows its checkpoint restored (none for a fresh
        run): they go into the live table before the new ones, and the clock of seconds per iteration
        starts now."""
        self._started = (rows[-1]["iteration"] if rows else 0, self.clock())
        if self.table is not None:
            self.table.append({**self.fixed, **row} for row in rows)
        for row in rows:
            self._remember(row)

    def _remember(self, row: dict[str, Any]) -> None:
        for key in self.show:
            value = row.get(key)
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                self._latest[key] = (row["iteration"], value)

    def row(self, row: dict[str, Any], note: str = "") -> None:
        now, iteration = self.clock(), row["iteration"]
        if self._started is None:
            self._started = (iteration - 1, now)
        if self.table is not None:
            self.table.append([{**self.fixed, **row}])
        self._remember(row)
        if iteration - 1 == self._started[0] or iteration == self.total or now - self._logged >= self.interval:
            self._logged = now
            LOGGER.info(self.line(iteration, now) + (f"; {note}" if note else ""))

    def line(self, iteration: int, now: float) -> str:
        first, began = self._started
        rate = (now - began) / max(iteration - first, 1)
        values = ", ".join(
            f"{key} {value:.4g}" + (f" (at {at})" if at != iteration else "")
            for key, (at, value) in self._latest.items()
        )
        return (
            f"{self.name}: iteration {iteration}/{self.total} ({100 * iteration / self.total:.0f}%), {rate:.3g} s/it, "
            f"ETA {duration(rate * (self.total - iteration))}" + (f"; {values}" if values else "")
        )


class HeartbeatFile:
    """Touches ``path`` every ``interval`` seconds from a thread of its own until closed, then removes it:
    the file's age says how long ago the process was last alive, also to a reader on another node,
    whatever the training is busy with (not the MPI heartbeat of ganstudy.parallel.heartbeat)."""

    def __init__(self, path: Path, interval: float = HEARTBEAT_SECONDS) -> None:
        path.write_text(f"{socket.gethostname()} {os.getpid()}\n", encoding="utf-8")
        self.path, self.interval = path, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="ganstudy-progress-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                os.utime(self.path)
            except OSError:
                return  # the run's folder is gone: nobody is left to read the heartbeat

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.path.unlink(missing_ok=True)


class Progress:
    """A job's progress on one rank: its trainers' reports and the rank's live table in ``out_dir``, and
    on rank 0 the line naming its process and the heartbeat file."""

    def __init__(self, out_dir: Path | None, rank: int, interval: float = INTERVAL) -> None:
        self.out_dir, self.rank, self.interval = out_dir, rank, interval
        self._table: LiveTable | None = None
        self._heartbeat: HeartbeatFile | None = None
        if out_dir is not None and rank == 0:
            # The file first: once the log names the process, the heartbeat file is this job's, not an earlier try's.
            # Only in a folder that is there (the workflow makes it): a job refused before training leaves none.
            if out_dir.is_dir():
                self._heartbeat = HeartbeatFile(out_dir / HEARTBEAT)
            job = scheduler_job()
            where = f"on host {socket.gethostname()}" + (f" in {job}" if job else "")
            LOGGER.info(f"training process {os.getpid()} {where}")

    def trainer(
        self, name: str, total: int, show: tuple[str, ...], fixed: dict[str, Any] | None = None
    ) -> TrainerReport:
        if self._table is None and self.out_dir is not None:
            self._table = LiveTable(self.out_dir / live_table_name(self.rank))
        return TrainerReport(name, total, show, self._table, fixed or {}, self.interval)

    def close(self) -> None:
        if self._table is not None:
            self._table.close()
        if self._heartbeat is not None:
            self._heartbeat.close()


def remove_rank_tables(out_dir: Path) -> None:
    """The per-rank live tables, once the job's losses.csv holds every row."""
    for path in out_dir.glob("losses.rank*.csv"):
        os.unlink(path)


def configure_logging() -> None:
    """Progress lines to stderr (the job's log), time-stamped, whatever the output is."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False
