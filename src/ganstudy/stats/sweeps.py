"""A sweep's statistics (issue 47): which of its keys matter, and how.

Per metric and swept key, the main effect at each of the key's values, on cell means: each set-up of the
sweep is one cell (one combination of the keys' values), and a value's level is the mean of the means of
its cells, so that a cell with more finite trials weighs no more than another and the other keys' effects
cancel (the estimated marginal mean of a cell-means model). Its 95% t-interval takes the variance within
the cells, pooled over the sweep. A Kruskal-Wallis test over each key's values. For every two keys, the
interaction: the mean at each pair of values, and its test by the aligned rank transform
(stats.aligned_ranks), Holm-adjusted over the pairs of keys. Tables as CSV, Markdown and LaTeX;
report/figures.py draws them, with the sweep's set-ups pairwise (their Holm-adjusted p-values from the
study's pairs tables: one Holm family per metric).
"""

from __future__ import annotations

import json
import os
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import t

from ganstudy.config.sweep_expansion import swept_keys, value_label
from ganstudy.evaluate.metrics import better
from ganstudy.stats.aligned_ranks import METHOD, interaction_test
from ganstudy.stats.protocol import protocol_notes
from ganstudy.stats.summary import write_table
from ganstudy.stats.tests import holm, kruskal_wallis, outcomes

CONFIDENCE = 0.95
EFFECT_COLUMNS = ["key", "value", "cells", "runs", "failed", "mean", "pooled_sd", "ci_low", "ci_high"]
TEST_COLUMNS = ["metric", "key", "values", "H", "df", "p_value", "p_holm"]
INTERACTION_COLUMNS = ["metric", "first", "second", "F", "df", "df_resid", "p_value", "p_holm", "note"]


def sweep_runs(
    scores: pd.DataFrame, metric: str, levels: dict[str, dict[str, Any]], failures: str = "worst"
) -> pd.DataFrame:
    """One row per trial of ``metric`` of the sweep's set-ups: its set-up, its outcome (tests.outcomes: a
    failed trial worse than every finite score, or, left out as ``failures`` says, NaN: a row still, so that
    it is counted), and the set-up's value of each swept key (as its set-up name shows it). The means and
    the interaction test take the finite rows (``finite``); the Kruskal-Wallis tests every row with a value."""
    part = scores[(scores.metric == metric) & scores.setup.isin(list(levels))]
    rows = [
        {
            "setup": row.setup,
            "value": next(iter(outcomes([row.value], better(metric) == "higher", failures)), np.nan),
            **{key: value_label(v) for key, v in levels[row.setup].items()},
        }
        for row in part.itertuples()
    ]
    return pd.DataFrame(rows, columns=["setup", "value", *swept_keys(levels)])


