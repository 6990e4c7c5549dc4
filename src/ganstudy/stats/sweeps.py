"""A sweep's statistics (issue 47): which of its keys matter, and how.

Per metric and swept key, the main effect: the metric's mean over the runs at each of the key's values
(every trial of every set-up with that value, whatever the other keys say), with a 95% t-interval of the
mean, and a Kruskal-Wallis test over the values. For every two keys, the interaction: the mean at each
pair of values. Tables as CSV, Markdown and LaTeX; report/figures.py draws them, with the sweep's set-ups
pairwise (rank-sum p-values, Holm-adjusted over the sweep's pairs: summary.pairwise_table).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ganstudy.evaluate.metrics import better
from ganstudy.stats.protocol import protocol_notes
from ganstudy.stats.summary import write_table
from ganstudy.stats.tests import holm, kruskal_wallis, mean_interval
from ganstudy.sweeps import swept_keys, value_label

CONFIDENCE = 0.95
EFFECT_COLUMNS = ["key", "value", "runs", "mean", "sd", "ci_low", "ci_high"]
TEST_COLUMNS = ["metric", "key", "values", "H", "df", "p_value", "p_holm"]


def sweep_runs(scores: pd.DataFrame, metric: str, levels: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per finite score of ``metric`` of the sweep's set-ups: its set-up, value, and the set-up's
    value of each swept key (as its set-up name shows it)."""
    part = scores[(scores.metric == metric) & scores.setup.isin(list(levels))]
    part = part[np.isfinite(part.value.to_numpy(float))]
    rows = [{"setup": row.setup, "value": float(row.value), **{key: value_label(v) for key, v in levels[row.setup].items()}}
            for row in part.itertuples()]
    return pd.DataFrame(rows, columns=["setup", "value", *swept_keys(levels)])


def key_values(levels: dict[str, dict[str, Any]], key: str) -> list[str]:
    """A key's values as labels, in numeric order when they are all numbers, else in the sweep's order."""
    values = list(dict.fromkeys(values[key] for values in levels.values()))
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return [value_label(v) for v in (sorted(values) if numeric else values)]


def main_effects(runs: pd.DataFrame, levels: dict[str, dict[str, Any]], confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Per swept key and value: runs, mean, sd and the ``confidence`` t-interval of the mean (NaN with
    fewer than two runs)."""
    rows = []
    for key in swept_keys(levels):
        for label in key_values(levels, key):
            values = runs.loc[runs[key] == label, "value"].to_numpy(float)
            n = len(values)
            low, high = mean_interval(values, confidence)
            rows.append({"key": key, "value": label, "runs": n, "mean": values.mean() if n else np.nan,
                         "sd": values.std(ddof=1) if n > 1 else np.nan, "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def key_tests(runs_by_metric: dict[str, pd.DataFrame], levels: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Per metric and swept key, Kruskal-Wallis over the key's values (the runs at each value pooled over
    the other keys), Holm-adjusted over the keys of the metric."""
    rows = []
    for metric, runs in runs_by_metric.items():
        tested = []
        for key in swept_keys(levels):
            groups = [runs.loc[runs[key] == label, "value"].to_numpy(float) for label in key_values(levels, key)]
            h, df, p = kruskal_wallis(groups)
            tested.append({"metric": metric, "key": key, "values": len(groups), "H": h, "df": df, "p_value": p})
        adjusted = holm([row["p_value"] for row in tested])
        rows += [{**row, "p_holm": p_holm} for row, p_holm in zip(tested, adjusted)]
    return pd.DataFrame(rows, columns=TEST_COLUMNS)


def interaction(runs: pd.DataFrame, levels: dict[str, dict[str, Any]], first: str, second: str) -> pd.DataFrame:
    """The mean at each pair of values of two keys: rows ``first``'s values, columns ``second``'s."""
    table = pd.DataFrame(np.nan, index=key_values(levels, first), columns=key_values(levels, second))
    for (a, b), values in runs.groupby([first, second])["value"]:
        table.loc[a, b] = values.mean()
    table.index.name, table.columns.name = first, second
    return table


def read_sweeps(sweeps_path: str | os.PathLike[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """The study's sweeps as ganstudy.sweeps.sweep_levels gives them, from their spec file (JSON)."""
    return json.loads(Path(sweeps_path).read_text())


def write_sweep_stats(scores_path: str | os.PathLike[str], sweeps_path: str | os.PathLike[str], metrics: list[str],
                      out_dir: str | os.PathLike[str], digits: int = 4) -> list[Path]:
    """For each sweep: sweep_<set-up>_<metric> (the main effects of its keys) and sweep_<set-up>_tests
    (Kruskal-Wallis per metric and key) as CSV, Markdown and LaTeX."""
    scores, out, written = pd.read_csv(scores_path), Path(out_dir), []
    for declared, levels in read_sweeps(sweeps_path).items():
        runs = {metric: sweep_runs(scores, metric, levels) for metric in metrics}
        footnotes = {metric: protocol_notes(scores, metric, list(levels))[0] for metric in metrics}
        for metric in metrics:
            written += write_table(out, f"sweep_{declared}_{metric}", main_effects(runs[metric], levels),
                                   f"{metric.upper()} of the sweep of {declared}: mean and {CONFIDENCE:.0%} interval over the runs at each value "
                                   f"of each key ({better(metric)} is better)", False, digits, footnotes[metric])
        written += write_table(out, f"sweep_{declared}_tests", key_tests(runs, levels),
                               f"Sweep of {declared}: Kruskal-Wallis test over each key's values (tie-corrected), Holm-adjusted over the keys",
                               False, digits, [f"{metric}: {line}" for metric in metrics for line in footnotes[metric]])
    return written
