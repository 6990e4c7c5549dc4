"""stats: per metric, a summary table per set-up (thesis table 4.4) and a p-value matrix (table 4.5)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from ganstudy.atomic import atomic_path, write_text
from ganstudy.stats.tests import ranksum_pvalue

# Which way is better, so that readers of a table need not remember it.
BETTER = {"fid": "lower", "isc": "higher", "class_fid": "lower", "label_tvd": "lower"}

SUMMARY_COLUMNS = ["setup", "trials", "mean", "sd", "min", "max", "median", "mean_train_minutes"]


def summary_table(scores: pd.DataFrame, metric: str, setups: list[str]) -> pd.DataFrame:
    rows = []
    for setup in setups:
        part = scores[(scores.metric == metric) & (scores.setup == setup)]
        values = part.value.to_numpy(float)
        rows.append(
            {
                "setup": setup,
                "trials": len(values),
                "mean": values.mean() if len(values) else np.nan,
                "sd": values.std(ddof=1) if len(values) > 1 else np.nan,
                "min": values.min() if len(values) else np.nan,
                "max": values.max() if len(values) else np.nan,
                "median": np.median(values) if len(values) else np.nan,
                "mean_train_minutes": part.train_seconds.mean() / 60 if len(values) else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def pvalue_matrix(scores: pd.DataFrame, metric: str, setups: list[str]) -> pd.DataFrame:
    """Upper triangle of pairwise p-values, rows and columns in set-up order (the thesis's layout)."""
    values = {s: scores[(scores.metric == metric) & (scores.setup == s)].value.to_numpy(float) for s in setups}
    matrix = pd.DataFrame(np.nan, index=setups[:-1], columns=setups[1:])
    for i, a in enumerate(setups):
        for b in setups[i + 1 :]:
            matrix.loc[a, b] = ranksum_pvalue(values[a], values[b])
    matrix.index.name = "setup"
    return matrix


def _fmt(value: float, digits: int = 4) -> str:
    if pd.isna(value):
        return "–"
    return f"{value:.{digits}g}"


def markdown_table(frame: pd.DataFrame, index: bool = False) -> str:
    data = frame.reset_index() if index else frame
    header = "| " + " | ".join(str(c) for c in data.columns) + " |"
    rule = "|" + "|".join("---" for _ in data.columns) + "|"
    body = [
        "| " + " | ".join(_fmt(v) if isinstance(v, (float, np.floating)) else str(v) for v in row) + " |"
        for row in data.itertuples(index=False)
    ]
    return "\n".join([header, rule, *body]) + "\n"


def write_stats(
    scores_path: str | os.PathLike[str], setups: list[str], metrics: list[str], out_dir: str | os.PathLike[str]
) -> list[Path]:
    """summary_<metric>.{csv,md} and pvalues_<metric>.{csv,md} for each metric, set-ups in the given order."""
    scores = pd.read_csv(scores_path)
    out = Path(out_dir)
    written = []
    for metric in metrics:
        summary = summary_table(scores, metric, setups)
        pvalues = pvalue_matrix(scores, metric, setups)
        for name, frame, index in (("summary", summary, False), ("pvalues", pvalues, True)):
            csv_path = out / f"{name}_{metric}.csv"
            with atomic_path(csv_path) as tmp:
                frame.to_csv(tmp, index=index)
            title = (
                f"{metric.upper()} per set-up ({BETTER[metric]} is better)"
                if name == "summary"
                else f"{metric.upper()}: two-sided tie-corrected rank-sum p-values (Mann-Whitney U, normal approximation)"
            )
            md_path = out / f"{name}_{metric}.md"
            write_text(md_path, f"### {title}\n\n" + markdown_table(frame, index=index))
            written += [csv_path, md_path]
    return written
