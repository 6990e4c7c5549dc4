"""Finished runs against the config that names them, and the archive that keeps a run which is redone.

A finished run's ``run.json`` records its job (``TrainingJob.record``: settings, seed, inputs, data kind and
the config sections that made its input files). At plan time the workflow compares every finished run
with the job the config describes now, from the records alone, so that an edit is caught whatever
Snakemake's metadata says (after ``make clean``, in a copied results folder, from another working
directory). A run that no longer matches is moved into ``archive/<time>-<hash>/`` inside the study, in
the study's own layout (run folder, score, training log), with a record of why, and trained again:
nothing finished is deleted.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ganstudy.core.atomic import write_json
from ganstudy.study.folder import StudyFolder
from ganstudy.train.job import older_paths_named

# Keys of a record that change no result: runs recorded before the job was recorded whole still carry
# their set-up's trial count in their settings.
_IGNORED = {"settings.trials"}
# Most differences a line names; the archive's record keeps them all.
_SHOWN = 4


@dataclass(frozen=True)
class Changed:
    """A finished run whose record differs from the config."""

    setup: str
    trial: int
    changes: tuple[str, ...]  # "settings.lr: 0.0002 -> 0.0001", one per differing key
    recorded: str  # a hash of the job it records: the runs of one former set-up share an archive folder

    def line(self) -> str:
        more = len(self.changes) - _SHOWN
        return (
            f"{self.setup} trial {self.trial}: "
            + "; ".join(self.changes[:_SHOWN])
            + (f"; and {more} more" if more > 0 else "")
        )


def _flat(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in record.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(_flat(value, f"{path}."))
        else:
            flat[path] = value
    return flat


def differences(recorded: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    """Each key whose value differs, as 'key: recorded -> expected' (a missing key reads "absent"). A key
    recorded as null is no change from an absent one: an optional field added later, unset, is the same run."""
    old, new = _flat(recorded), _flat(expected)

    def value(record: dict[str, Any], key: str) -> Any:
        return "absent" if record.get(key) is None else record[key]

    changed = sorted(
        key for key in old.keys() | new.keys() if key not in _IGNORED and value(old, key) != value(new, key)
    )
    return [f"{key}: {json.dumps(value(old, key))} -> {json.dumps(value(new, key))}" for key in changed]


def _read(path: Path) -> Any:
    """A JSON record, or a string naming why it cannot be read."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return f"unreadable ({exc.__class__.__name__})"


def changed_runs(
    study_dir: str | os.PathLike[str], expected: Mapping[str, Mapping[str, Any]], runs: Iterable[tuple[str, int]]
) -> list[Changed]:
    """The finished ones of the (set-up, trial) ``runs`` whose run.json records another job than
    ``expected[setup]`` (a ``TrainingJob.record``; a run written before the job was recorded whole is
    compared on its settings and seed). Unfinished runs are not listed: their checkpoints carry a
    fingerprint of their settings and are not resumed under other ones."""
    found = []
    for setup, trial in runs:
        path = Path(StudyFolder.at(study_dir).run_file("run.json", setup, trial))
        if not path.is_file():
            continue
        recorded = _read(path)
        if isinstance(recorded, dict):
            recorded = recorded.get("job") or {"seed": recorded.get("study_seed"), "settings": recorded.get("settings")}
            recorded = older_paths_named(recorded, expected[setup])
            changes = differences(recorded, {key: value for key, value in expected[setup].items() if key in recorded})
        else:
            changes = [f"run.json: {recorded if isinstance(recorded, str) else 'not a JSON object'}"]
        if changes:
            digest = hashlib.sha256(json.dumps(recorded, sort_keys=True).encode()).hexdigest()[:8]
            found.append(Changed(setup, trial, tuple(changes), digest))
    return found


def archive_run(study_dir: str | os.PathLike[str], changed: Changed, now: dt.datetime) -> list[str]:
    """Move a changed run (its folder, score and training log) into ``archive/<now>-<hash of its job>/`` in
    the study's layout, with ``archived/<set-up>/trial<k>.json`` saying why and when; returns the moved paths."""
    study, setup, trial = StudyFolder.at(study_dir), changed.setup, changed.trial
    # The archive keeps the study's own layout.
    archive = StudyFolder(study.archive(f"{now.strftime('%Y%m%dT%H%M%S')}-{changed.recorded}"))
    moved = []
    for where in (StudyFolder.run, StudyFolder.score, StudyFolder.train_log):
        source, target = Path(where(study, setup, trial)), Path(where(archive, setup, trial))
        if source.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(source, target)
            moved.append(str(target))
    write_json(
        archive.archived(setup, trial),
        {
            "setup": setup,
            "trial": trial,
            "changes": list(changed.changes),
            "moved": moved,
            "archived_at": now.isoformat(timespec="seconds"),
        },
    )
    return moved
