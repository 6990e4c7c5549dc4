"""aggregate: every evaluate record of a study -> one tidy CSV (one row per run and metric, with the protocol
that measured it: ganstudy.stats.protocol, what each of the run's ranks held: cores and GPUs, and the hardware
it trained on: ganstudy.stats.hardware)."""

from __future__ import annotations

import os
from collections.abc import Iterable

import pandas as pd

from ganstudy.core.atomic import atomic_path, read_json
from ganstudy.stats.hardware import NOT_RECORDED
from ganstudy.stats.protocol import protocol_text
from ganstudy.study.outcomes import diverged

COLUMNS = [
    "study",
    "setup",
    "trial",
    "metric",
    "value",
    "train_seconds",
    "ranks",
    "cores_per_rank",
    "gpus_per_rank",
    "grid",
    "hardware",
    "protocol",
]


def aggregate_scores(
    study: str, score_paths: Iterable[str | os.PathLike[str]], out_path: str | os.PathLike[str]
) -> pd.DataFrame:
    table = read_scores(study, score_paths)
    with atomic_path(out_path) as tmp:
        table.to_csv(tmp, index=False)
    return table


def read_scores(study: str, score_paths: Iterable[str | os.PathLike[str]]) -> pd.DataFrame:
    """The evaluate records as the tidy table, sorted by metric, set-up and trial. A diverged trial's inf in
    each of evaluation.metrics is kept where the study's scored trials have that column (a metric may leave it
    out for a kind of generator: class_fid for an unlabelled one), everywhere when no trial was scored."""
    records = [read_json(path) for path in score_paths]
    scored = {metric for record in records if not diverged(record) for metric in record["scores"]}
    rows = []
    for record in records:
        for metric, value in record["scores"].items():
            if diverged(record) and scored and metric not in scored:
                continue
            rows.append(
                {
                    "study": study,
                    "setup": record["setup_name"],
                    "trial": record["trial"],
                    "metric": metric,
                    "value": value,
                    "train_seconds": record["train_seconds"],
                    "ranks": record.get("world_size", 1),
                    # Score records of ganstudy before 2026-12 did not say: one core per rank, no GPU.
                    "cores_per_rank": record.get("cores_per_rank", 1),
                    "gpus_per_rank": record.get("gpus_per_rank", 0),
                    "grid": record.get("grid_shape") or "",
                    "hardware": record.get("hardware") or NOT_RECORDED,
                    "protocol": protocol_text(record, metric),
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["metric", "setup", "trial"], kind="stable")
