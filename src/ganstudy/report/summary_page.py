"""The study's answer on one page (results/<study>/summary.md), made from the tables it summarises.

Per metric: the set-ups ranked by their mean over trials (in the metric's direction), with sd and the 95%
t-interval of the mean (tables/summary_<metric>.csv), the Holm-adjusted rank-sum p-value and A12 of the
best set-up against each other one (tables/pairs_<metric>.csv), each set-up's convergence verdict
(convergence.csv), the papers' numbers where a set-up carries a ``reference`` (tables/reproduction.csv),
and the protocol the scores were measured under. Then the set-ups whose training had not converged, and
links to the figures. Nothing is computed here that the tables do not hold, so the page cannot disagree
with them.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from ganstudy.atomic import write_text
from ganstudy.evaluate.metrics import better
from ganstudy.stats.convergence import convergence_notes
from ganstudy.stats.protocol import protocol_notes
from ganstudy.stats.summary import _fmt, markdown_table

# The level the page calls a difference significant at; the tables give every p-value.
ALPHA = 0.05


def _pair(pairs: pd.DataFrame, a: str, b: str) -> pd.Series | None:
    found = pairs[((pairs.setup_a == a) & (pairs.setup_b == b)) | ((pairs.setup_a == b) & (pairs.setup_b == a))]
    return found.iloc[0] if len(found) else None


def ranking(summary: pd.DataFrame, pairs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The set-ups best first (no finite mean: last), with the best one's Holm-adjusted p-value against
    each (p_holm), the probability that a trial of the best scores better than one of it (a12_best: the
    pairs' A12 turned towards the best and the metric's direction) and the effect's magnitude."""
    higher = better(metric) == "higher"
    ordered = summary.assign(key=summary["mean"] * (-1 if higher else 1)).sort_values("key", kind="stable", na_position="last")
    ordered = ordered.drop(columns="key").reset_index(drop=True)
    best = ordered.setup.iloc[0] if len(ordered) and np.isfinite(ordered["mean"].iloc[0]) else None
    tests = []
    for setup in ordered.setup:
        pair = _pair(pairs, best, setup) if best is not None and setup != best else None
        if pair is None:
            tests.append({"p_holm": np.nan, "a12_best": np.nan, "effect": "–"})
            continue
        # pairs' A12 is of setup_a's values over setup_b's: a value greater is a score better where higher is better.
        greater = pair.a12 if pair.setup_a == best else 1 - pair.a12
        tests.append({"p_holm": pair.p_holm, "a12_best": greater if higher else 1 - greater, "effect": pair.effect})
    return pd.concat([ordered, pd.DataFrame(tests, columns=["p_holm", "a12_best", "effect"])], axis=1)


def ranking_table(ranked: pd.DataFrame, converged: dict[str, str], digits: int) -> pd.DataFrame:
    """The ranking as the page shows it."""
    rows = []
    for place, row in enumerate(ranked.itertuples(), start=1):
        finite = np.isfinite(row.mean)
        rows.append({"rank": place if finite else "–", "set-up": row.setup, "trials": row.trials, "mean": row.mean, "sd": row.sd,
                     "95% interval": f"{_fmt(row.ci_low, digits)} to {_fmt(row.ci_high, digits)}" if np.isfinite(row.ci_low) else "–",
                     "p vs best (Holm)": row.p_holm,
                     "A12 vs best": f"{row.a12_best:.2f} ({row.effect})" if np.isfinite(row.a12_best) else "–",
                     "converged": converged.get(row.setup, "–")})
    return pd.DataFrame(rows)


