"""reproduction: the papers' published numbers beside ours (set-ups' ``reference`` in the study config).

Two blocks. Per set-up and metric: the paper's mean ± sd (n), ours, the difference, and, only where the
reference says our score is measured as the paper's was (``comparable``), Welch's two-sided t-test from
the summary statistics, which is all a paper publishes. Per pair of set-ups that both carry a reference
for a metric: which of the two is better in the paper (with Welch's p from its summary statistics) and in
ours (by the rank test's effect, A12 of the outcomes with failed trials as ``statistics.failures`` says, and
its Mann-Whitney p by ``statistics.test``, exact or asymptotic as in the pairs tables: never by the means, which
one collapsed trial turns against the test beside them), and whether the directions agree. The
second block is the comparison that survives a change of scale, e.g. our classifier FID on 8x8 digits
against the thesis's FID on MNIST. A third, where a paper states a finding instead of a number (``versus``
and ``finding``: Lipi-Ring's "no significant difference in quality, less compute than the torus"): the
paper's finding for the pair, ours from the rank test of the same pair (the metric's outcomes, or each
trial's cost) at ``statistics.alpha``, and what our trials could rule out (the Hodges-Lehmann shift's
interval), since "no significant difference" in ours is no evidence of equivalence.
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
from ganstudy.stats.reference_keys import COST
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.stats.summary import cost_column, latex_table, markdown_table, trial_hours, trials
from ganstudy.stats.tests import a12, rank_test, shift_interval, welch_pvalue

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
CLAIM_COLUMNS = [
    "setup",
    "versus",
    "quantity",
    "source",
    "paper_finding",
    "paper_change_low",
    "paper_change_high",
    "ours_median",
    "versus_median",
    "ours_change",
    "ours_shift",
    "ours_shift_low",
    "ours_shift_high",
    "ours_test",
    "ours_p",
    "ours_finding",
    "agree",
]
CLAIM_NOTE = (
    "agree = yes where our test's finding is the paper's. Where both say no significant difference, neither test "
    "rejected: that is no evidence that the two are alike; the shift's interval holds the differences our trials "
    "could not rule out."
)
# A finding's key in the config -> its words in the tables.
FINDINGS = {"lower": "lower", "higher": "higher", "no_difference": "no significant difference"}
# The reference key of a finding about each trial's cost rather than a metric.
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


def _numbers(references: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A set-up's references that give the paper's number (a mean), not only a finding."""
    return {key: ref for key, ref in references.items() if ref.get("mean") is not None}


def _trial_costs(scores: pd.DataFrame, setup: str, column: str) -> np.ndarray:
    """Each measured trial's cost of ``setup`` in ``column``'s unit (scores.csv has a row per trial and metric)."""
    costs = trial_hours(scores[scores.setup == setup].drop_duplicates("trial"), column).to_numpy(float)
    return costs[np.isfinite(costs)]


def _study_cost(scores: pd.DataFrame, setups: list[str]) -> tuple[str, str]:
    """The study's cost column and unit: stats.summary.cost_column over every set-up's mean GPU-hours per
    trial, as the summary's tables have them (GPU-hours where every set-up trained on GPUs)."""
    gpu_hours = [_trial_costs(scores, s, "gpu_hours") for s in setups]
    return cost_column(pd.DataFrame({"gpu_hours": [c.mean() if len(c) else np.nan for c in gpu_hours]}))


def _compared(
    scores: pd.DataFrame, quantity: str, setup: str, versus: str, cost: tuple[str, str], failures: str
) -> tuple[np.ndarray, np.ndarray, str]:
    """The two set-ups' values of a finding's quantity, as its rank test compares them, and their unit: a
    metric's outcomes (failed trials as ``failures`` says), or each trial's cost in the study's ``cost``
    column (_study_cost)."""
    if quantity != COST:
        return (*(trials(scores, quantity, s, failures).outcomes for s in (setup, versus)), quantity.upper())
    column, unit = cost
    return _trial_costs(scores, setup, column), _trial_costs(scores, versus, column), f"{unit} per trial"


def _our_finding(p: float, effect: float, alpha: float) -> str:
    """Our rank test's finding in the paper's words: its direction (A12 of the first set-up over the other,
    above 0.5 = higher values) where it rejects at ``alpha``."""
    if not np.isfinite(p):
        return "–"
    if p >= alpha:
        return FINDINGS["no_difference"]
    return FINDINGS["higher" if effect > 0.5 else "lower"]


