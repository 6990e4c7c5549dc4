"""reproduction: the papers' published numbers beside ours (set-ups' ``reference`` in the study config).

Two blocks. Per set-up and metric: the paper's mean ± sd (n), ours, the difference, and, only where the
reference says our score is measured as the paper's was (``comparable``), Welch's two-sided t-test from
the summary statistics, which is all a paper publishes. Per pair of set-ups that both carry a reference
for a metric: which of the two is better in the paper (with Welch's p from its summary statistics) and in
ours (by the rank test's effect, A12 of the outcomes with failed trials as ``statistics.failures`` says, and
its Mann-Whitney p by ``statistics.test``, exact or asymptotic as in the pairs tables: never by the means, which
one collapsed trial turns against the test beside them), and whether the directions agree. The
second block is the comparison that survives a change of scale, e.g. our classifier FID on 8x8 digits
against the thesis's FID on MNIST.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ganstudy.core.atomic import atomic_path, write_text
from ganstudy.evaluate.metrics import better
from ganstudy.stats.protocol import protocol_notes
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.stats.summary import latex_table, markdown_table, trials
from ganstudy.stats.tests import a12, rank_test, welch_pvalue

SETUP_COLUMNS = [
    "setup",
    "metric",
    "source",
    "paper_mean",
    "paper_sd",
    "paper_trials",
    "ours_mean",
    "ours_sd",
    "ours_trials",
    "difference",
    "p_welch",
    "note",
]
PAIR_COLUMNS = [
    "metric",
    "setup_a",
    "setup_b",
    "paper_better",
    "paper_p_welch",
    "ours_better",
    "ours_test",
    "ours_p",
    "agree",
]
NOT_COMPARABLE = "scales not comparable (other data, extractor or sample count): only directions are compared"


def _ours(scores: pd.DataFrame, metric: str, setup: str) -> tuple[float, float, int]:
    """Our mean, sd and trials over the finite scores: what a paper's summary statistics are compared with."""
    values = trials(scores, metric, setup).finite
    mean = float(values.mean()) if len(values) else float("nan")
    sd = float(values.std(ddof=1)) if len(values) > 1 else float("nan")
    return mean, sd, len(values)


def _better(metric: str, a: str, b: str, value_a: float, value_b: float) -> str:
    """The set-up that ``value_a`` against ``value_b`` favours in the metric's direction (a paper's means, or
    our A12 against its null 0.5); "–" where they are equal or unknown."""
    if not (np.isfinite(value_a) and np.isfinite(value_b)) or value_a == value_b:
        return "–"
    return a if (value_a > value_b) == (better(metric) == "higher") else b


def reproduction_table(scores: pd.DataFrame, references: dict[str, dict[str, Any]], setups: list[str]) -> pd.DataFrame:
    """One row per set-up and referenced metric: the paper's numbers, ours, and Welch's test where comparable."""
    rows = []
    for setup in setups:
        for metric, ref in references.get(setup, {}).items():
            mean, sd, n = _ours(scores, metric, setup)
            p = float("nan")
            if not ref["comparable"]:
                note = NOT_COMPARABLE
            elif ref["sd"] is None or ref["trials"] is None:
                note = "the paper gives no sd or trials: no test"
            else:
                p = welch_pvalue(ref["mean"], ref["sd"], ref["trials"], mean, sd, n)
                note = "" if np.isfinite(p) else "too few trials (or no spread) for a test"
            rows.append(
                {
                    "setup": setup,
                    "metric": metric,
                    "source": ref["source"],
                    "paper_mean": ref["mean"],
                    # Not published: an empty cell (NaN), not the word None.
                    "paper_sd": np.nan if ref["sd"] is None else ref["sd"],
                    "paper_trials": np.nan if ref["trials"] is None else ref["trials"],
                    "ours_mean": mean,
                    "ours_sd": sd,
                    "ours_trials": n,
                    "difference": mean - ref["mean"],
                    "p_welch": p,
                    "note": note,
                }
            )
    return pd.DataFrame(rows, columns=SETUP_COLUMNS)


