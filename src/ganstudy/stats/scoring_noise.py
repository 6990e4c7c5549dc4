"""How much of the spread between a study's trials is its scoring's own noise, and what its comparisons say
on scores freed of most of it (``ganstudy scoring-noise``).

Each trial's generator is scored on its evaluate step's sample set (draw 0) and on fresh ones (draws 1, 2,
...). The scoring's sd is the within-trial sd pooled over the trials; the between-trial sd is that of the
trials' draw-0 scores, the study's own. Their squared ratio is the share of the between-trial variance that
the sample sets explain: near 1, a study learns about its scorer, not its GANs, and raising
evaluation.samples (scoring only, no training) narrows its comparisons where more trials would cost
training. The comparisons are made again on each trial's mean over its draws, the estimate of the
generator's expected score."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ganstudy.stats.power import TrialsNeeded
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.stats.summary import pairwise_table

COMPARISON_COLUMNS = [
    "metric",
    "setup_a",
    "setup_b",
    "p_holm",
    "a12",
    "better",
    "trials_for_power",
    "p_holm_means",
    "a12_means",
    "better_means",
    "trials_for_power_means",
]
# Share of the between-trial variance above which the summary says that samples, not trials, are the cheaper fix.
NOTABLE_SHARE = 0.25


def noise_table(draws: pd.DataFrame, metrics: list[str], setups: list[str]) -> pd.DataFrame:
    """Per metric and set-up: trials, draws per trial, the scoring's pooled sd, the sd between the trials'
    draw-0 scores, and the share of the between-trial variance that is scoring noise. ``draws`` has the
    columns setup, trial, draw, metric, value."""
    rows = []
    for metric in metrics:
        for setup in setups:
            part = draws[(draws.metric == metric) & (draws.setup == setup)]
            by_trial = [g.sort_values("draw").value.to_numpy(float) for _, g in part.groupby("trial")]
            by_trial = [v[np.isfinite(v)] for v in by_trial]
            within = [v for v in by_trial if len(v) >= 2]
            spread = np.array([v.var(ddof=1) for v in within])
            dof = np.array([len(v) - 1 for v in within])
            scoring_sd = float(np.sqrt((spread * dof).sum() / dof.sum())) if len(within) else np.nan
            first = part[part.draw == 0].value.to_numpy(float)
            first = first[np.isfinite(first)]
            trial_sd = float(first.std(ddof=1)) if len(first) >= 2 else np.nan
            share = scoring_sd**2 / trial_sd**2 if trial_sd > 0 else np.nan
            rows.append(
                {
                    "metric": metric,
                    "setup": setup,
                    "trials": len(by_trial),
                    "draws": int(part.groupby("trial").size().min()) if len(part) else 0,
                    "scoring_sd": scoring_sd,
                    "trial_sd": trial_sd,
                    "noise_share": share,
                }
            )
    return pd.DataFrame(rows, columns=["metric", "setup", "trials", "draws", "scoring_sd", "trial_sd", "noise_share"])


def _scores(draws: pd.DataFrame, means: bool) -> pd.DataFrame:
    """Per trial: its draw-0 score, or its mean over the draws; in the stats step's scores.csv columns."""
    finite = draws[np.isfinite(draws.value.to_numpy(float))]
    chosen = (
        finite.groupby(["metric", "setup", "trial"], as_index=False).value.mean()
        if means
        else finite[finite.draw == 0][["metric", "setup", "trial", "value"]]
    )
    return chosen.reset_index(drop=True)


def comparison_table(
    draws: pd.DataFrame, metrics: list[str], setups: list[str], settings: StatisticsSettings
) -> pd.DataFrame:
    """Every pair of set-ups per metric, by the study's test and Holm family (stats.summary.pairwise_table):
    on the trials' draw-0 scores and on their means over the draws, with A12, the better set-up and the
    trials per set-up for power 0.8 at each measured effect (stats.power)."""
    rows = []
    for metric in metrics:
        tables = [pairwise_table(_scores(draws, means), metric, setups, settings) for means in (False, True)]
        for own, mean in zip(*(t.itertuples() for t in tables)):
            rows.append(
                {
                    "metric": metric,
                    "setup_a": own.setup_a,
                    "setup_b": own.setup_b,
                    "p_holm": own.p_holm,
                    "a12": own.a12,
                    "better": own.better,
                    "trials_for_power": TrialsNeeded.of(own).text(),
                    "p_holm_means": mean.p_holm,
                    "a12_means": mean.a12,
                    "better_means": mean.better,
                    "trials_for_power_means": TrialsNeeded.of(mean).text(),
                }
            )
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def noise_lines(noise: pd.DataFrame, samples: int) -> list[str]:
    """A sentence for each set-up whose between-trial variance is mostly (NOTABLE_SHARE or more) scoring noise."""
    notable = noise[noise.noise_share >= NOTABLE_SHARE]
    return [
        f"{row.setup}, {row.metric}: the scoring's variance between sample sets of {samples} (sd {row.scoring_sd:.3g}) "
        f"is {row.noise_share:.2g} times the variance between its trials' scores (sd {row.trial_sd:.3g}): raise "
        "evaluation.samples (rescoring only, no training) before adding trials"
        for row in notable.itertuples()
    ]