def claim_table(
    scores: pd.DataFrame,
    references: dict[str, dict[str, Any]],
    setups: list[str],
    settings: StatisticsSettings = StatisticsSettings(),
) -> pd.DataFrame:
    """One row per finding a paper states (a reference's ``versus`` and ``finding``): the paper's finding and
    change, our medians and their relative change, the Hodges-Lehmann shift (this set-up minus versus) with the
    95% interval of the shifts our trials do not rule out, our rank test (unadjusted, at statistics.alpha) and
    its finding, and whether the two agree."""
    rows, cost = [], _study_cost(scores, setups)
    for setup in setups:
        for quantity, ref in references.get(setup, {}).items():
            if ref.get("finding") is None:
                continue
            x, y, unit = _compared(scores, quantity, setup, ref["versus"], cost, settings.failures)
            tested = rank_test(x, y, settings.test)
            shift, low, high = shift_interval(x, y)
            ours = _our_finding(tested.p, a12(x, y), settings.alpha)
            medians = [float(np.median(v)) if len(v) else np.nan for v in (x, y)]
            with np.errstate(divide="ignore", invalid="ignore"):
                change = medians[0] / medians[1] - 1 if np.isfinite(medians).all() and medians[1] else np.nan
            paper_change = ref.get("change") or [np.nan, np.nan]
            rows.append(
                {
                    "setup": setup,
                    "versus": ref["versus"],
                    "quantity": unit,
                    "source": ref["source"],
                    "paper_finding": FINDINGS[ref["finding"]],
                    "paper_change_low": paper_change[0],
                    "paper_change_high": paper_change[1],
                    "ours_median": medians[0],
                    "versus_median": medians[1],
                    "ours_change": change,
                    "ours_shift": shift,
                    "ours_shift_low": low,
                    "ours_shift_high": high,
                    "ours_test": tested.method,
                    "ours_p": tested.p,
                    "ours_finding": ours,
                    "agree": "–" if ours == "–" else ("yes" if ours == FINDINGS[ref["finding"]] else "no"),
                }
            )
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def reproduction_table(scores: pd.DataFrame, references: dict[str, dict[str, Any]], setups: list[str]) -> pd.DataFrame:
    """One row per set-up and referenced metric: the paper's numbers, ours, and Welch's test where comparable."""
    rows = []
    for setup in setups:
        for metric, ref in _numbers(references.get(setup, {})).items():
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
    numbers = {setup: _numbers(references.get(setup, {})) for setup in setups}
    metrics = list(dict.fromkeys(m for s in setups for m in numbers[s]))
    rows = []
    for metric in metrics:
        cited = [s for s in setups if metric in numbers[s]]
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
    """reproduction.{csv,md,tex} (the blocks in the Markdown and LaTeX, the papers' findings where a reference
    states one; the CSV holds the per-set-up block), reproduction_directions.csv and reproduction_claims.csv."""
    scores = pd.read_csv(scores_path)
    out, digits = Path(out_dir), settings.digits
    per_setup, pairs, claims = (
        reproduction_table(scores, references, setups),
        direction_table(scores, references, setups, settings),
        claim_table(scores, references, setups, settings),
    )
    titles = (
        "The papers' results beside ours (difference = ours - paper; Welch's two-sided t-test where comparable)",
        "Direction between set-ups in the paper (by its means; Welch p from its summary statistics) and in ours (by "
        "A12, the rank test's direction; Mann-Whitney p, its method in ours_test)",
        "The papers' findings beside ours (this set-up against versus; changes are relative, of medians in ours; the "
        f"shift is this set-up minus versus, with its 95% interval; Mann-Whitney p unadjusted, at {settings.alpha})",
    )
    markdown, latex = out / "reproduction.md", out / "reproduction.tex"
    csvs = {
        out / f"reproduction{name}.csv": frame
        for name, frame in (("", per_setup), ("_directions", pairs), ("_claims", claims))
    }
    for path, frame in csvs.items():
        with atomic_path(path) as tmp:
            frame.to_csv(tmp, index=False)
    # Ours are measured as the footnote says; a paper's protocol is what its text says (the reference's ``comparable``).
    metrics = list(dict.fromkeys(per_setup.metric))
    ours = [f"{metric} (ours): {line}" for metric in metrics for line in protocol_notes(scores, metric, setups)[0]]
    notes = (ours, [], [CLAIM_NOTE])
    # A study whose papers give only findings (no numbers), or no finding, has no rows for some blocks.
    blocks = [
        (title, frame, note) for title, frame, note in zip(titles, (per_setup, pairs, claims), notes) if len(frame)
    ]
    write_text(
        markdown,
        "".join(
            f"### {title}\n\n{markdown_table(frame, False, digits)}" + "".join(f"\n{line}\n" for line in note) + "\n"
            for title, frame, note in blocks
        ),
    )
    write_text(latex, "\n".join(latex_table(frame, title, False, digits, note) for title, frame, note in blocks))
    per_setup_csv, *others = csvs
    return [per_setup_csv, markdown, latex, *others]