def finite(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``sweep_runs`` that have a score to average: failed trials have none."""
    return runs[np.isfinite(runs.value.to_numpy(float))]


def key_values(levels: dict[str, dict[str, Any]], key: str) -> list[str]:
    """A key's values as labels, in numeric order when they are all numbers, else in the sweep's order
    (a list-valued key, such as betas, by its labels: lists are not hashable)."""
    values = list({value_label(values[key]): values[key] for values in levels.values()}.values())
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return [value_label(v) for v in (sorted(values) if numeric else values)]


def main_effects(runs: pd.DataFrame, levels: dict[str, dict[str, Any]], confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Per swept key and value: the cells (set-ups) and runs at it, the mean of its cells' means, the
    within-cell sd pooled over the sweep and the ``confidence`` t-interval of the level (standard error
    pooled sd x sqrt(sum of 1 / n over its cells) / cells, degrees of freedom runs - cells of the sweep;
    NaN where no cell has two runs), over the finite runs; ``failed`` counts the failed trials at the value,
    which have no score to average."""
    failed = runs[~np.isfinite(runs.value.to_numpy(float))]
    runs = finite(runs)
    cells = runs.groupby("setup")["value"]
    means, counts = cells.mean(), cells.count()
    freedom = int(counts.sum() - len(counts))
    pooled = float(np.sqrt(((runs.value - runs.setup.map(means)) ** 2).sum() / freedom)) if freedom > 0 else np.nan
    quantile = t.ppf(0.5 + confidence / 2, freedom) if freedom > 0 else np.nan
    rows = []
    for key in swept_keys(levels):
        for label in key_values(levels, key):
            at = [setup for setup in means.index if value_label(levels[setup][key]) == label]
            level = float(means[at].mean()) if at else np.nan
            half = quantile * pooled * np.sqrt((1 / counts[at]).sum()) / len(at) if at else np.nan
            rows.append(
                {
                    "key": key,
                    "value": label,
                    "cells": len(at),
                    "runs": int(counts[at].sum()),
                    "failed": int(sum(value_label(levels[setup][key]) == label for setup in failed.setup)),
                    "mean": level,
                    "pooled_sd": pooled,
                    "ci_low": level - half,
                    "ci_high": level + half,
                }
            )
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def key_tests(runs_by_metric: dict[str, pd.DataFrame], levels: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Per metric and swept key, Kruskal-Wallis over the key's values (the runs at each value pooled over
    the other keys), Holm-adjusted over the keys of the metric."""
    rows = []
    for metric, runs in runs_by_metric.items():
        tested = []
        for key in swept_keys(levels):
            groups = [
                runs.loc[runs[key] == label, "value"].dropna().to_numpy(float) for label in key_values(levels, key)
            ]
            h, df, p = kruskal_wallis(groups)
            tested.append({"metric": metric, "key": key, "values": len(groups), "H": h, "df": df, "p_value": p})
        adjusted = holm([row["p_value"] for row in tested])
        rows += [{**row, "p_holm": p_holm} for row, p_holm in zip(tested, adjusted)]
    return pd.DataFrame(rows, columns=TEST_COLUMNS)


def interaction_tests(runs_by_metric: dict[str, pd.DataFrame], levels: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Per metric and pair of swept keys, the aligned-rank-transform test of their interaction,
    Holm-adjusted over the metric's pairs of keys (none for a sweep of one key)."""
    keys, rows = swept_keys(levels), []
    for metric, runs in runs_by_metric.items():
        tested = [
            {"metric": metric, "first": a, "second": b, **interaction_test(finite(runs), keys, a, b)}
            for a, b in combinations(keys, 2)
        ]
        adjusted = holm([row["p_value"] for row in tested]) if tested else []
        rows += [{**row, "p_holm": p_holm} for row, p_holm in zip(tested, adjusted)]
    return pd.DataFrame(rows, columns=INTERACTION_COLUMNS)


def interaction(runs: pd.DataFrame, levels: dict[str, dict[str, Any]], first: str, second: str) -> pd.DataFrame:
    """The mean of the cells' means at each pair of values of two keys (the cells a third key splits weigh
    alike): rows ``first``'s values, columns ``second``'s."""
    table = pd.DataFrame(np.nan, index=key_values(levels, first), columns=key_values(levels, second))
    cells = finite(runs).groupby(["setup", first, second], as_index=False)["value"].mean()
    for (a, b), means in cells.groupby([first, second])["value"]:
        table.loc[a, b] = means.mean()
    table.index.name, table.columns.name = first, second
    return table


def read_sweeps(sweeps_path: str | os.PathLike[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """The study's sweeps as ganstudy.config.sweep_expansion.sweep_levels gives them, from their spec file (JSON)."""
    return json.loads(Path(sweeps_path).read_text())


def write_sweep_stats(
    scores_path: str | os.PathLike[str],
    sweeps_path: str | os.PathLike[str],
    metrics: list[str],
    out_dir: str | os.PathLike[str],
    digits: int = 4,
    failures: str = "worst",
) -> list[Path]:
    """For each sweep: sweep_<set-up>_<metric> (the main effects of its keys), sweep_<set-up>_tests
    (Kruskal-Wallis per metric and key) and sweep_<set-up>_interactions (the aligned rank transform per
    metric and pair of keys) as CSV, Markdown and LaTeX. Failed trials (``failures``: statistics.failures)
    enter the Kruskal-Wallis tests as the worst outcomes; the means and the interaction have no value for
    them, and a footnote says how many they left out."""
    scores, out, written = pd.read_csv(scores_path), Path(out_dir), []
    for declared, levels in read_sweeps(sweeps_path).items():
        runs = {metric: sweep_runs(scores, metric, levels, failures) for metric in metrics}
        footnotes = {metric: protocol_notes(scores, metric, list(levels))[0] for metric in metrics}
        for metric in metrics:
            failed = len(runs[metric]) - len(finite(runs[metric]))
            if failed:
                footnotes[metric].append(
                    f"{failed} failed trial(s) (NaN or inf) have no score: left out of the means and the interaction"
                    + (", ranked worst in the Kruskal-Wallis tests" if failures == "worst" else " and the tests")
                )
        every_footnote = [f"{metric}: {line}" for metric in metrics for line in footnotes[metric]]
        for metric in metrics:
            written += write_table(
                out,
                f"sweep_{declared}_{metric}",
                main_effects(runs[metric], levels),
                f"{metric.upper()} of the sweep of {declared}: at each value of each key, the mean of its set-ups' "
                f"means and its {CONFIDENCE:.0%} interval (within-set-up variance pooled) ({better(metric)} is "
                "better)",
                False,
                digits,
                footnotes[metric],
            )
        written += write_table(
            out,
            f"sweep_{declared}_tests",
            key_tests(runs, levels),
            f"Sweep of {declared}: Kruskal-Wallis test over each key's values (tie-corrected), Holm-adjusted over the "
            "keys",
            False,
            digits,
            every_footnote,
        )
        written += write_table(
            out,
            f"sweep_{declared}_interactions",
            interaction_tests(runs, levels),
            f"Sweep of {declared}: each two keys' interaction by the {METHOD}, Holm-adjusted over the pairs of keys",
            False,
            digits,
            every_footnote,
        )
    return written
