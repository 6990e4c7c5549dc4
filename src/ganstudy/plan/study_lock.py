"""One run per study at a time: a lock file in the study's results folder.

Snakemake's own lock lives in the working directory's .snakemake/, so two runs started from two working
directories on one results folder (or from two login nodes) would train the same trial at once, resume
from each other's checkpoints and delete each other's outputs. This lock lives beside the results instead.
It is created exclusively (O_CREAT | O_EXCL, atomic on local and NFS v3+ file systems) and says who holds
it: host, pid, start time, working directory and command. A lock whose process is gone on this host is
taken over with a warning; one held from another host cannot be checked from here, so the message says
how to clear it. Dry-runs and ``ganstudy status`` never take it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ganstudy.core.procfs import pid_alive
from ganstudy.errors import GanstudyError
from ganstudy.study.folder import StudyFolder


def _holder(path: Path) -> dict[str, Any]:
    try:
        holder = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _describe(holder: dict[str, Any]) -> str:
    return (
        f"pid {holder.get('pid')} on host {holder.get('host')} since {holder.get('started_at')} "
        f"(from {holder.get('cwd')}: {holder.get('command')})"
    )


def live_holder(study_dir: str | os.PathLike[str]) -> str | None:
    """Who holds the study's lock, where that run may still be going (its process alive on this host, or on
    another host, which cannot be checked from here); None where the lock is free or its holder is gone."""
    holder = _holder(Path(StudyFolder.at(study_dir).lock()))
    if not holder:
        return None
    if holder.get("host") == socket.gethostname() and not _alive(holder):
        return None
    return _describe(holder)


def _alive(holder: dict[str, Any]) -> bool:
    """Whether the holder's process (on this host) is alive. Any live process with that id counts (its command
    line may be a wrapper's): a reused id only costs a clear message."""
    return isinstance(holder.get("pid"), int) and pid_alive(holder["pid"], b"")


def acquire(study_dir: str | os.PathLike[str], warn: Callable[[str], None]) -> Path:
    """Take the study's lock for this process, or raise GanstudyError naming the run that holds it."""
    path = Path(StudyFolder.at(study_dir).lock())
    path.parent.mkdir(parents=True, exist_ok=True)
    mine = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "cwd": os.getcwd(),
        "command": " ".join(sys.argv),
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    for _ in range(2):
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _holder(path)
            if holder.get("host") != mine["host"]:
                raise GanstudyError(
                    f"study {study_dir} is being run by {_describe(holder)}; one run per study at a time. If that run "
                    f"is over (its host crashed), remove {path} and start again"
                ) from None
            if _alive(holder):
                raise GanstudyError(
                    f"study {study_dir} is being run by {_describe(holder)}; one run per study at a time: wait for it "
                    f"to finish or stop it (ganstudy status shows where it stands). If process {holder['pid']} is no "
                    f"Snakemake of this study, remove {path}"
                ) from None
            warn(f"warning: took over the lock {path} of a run that is gone ({_describe(holder)})")
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(descriptor, "w") as handle:
            json.dump(mine, handle)
        return path
    raise GanstudyError(f"could not take the lock {path}: another run took it at the same moment; start again")


def release(path: str | os.PathLike[str] | None) -> None:
    """Remove the lock if this process still holds it (never another run's); None: no lock was taken."""
    if path is None:
        return
    path = Path(path)
    holder = _holder(path)
    if holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
        path.unlink(missing_ok=True)