def direction_table(
    scores: pd.DataFrame,
    references: dict[str, dict[str, Any]],
    setups: list[str],
    settings: StatisticsSettings = StatisticsSettings(),
) -> pd.DataFrame:
    """Every pair of set-ups with references for the same metric: the better one in the paper (by its means)
    and in ours (by A12 of the outcomes, the direction of the Mann-Whitney test beside it, whose method
    statistics.test chooses)."""
    metrics = list(dict.fromkeys(m for s in setups for m in references.get(s, {})))
    rows = []
    for metric in metrics:
        cited = [s for s in setups if metric in references.get(s, {})]
        for i, a in enumerate(cited):
            for b in cited[i + 1 :]:
                ref_a, ref_b = references[a][metric], references[b][metric]
                x, y = (trials(scores, metric, s, settings.failures).outcomes for s in (a, b))
                paper = _better(metric, a, b, ref_a["mean"], ref_b["mean"])
                ours = _better(metric, a, b, a12(x, y), 0.5)
                tested = rank_test(x, y, settings.test)
                rows.append(
                    {
                        "metric": metric,
                        "setup_a": a,
                        "setup_b": b,
                        "paper_better": paper,
                        "paper_p_welch": welch_pvalue(
                            ref_a["mean"], ref_a["sd"], ref_a["trials"], ref_b["mean"], ref_b["sd"], ref_b["trials"]
                        ),
                        "ours_better": ours,
                        "ours_test": tested.method,
                        "ours_p": tested.p,
                        "agree": "–" if "–" in (paper, ours) else ("yes" if paper == ours else "no"),
                    }
                )
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def write_reproduction(
    scores_path: str | os.PathLike[str],
    references: dict[str, dict[str, Any]],
    setups: list[str],
    out_dir: str | os.PathLike[str],
    settings: StatisticsSettings = StatisticsSettings(),
) -> list[Path]:
    """reproduction.{csv,md,tex} (both blocks in the Markdown and LaTeX; the CSV holds the per-set-up block)
    and reproduction_directions.csv."""
    scores = pd.read_csv(scores_path)
    out, digits = Path(out_dir), settings.digits
    per_setup, pairs = (
        reproduction_table(scores, references, setups),
        direction_table(scores, references, setups, settings),
    )
    titles = (
        "The papers' results beside ours (difference = ours - paper; Welch's two-sided t-test where comparable)",
        "Direction between set-ups in the paper (by its means; Welch p from its summary statistics) and in ours (by "
        "A12, the rank test's direction; Mann-Whitney p, its method in ours_test)",
    )
    paths = [out / f"reproduction.{ext}" for ext in ("csv", "md", "tex")] + [out / "reproduction_directions.csv"]
    with atomic_path(paths[0]) as tmp:
        per_setup.to_csv(tmp, index=False)
    # Ours are measured as the footnote says; a paper's protocol is what its text says (the reference's ``comparable``).
    metrics = list(dict.fromkeys(per_setup.metric))
    ours = [f"{metric} (ours): {line}" for metric in metrics for line in protocol_notes(scores, metric, setups)[0]]
    notes = (ours, [])
    write_text(
        paths[1],
        "".join(
            f"### {title}\n\n{markdown_table(frame, False, digits)}" + "".join(f"\n{line}\n" for line in note) + "\n"
            for title, frame, note in zip(titles, (per_setup, pairs), notes)
        ),
    )
    write_text(
        paths[2],
        "\n".join(
            latex_table(frame, title, False, digits, note)
            for title, frame, note in zip(titles, (per_setup, pairs), notes)
        ),
    )
    with atomic_path(paths[3]) as tmp:
        pairs.to_csv(tmp, index=False)
    return paths
