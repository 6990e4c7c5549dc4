"""``ganstudy export``: a study's finished runs, to browse in the tools labs already use: MLflow (a tracking
store: a local SQLite file by default, or a lab's tracking server) and TensorBoard (event files).

One MLflow run, and one TensorBoard run folder, per trial of each planned set-up (plan.json, written by the
workflow): its settings as parameters, every numeric column of losses.csv per iteration (a per-class run's
as ``class<label>/<column>``), its final scores, and its files (run.json, score file, losses.csv, sample
grid, cell and class tables) as artifacts or images. An export mirrors the study: run again, it leaves a
trial whose files are unchanged as it is, replaces one that was retrained or rescored, and deletes (MLflow:
marks deleted) the runs of trials the plan no longer names. Both exporters are optional extras
(``pip install -e '.[export]'``), imported only when asked for.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ganstudy.core.atomic import read_json, write_json
from ganstudy.errors import GanstudyError
from ganstudy.report.status import ended_at
from ganstudy.study.folder import StudyFolder
from ganstudy.study.outcomes import DIVERGED, FINISHED

# Files of a run folder that go along as artifacts, besides run.json and the score file.
RUN_FILES = ("losses.csv", "samples.png", "cells.csv", "classes.csv")
# A run's tag (MLflow) or file (TensorBoard) naming the trial and the hash of its files.
KEY_TAG, FINGERPRINT_TAG = "ganstudy.run", "ganstudy.fingerprint"
# How the trial's training ended (ganstudy.study.outcomes): finished or diverged.
OUTCOME_TAG = "ganstudy.outcome"
MARK = "ganstudy-export.json"
# MLflow takes at most 100 parameters and 1000 metric values per call.
PARAMS_PER_CALL, METRICS_PER_CALL = 100, 1000


@dataclass(frozen=True)
class FinishedRun:
    """One finished trial of a study: its run folder and score file."""

    setup: str
    trial: int
    folder: Path
    score_file: Path | None

    @property
    def key(self) -> str:
        return f"{self.setup}/trial{self.trial}"

    def files(self) -> list[Path]:
        found = [
            self.folder / "run.json",
            *(self.folder / name for name in RUN_FILES if (self.folder / name).is_file()),
        ]
        return found + ([self.score_file] if self.score_file is not None else [])

    def fingerprint(self) -> str:
        """The sha256 of its files: a retrained or rescored trial exports anew."""
        digest = hashlib.sha256()
        for path in self.files():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        return digest.hexdigest()

    def params(self) -> dict[str, str | int | float | bool]:
        """The run's training settings, seed and placement, flattened to ``a.b`` keys."""
        record = read_json(self.folder / "run.json")
        facts = {key: record.get(key) for key in ("study_seed", "world_size", "grid_shape", "device", "stack_layout")}
        return _flat({"settings": record["settings"], **facts})

    def series(self) -> list[tuple[str, int, float]]:
        """(name, iteration, value) of every finite number in losses.csv."""
        path = self.folder / "losses.csv"
        if not path.is_file() or path.stat().st_size == 0:
            return []
        table = pd.read_csv(path)
        prefix = (
            table["class"].map(lambda label: f"class{label}/") if "class" in table else pd.Series("", index=table.index)
        )
        points = []
        for column in table.columns.drop(["iteration", "class"], errors="ignore"):
            values = pd.to_numeric(table[column], errors="coerce")
            points += [
                (name, int(step), float(value))
                for name, step, value in zip(prefix + column, table["iteration"], values)
                if np.isfinite(value)
            ]
        return points

    def scores(self) -> dict[str, float]:
        if self.score_file is None:
            return {}
        return {
            name: float(value) for name, value in read_json(self.score_file)["scores"].items() if np.isfinite(value)
        }


def _last_iteration(points: list[tuple[str, int, float]]) -> int:
    """The step the final scores are drawn at: the run's last iteration in its series."""
    return max((step for _, step, _ in points), default=0)


def _flat(value: Any, prefix: str = "") -> dict[str, str | int | float | bool]:
    """Nested settings as ``a.b`` keys; numbers, flags and text as they are, anything else (lists, null) as JSON."""
    if isinstance(value, Mapping):
        flat: dict[str, str | int | float | bool] = {}
        for key, inner in value.items():
            flat |= _flat(inner, f"{prefix}{key}.")
        return flat
    return {prefix[:-1]: value if isinstance(value, (str, int, float, bool)) else json.dumps(value)}


def finished_runs(
    study_dir: str | os.PathLike[str], planned_runs: dict[str, Any] | None = None
) -> tuple[str, list[FinishedRun], list[str]]:
    """The study's name, the finished trials of its planned set-ups (run.json written), and a line for each
    planned trial that has not finished (left out); planned are ``planned_runs`` (status.study_runs of a
    config), else those of the plan the study's last run wrote."""
    folder = StudyFolder.at(study_dir)
    if not Path(folder.plan()).is_file():
        raise GanstudyError(
            f"{folder.plan()} is missing: {study_dir} is not a study the workflow has run; give results/<study> "
            "or the study's config file (and the workflow's working directory as --directory)"
        )
    plan = planned_runs or read_json(folder.plan())
    # A schedule's rounds that no look asked for are not trials of the study.
    ended = ended_at(study_dir, plan)
    runs, missing = [], []
    for setup, planned in plan["setups"].items():
        for trial in range(planned["trials"] if ended is None else min(planned["trials"], ended)):
            run, score = Path(folder.run(setup, trial)), Path(folder.score(setup, trial))
            if (run / "run.json").is_file():
                runs.append(FinishedRun(setup, trial, run, score if score.is_file() else None))
            else:
                missing.append(f"{setup}/trial{trial}: not finished, left out")
    return plan["study"], runs, missing


