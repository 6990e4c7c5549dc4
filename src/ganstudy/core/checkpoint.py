"""Atomic, safe torch files (temp + rename, read with ``weights_only=True``) and run checkpoints: the one
policy of every training mode (when one is due, what a run must match to resume from one, the store), and
the outputs of a finished run, which take the checkpoints' place."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import shutil
import zipfile
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from ganstudy.core.atomic import atomic_path, write_text
from ganstudy.errors import GanstudyError


def save_state(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """Write tensors and plain values (dict, list, str, numbers) so that a restricted load can read them.
    The same state gives the same bytes: saved to a file, torch names the archive's records after the
    file, and the atomic write's temporary name is random (a classifier's sha256, which the score
    tables print, changed from run to run)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(_serialised(state))


def load_state(path: str | os.PathLike[str], remedy: str) -> dict[str, Any]:
    """Read a file written by ``save_state``; ``remedy`` tells the user what to do if it is damaged."""
    if not os.path.exists(path):
        raise GanstudyError(f"{path} does not exist; {remedy}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, pickle.UnpicklingError) as exc:
        raise GanstudyError(f"{path} is corrupt or not a ganstudy file ({exc.__class__.__name__}); {remedy}") from None
    if not isinstance(state, dict):
        raise GanstudyError(f"{path} does not hold a ganstudy state (found {type(state).__name__}); {remedy}")
    return state


def _serialised(state: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def _pack(state: dict[str, Any]) -> bytes:
    return zlib.compress(_serialised(state), level=3)


def _unpack(path: Path) -> dict[str, Any]:
    state = torch.load(io.BytesIO(zlib.decompress(path.read_bytes())), map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        raise ValueError(f"holds {type(state).__name__}, not a state")
    return state


def run_fingerprint(identity: Mapping[str, Any]) -> str:
    """What a checkpoint must match to be resumed from: the sha256 of the run's identity (its settings,
    seeds and whatever else decides its random draws) as sorted JSON."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def checkpoint_due(done: int, total: int, period: int, final: bool = False) -> bool:
    """Whether a run that has done ``done`` of ``total`` iterations writes a checkpoint now: every
    ``period`` (0: never) before the last iteration, and after the last only when ``final``. A stop
    signal's checkpoint is written whatever this says."""
    return bool(period and done % period == 0 and done < total) or (final and done == total)


class CheckpointStore:
    """Checkpoints of a distributed run: ``iter-NNNNNN/`` holds one compressed file per part
    (a cell, or the run's shared state) and a ``COMPLETE`` marker written last.

    Every rank writes the parts it owns, so a run can resume on a different number of ranks.
    A checkpoint counts only with its marker, and only for the same ``fingerprint`` (settings,
    seeds, grid): a changed config never resumes from an old run's state.
    """

    def __init__(self, directory: str | os.PathLike[str], keep: int, fingerprint: str) -> None:
        self.directory = Path(directory)
        self.keep = keep
        self.fingerprint = fingerprint

    def _folder(self, iteration: int) -> Path:
        return self.directory / f"iter-{iteration:06d}"

    def write_part(self, iteration: int, name: str, state: dict[str, Any]) -> None:
        path = self._folder(iteration) / f"{name}.ckpt"
        with atomic_path(path) as tmp:
            tmp.write_bytes(_pack(state))

    def complete(self, iteration: int) -> None:
        """Mark a checkpoint whose parts are all written (call after a barrier), and drop the oldest."""
        write_text(
            self._folder(iteration) / "COMPLETE", json.dumps({"iteration": iteration, "fingerprint": self.fingerprint})
        )
        for old in self.iterations()[: -self.keep]:
            shutil.rmtree(self._folder(old), ignore_errors=True)

    def _markers(self) -> list[dict[str, Any]]:
        records = []
        for marker in self.directory.glob("iter-*/COMPLETE"):
            try:
                records.append(json.loads(marker.read_text()))
            except (OSError, ValueError):
                continue
        return records

    def iterations(self) -> list[int]:
        """Iterations of the complete checkpoints of this run, oldest first."""
        return sorted(int(r["iteration"]) for r in self._markers() if r.get("fingerprint") == self.fingerprint)

    def unmatched_warning(self) -> str | None:
        """What to tell a run that resumes nothing while complete checkpoints of another fingerprint (other
        settings, seeds or grid, or another version of the training engine) lie in its folder."""
        others = sorted(int(r["iteration"]) for r in self._markers() if r.get("fingerprint") != self.fingerprint)
        if not others or self.iterations():
            return None
        return (
            f"warning: the checkpoints of iterations {', '.join(map(str, others))} in {self.directory} were written "
            "with other settings or by another version of the training engine: not resumed. This run starts from the "
            "beginning and, when it finishes, leaves only its outputs in the folder; to finish those instead, stop "
            "it and rerun with the settings and the ganstudy version that wrote them"
        )

    def read_part(self, iteration: int, name: str) -> dict[str, Any]:
        """A part's state; raises ValueError naming the file when it is missing or damaged."""
        path = self._folder(iteration) / f"{name}.ckpt"
        try:
            return _unpack(path)
        except (OSError, zlib.error, RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as exc:
            raise ValueError(f"{path}: {exc.__class__.__name__}: {exc}") from None


# A finished run's outputs in its checkpoint folder (FinishedOutputs), and the marker written after them.
FINISHED, FINISHED_MARKER = "finished", "FINISHED"


def _link(source: Path, target: Path) -> None:
    """``target`` as a second name of ``source``'s file: no second copy on disk. A file system without hard
    links (or another one) gets a copy."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


class FinishedOutputs:
    """The outputs of a finished run, kept in its checkpoint folder in place of its checkpoints, as hard links.

    A workflow manager that dies while a training job runs (a closed login session, the head job of a
    study reaching its own wall time) never records that job as finished, although the job completes its
    outputs: the next run of the study deletes them and trains again (Snakemake's --rerun-incomplete).
    The trainer restores them from here instead, in seconds, when the run is the same run: ``identity``
    gives the sha256 of what decides it (its job, trial and input files' bytes), computed only when needed.
    """

    def __init__(self, checkpoint_dir: str | os.PathLike[str], identity: Callable[[], str]) -> None:
        self.directory = Path(checkpoint_dir)
        self.kept = self.directory / FINISHED
        self.identity = identity

    def keep(self, out_dir: str | os.PathLike[str]) -> None:
        """Link the complete outputs of ``out_dir`` (run.json among them), then drop the checkpoints."""
        out = Path(out_dir)
        names = sorted(
            (str(path.relative_to(out)) for path in out.rglob("*") if path.is_file()),
            key=lambda name: name == "run.json",
        )  # run.json last: restored last, it marks a complete run
        shutil.rmtree(self.kept, ignore_errors=True)
        for name in names:
            (self.kept / name).parent.mkdir(parents=True, exist_ok=True)
            _link(out / name, self.kept / name)
        write_text(self.kept / FINISHED_MARKER, json.dumps({"fingerprint": self.identity(), "files": names}))
        for entry in self.directory.iterdir():
            if entry.is_dir() and entry != self.kept:
                shutil.rmtree(entry)
            elif entry.is_file():
                entry.unlink()

    def restore(self, out_dir: str | os.PathLike[str]) -> bool:
        """Put the kept outputs back into ``out_dir`` if they are this run's and whole; False otherwise (train)."""
        try:
            record = json.loads((self.kept / FINISHED_MARKER).read_text())
            names = [str(name) for name in record["files"]]
        except (OSError, ValueError, KeyError, TypeError):
            return False
        if not all((self.kept / name).is_file() for name in names) or record.get("fingerprint") != self.identity():
            return False
        out = Path(out_dir)
        for name in names:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            _link(self.kept / name, out / name)
            # Newer than the job's inputs, as a file the job wrote now: Snakemake's mtime rule stays satisfied.
            os.utime(out / name)
        return True