def verdict(ranked: pd.DataFrame, metric: str, digits: int) -> str:
    """The ranking in words: the best set-up and, for each other one, whether the data show it worse."""
    if ranked.empty or not np.isfinite(ranked["mean"].iloc[0]):
        return f"No set-up has a finite {metric.upper()} yet."
    lines = [f"**{ranked.setup.iloc[0]}** has the best mean {metric.upper()}."]
    for row in ranked.iloc[1:].itertuples():
        effect = f"A12 = {row.a12_best:.2f}, {row.effect}"
        if not np.isfinite(row.p_holm):
            lines.append(f"- {row.setup}: no test (too few finite scores).")
        elif row.p_holm < ALPHA:
            lines.append(f"- {row.setup}: worse, significantly (Holm p = {_fmt(row.p_holm, digits)} < {ALPHA}; {effect}).")
        else:
            lines.append(f"- {row.setup}: not significantly different (Holm p = {_fmt(row.p_holm, digits)} ≥ {ALPHA}; {effect}).")
    return "\n".join(lines)


def _papers(reproduction: pd.DataFrame | None, metric: str, digits: int) -> str:
    if reproduction is None:
        return ""
    rows = reproduction[reproduction.metric == metric]
    if rows.empty:
        return ""
    shown = rows[["setup", "source", "paper_mean", "paper_sd", "ours_mean", "ours_sd", "p_welch", "note"]]
    return f"The papers' numbers beside ours (tables/reproduction.md):\n\n{markdown_table(shown, False, digits)}\n"


def summary_page(study_dir: str | os.PathLike[str], study: str, setups: list[str], metrics: list[str], figures: list[str],
                 digits: int = 4) -> str:
    """The page's Markdown; ``figures`` are paths under ``study_dir`` to link."""
    folder = Path(study_dir)
    tables = folder / "tables"
    scores = pd.read_csv(folder / "scores.csv")
    convergence = pd.read_csv(folder / "convergence.csv")
    converged = dict(zip(convergence.setup, convergence.converged))
    reproduction = pd.read_csv(tables / "reproduction.csv") if (tables / "reproduction.csv").is_file() else None
    trials = scores.groupby("setup").trial.nunique()
    parts = [f"# {study}: the answer\n",
             f"{len(setups)} set-ups ({', '.join(setups)}); trials per set-up: "
             f"{', '.join(f'{s} {int(trials.get(s, 0))}' for s in setups)}. Made from the tables in tables/ and "
             f"convergence.csv; p-values are two-sided tie-corrected rank-sum tests, Holm-adjusted over each metric's "
             f"pairs; A12 is the probability that a trial of the best set-up scores better than one of the other.\n"]
    for metric in metrics:
        ranked = ranking(pd.read_csv(tables / f"summary_{metric}.csv"), pd.read_csv(tables / f"pairs_{metric}.csv"), metric)
        footnote = protocol_notes(scores, metric, setups)[0]
        parts += [f"## {metric.upper()} ({better(metric)} is better)\n", verdict(ranked, metric, digits) + "\n",
                  markdown_table(ranking_table(ranked, converged, digits), False, digits), *(f"{line}\n" for line in footnote),
                  _papers(reproduction, metric, digits)]
    notes = convergence_notes(convergence)
    parts.append("## Convergence\n")
    parts.append("\n".join(f"- {setup}: {note}" for setup, note in notes.items()) + "\n" if notes else
                 "Every set-up's in-training score had stopped improving by the study's criterion (convergence.csv).\n")
    parts.append("## Figures\n")
    parts.append("".join(f"- [{Path(figure).stem.replace('_', ' ')}]({Path(figure).relative_to(folder)})\n" for figure in figures))
    return "\n".join(part for part in parts if part)


def write_summary(study_dir: str | os.PathLike[str], study: str, setups: list[str], metrics: list[str], figures: list[str],
                  out: str | os.PathLike[str], digits: int = 4) -> str:
    text = summary_page(study_dir, study, setups, metrics, figures, digits)
    write_text(out, text)
    return text


def headline(path: str | os.PathLike[str]) -> str | None:
    """What the end of a run prints: the page's path and its lines up to its first table; None without a page."""
    path = Path(path)
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    top = lines[: next((i for i, line in enumerate(lines) if line.startswith("|")), len(lines))]
    return f"The study's answer: {path}\n\n" + "\n".join(top).rstrip()