def export_mlflow(
    study: str, runs: list[FinishedRun], tracking_uri: str, artifacts: str | None = None
) -> dict[str, int]:
    """The runs into experiment ``ganstudy/<study>`` of the MLflow store at ``tracking_uri``; counts of runs
    written, unchanged and deleted."""
    try:
        from mlflow import MlflowClient
        from mlflow.entities import Metric, Param
    except ImportError:
        raise GanstudyError(
            "--mlflow needs MLflow: pip install -e '.[export]' (mlflow-skinny with SQLAlchemy)"
        ) from None
    client = MlflowClient(tracking_uri=tracking_uri)
    name = f"ganstudy/{study}"
    experiment = client.get_experiment_by_name(name)
    experiment_id = (
        experiment.experiment_id if experiment else client.create_experiment(name, artifact_location=artifacts)
    )
    # Only runs an export made (tagged with their trial) are the export's to replace; a lab's own are left.
    existing: dict[str, list[Any]] = {}
    for old in client.search_runs([experiment_id], max_results=50000):
        if KEY_TAG in old.data.tags:
            existing.setdefault(old.data.tags[KEY_TAG], []).append(old)
    counts = {"written": 0, "unchanged": 0, "deleted": 0}
    wanted = {run.key for run in runs}
    for key, olds in existing.items():
        if key not in wanted:
            for old in olds:
                client.delete_run(old.info.run_id)
            counts["deleted"] += 1
    for run in runs:
        fingerprint = run.fingerprint()
        olds = existing.get(run.key, [])
        kept = next((old.info.run_id for old in olds if old.data.tags.get(FINGERPRINT_TAG) == fingerprint), None)
        for old in olds:
            if old.info.run_id != kept:
                client.delete_run(old.info.run_id)
        if kept:
            counts["unchanged"] += 1
            continue
        outcome = read_json(run.folder / "run.json").get("outcome", FINISHED)
        tags = {KEY_TAG: run.key, "setup": run.setup, "trial": str(run.trial), OUTCOME_TAG: outcome}
        run_id = client.create_run(experiment_id, run_name=run.key, tags=tags).info.run_id
        params = [Param(key, str(value)[:6000]) for key, value in run.params().items()]
        for start in range(0, len(params), PARAMS_PER_CALL):
            client.log_batch(run_id, params=params[start : start + PARAMS_PER_CALL])
        points, now = run.series(), int(time.time() * 1000)
        last = _last_iteration(points)
        metrics = [Metric(name, value, now, step) for name, step, value in points]
        metrics += [Metric(f"score/{name}", value, now, last) for name, value in run.scores().items()]
        for start in range(0, len(metrics), METRICS_PER_CALL):
            client.log_batch(run_id, metrics=metrics[start : start + METRICS_PER_CALL])
        for path in run.files():
            client.log_artifact(run_id, str(path))
        # Tagged last: an export cut short leaves a run without it, which the next export replaces.
        client.set_tag(run_id, FINGERPRINT_TAG, fingerprint)
        # MLflow's own word for a run that did not end well, so that its UI marks a diverged trial.
        client.set_terminated(run_id, "FAILED" if outcome == DIVERGED else "FINISHED")
        counts["written"] += 1
    return counts


def export_tensorboard(study: str, runs: list[FinishedRun], folder: str | os.PathLike[str]) -> dict[str, int]:
    """The runs as event files under ``folder``/<study>/<set-up>/trial<k> (``tensorboard --logdir folder``):
    scalars per iteration, final scores (also as hyper-parameter metrics) and the sample grid."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise GanstudyError("--tensorboard needs TensorBoard: pip install -e '.[export]'") from None
    from PIL import Image

    root = Path(folder) / study
    counts = {"written": 0, "unchanged": 0, "deleted": 0}
    wanted = {run.key for run in runs}
    for mark in sorted(root.glob(f"*/*/{MARK}")):
        if read_json(mark)["run"] not in wanted:
            shutil.rmtree(mark.parent)
            if not any(mark.parent.parent.iterdir()):
                mark.parent.parent.rmdir()
            counts["deleted"] += 1
    for run in runs:
        target, fingerprint = root / run.setup / f"trial{run.trial}", run.fingerprint()
        if (target / MARK).is_file() and read_json(target / MARK)["fingerprint"] == fingerprint:
            counts["unchanged"] += 1
            continue
        shutil.rmtree(target, ignore_errors=True)
        points, scores = run.series(), run.scores()
        last = _last_iteration(points)
        with SummaryWriter(str(target)) as writer:
            for name, step, value in points:
                writer.add_scalar(name, value, step)
            for name, value in scores.items():
                writer.add_scalar(f"score/{name}", value, last)
            samples = run.folder / "samples.png"
            if samples.is_file():
                writer.add_image("samples", np.asarray(Image.open(samples).convert("RGB")), last, dataformats="HWC")
            writer.add_hparams(run.params(), {f"hparam/{name}": value for name, value in scores.items()}, run_name=".")
        write_json(target / MARK, {"run": run.key, "fingerprint": fingerprint})
        counts["written"] += 1
    return counts
