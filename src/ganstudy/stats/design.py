"""What a study's design can decide, before any job: the smallest Holm-adjusted p-value each comparison of
set-ups can reach with the configured trials (every trial of one set-up better than every trial of the
other), and the trials per set-up that a decision needs where none could be significant.

With few trials a rank test cannot reach a small p at all: 4 against 4 trials give 2 / C(8, 4) = 0.029 at
the least, and Holm over 3 set-ups' 3 pairs multiplies it to 0.086. A study so designed spends its
allocation on an answer that cannot be "significant", whatever the GANs do; the plan says so first.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ganstudy.stats.power import NOT_PLANNED, TrialsNeeded
from ganstudy.stats.sequential import obrien_fleming, resampler, simulate
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.stats.summary import cost_column, read_summary, read_tables, trials
from ganstudy.stats.tests import holm, smallest_p
from ganstudy.study.folder import StudyFolder
from ganstudy.study.trials import Schedule, StudyTrials

# The most trials per set-up the planner proposes; a design that needs more is named as such.
MOST_TRIALS = 200
# Simulated studies per design of a schedule's plan.
PLAN_STUDIES = 2000


def smallest_holm(trials: dict[str, int], test: str) -> dict[tuple[str, str], float]:
    """Every pair of set-ups: the smallest Holm p (over the study's pairs) that its trials can give."""
    pairs = list(combinations(trials, 2))
    adjusted = holm([smallest_p(trials[a], trials[b], test) for a, b in pairs])
    return dict(zip(pairs, (float(p) for p in adjusted)))


def trials_needed(setups: int, test: str, alpha: float) -> int | None:
    """The fewest trials per set-up with which a comparison of ``setups`` set-ups can reach Holm p < alpha."""
    pairs = setups * (setups - 1) // 2
    for n in range(2, MOST_TRIALS + 1):
        if holm([smallest_p(n, n, test)] * pairs)[0] < alpha:
            return n
    return None


def design_lines(trials: dict[str, int], test: str, alpha: float) -> tuple[list[str], list[str]]:
    """What the plan says of the design: lines of information (the smallest Holm p of each kind of pair), and
    warnings where a comparison can never be significant, naming the trials per set-up that would let it."""
    if len(trials) < 2:
        return [], []
    smallest = smallest_holm(trials, test)
    kinds: dict[tuple[int, int], list[float]] = {}
    for (a, b), p in smallest.items():
        kinds.setdefault(tuple(sorted((trials[a], trials[b]))), []).append(p)
    pairs = len(smallest)
    info = [
        f"design: {len(trials)} set-ups, {pairs} pair(s) per metric (Holm over them, statistics.test = {test}); "
        + "; ".join(
            f"{n1} against {n2} trials: smallest Holm p {min(ps):.3g}" for (n1, n2), ps in sorted(kinds.items())
        )
        + " (every trial of one set-up better than every one of the other)"
    ]
    blocked = [pair for pair, p in smallest.items() if p >= alpha]
    if not blocked:
        return info, []
    needed = trials_needed(len(trials), test, alpha)
    more = (
        f"{needed} trials per set-up would let a complete separation reach it"
        if needed
        else f"not even {MOST_TRIALS} trials per set-up would: compare fewer set-ups"
    )
    named = ", ".join(f"{a} vs {b}" for a, b in blocked[:6]) + (", ..." if len(blocked) > 6 else "")
    which = (
        "no comparison can" if len(blocked) == pairs else f"{len(blocked)} of the {pairs} comparisons ({named}) cannot"
    )
    return info, [
        f"{which} reach Holm p < {alpha} with these trials, whatever the scores: the smallest is "
        f"{min(smallest[pair] for pair in blocked):.3g}; {more} (trials, or setups.<name>.trials)."
    ]


def study_design(config: dict[str, Any]) -> tuple[list[str], list[str]]:
    """``design_lines`` of a validated study config: each set-up's trials (its own or the study's: a schedule's
    most, its last look)."""
    trials = StudyTrials.of(config)
    alpha = config["statistics"]["alpha"]
    info, warnings = design_lines(trials.per_setup, config["statistics"]["test"], alpha)
    if (schedule := trials.schedule) is not None:
        spent = ", ".join(f"{x:.3g}" for x in obrien_fleming(schedule.fractions(), alpha))
        info.append(
            f"trials on a schedule: looks at {', '.join(map(str, schedule.looks))} trials per set-up, alpha spent by "
            f"each look {spent} (O'Brien-Fleming); the smallest Holm p above is the last look's"
        )
    return info, warnings


def trials_plan(tables: Path, alpha: float) -> pd.DataFrame:
    """After a study: every comparison of every metric (its pairs_<metric>.csv in ``tables``), whether it was
    decided, and for one that was not, the trials per set-up for power 0.8 (the median and 80% range over the
    pilot's bootstrap copies: stats.power) and the core-hours (GPU-hours where every set-up trained on GPUs)
    the median would add at the study's trial times (summary_<metric>.csv)."""
    rows = []
    for path in sorted(tables.glob("pairs_*.csv")):
        metric = path.stem.removeprefix("pairs_")
        summary, pairs = read_tables(tables, metric)
        column, unit = cost_column(summary)
        hours = summary.set_index("setup")[column]
        for pair in pairs.itertuples():
            decided = "yes" if pair.p_holm < alpha else ("cannot" if pair.smallest_p_holm >= alpha else "no")
            plan = TrialsNeeded.of(pair) if decided != "yes" else NOT_PLANNED
            needed = plan.median
            more = (
                max(0, needed - pair.n_a) * hours[pair.setup_a] + max(0, needed - pair.n_b) * hours[pair.setup_b]
                if np.isfinite(needed)
                else np.nan
            )
            rows.append(
                {
                    "metric": metric,
                    "setup_a": pair.setup_a,
                    "setup_b": pair.setup_b,
                    "trials": f"{pair.n_a} vs {pair.n_b}",
                    "p_holm": pair.p_holm,
                    "decided": decided,
                    "trials_for_power": plan.text(),
                    "hours_more": more,
                    "unit": unit,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "metric",
            "setup_a",
            "setup_b",
            "trials",
            "p_holm",
            "decided",
            "trials_for_power",
            "hours_more",
            "unit",
        ],
    )


def schedule_plan(folder: Path, schedule: Schedule, metric: str, settings: StatisticsSettings) -> pd.DataFrame:
    """After a study: what a sequential ``schedule`` would have given on its primary ``metric``, against the
    fixed design of its most trials, by simulation from each set-up's measured outcomes (scores.csv, failed
    trials as ``settings.failures`` says): the share of studies that decide every comparison and at least one
    by the last look, the mean trials per set-up and the core-hours (GPU-hours where every set-up trained on
    GPUs) a study of all set-ups would take at the study's trial times (tables/summary_<metric>.csv)."""
    study = StudyFolder.at(folder)
    scores = pd.read_csv(study.scores_table())
    summary = read_summary(study.table(f"summary_{metric}")).set_index("setup")
    column, unit = cost_column(summary.reset_index())
    setups = list(summary.index)
    samplers = [resampler(trials(scores, metric, setup, settings.failures).outcomes) for setup in setups]
    per_trial = float(summary[column].sum())
    rows = []
    for name, design in (("sequential", schedule), ("fixed", schedule.fixed())):
        result = simulate(samplers, design, settings.alpha, studies=PLAN_STUDIES, stopping=settings.stopping())
        rows.append(
            {
                "design": name,
                "looks": ", ".join(str(n) for n in design.looks),
                "decides_all": result["decides_all"],
                "decides_any": result["decides_any"],
                "mean_trials": result["mean_trials"],
                "hours": result["mean_trials"] * per_trial,
                "unit": unit,
            }
        )
    return pd.DataFrame(rows)
