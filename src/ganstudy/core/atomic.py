"""Atomic, durable, shareable output: every file appears complete under its final name or not at all.

A job killed half-way (wall-time limit, OOM, Ctrl-C) must never leave a file that a later
run, or Snakemake, would take for a finished result; a node that crashes right after the rename must
not leave an empty file under the final name either (hence the fsync of the file and its folder); and
colleagues on a shared project space read results under the user's umask, not mkstemp's private 0600.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ganstudy.core.procfs import status_field


def current_umask() -> int:
    """The process's umask. Linux reports it in /proc (thread-safe: the heartbeat thread may be
    creating files); elsewhere it is read by setting and restoring it."""
    reported = status_field("Umask")
    if reported is not None:
        return int(reported, 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush a file, or a folder's entries, to stable storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds.

    The temporary name keeps the suffix so that writers which infer the format from it
    (matplotlib, numpy, PIL) behave as for the final name. Before the rename the file gets the mode
    a plain ``open`` would have given it (0666 less the umask) and is fsync'ed; after it, the folder.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=final.suffix, dir=final.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~current_umask())
        fsync_path(tmp)
        os.replace(tmp, final)
        fsync_path(final.parent)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
