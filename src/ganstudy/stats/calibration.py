"""calibration: how often the convergence check flags a plateau or passes a curve still falling, by
simulation of the curves it judges.

A simulated set-up is ``trials`` curves of ``4 * points`` scores (a window of ``points`` at the default
quarter), each its own level times multiplicative noise (log-normal, sd ``noise``; optionally AR(1) with
lag-1 correlation 0.5 or 0.8, or with 2% of the scores tripled, as a collapsed batch scores):

- plateau: an exponential fall from 10 times the level, finished long before the window (the window sees
  none of it);
- falling: still falling log-linearly by ``fall`` (10% or more) over the window, and before it;
- rising: a plateau until the window, then rising log-linearly by ``rise`` over the window (training past
  its best): above the degradation tolerance (25%) a "yes" is a false pass, within it a flag is false.

``python -m ganstudy.stats.calibration [--repeats N] [--out docs/convergence-calibration.md]`` prints (or
writes as a page) the table that docs/guide.md quotes: per scenario, the share of each verdict at the
schema's tolerances (5% and 25%).
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ganstudy.stats.convergence import WINDOW, verdict, window_trend
from ganstudy.stats.settings import StatisticsSettings

VERDICTS = ("yes", "no", "degraded", "–")
NOISES = (0.1, 0.2, 0.3)
POINTS = (5, 10, 20, 40)
TRIALS = (1, 4, 10)
FALLS = (0.1, 0.2)
RISES = (0.1, 0.3, 0.5)
OUTLIER_SHARE = 0.02
# The noise kinds' lag-1 correlations (their order seeds the draws: a new kind goes last).
NOISE_KINDS = {"independent": 0.0, "ar1": 0.5, "outliers": 0.0, "ar1-0.8": 0.8}


@dataclass(frozen=True)
class Scenario:
    kind: str  # "plateau", "falling" or "rising"
    noise: float  # sd of the log score
    points: int  # scores in the window
    trials: int
    fall: float = 0.0  # falling: the relative fall over the window; rising: the relative rise
    noise_kind: str = "independent"  # a key of NOISE_KINDS

    @property
    def curve(self) -> str:
        """The table's name of the curve."""
        return self.kind if self.kind == "plateau" else f"{self.kind} {self.fall:.0%}"


def _noise(scenario: Scenario, n: int, rng: np.random.Generator) -> np.ndarray:
    draws = rng.normal(0, scenario.noise, n)
    correlation = NOISE_KINDS[scenario.noise_kind]
    if correlation:
        # Stationary AR(1) with the same marginal sd.
        innovations = draws * np.sqrt(1 - correlation**2)
        draws = np.empty(n)
        draws[0] = rng.normal(0, scenario.noise)
        for i in range(1, n):
            draws[i] = correlation * draws[i - 1] + innovations[i]
    if scenario.noise_kind == "outliers":
        draws[rng.random(n) < OUTLIER_SHARE] += np.log(3)
    return draws


def simulated_set_up(scenario: Scenario, rng: np.random.Generator) -> pd.DataFrame:
    """One set-up's curves: iterations 1..4*points x trials."""
    n = round(scenario.points / WINDOW)
    iterations = np.arange(1, n + 1, dtype=float)
    if scenario.kind == "plateau":
        clean = np.log1p(9 * np.exp(-iterations / (n / 20)))
    elif scenario.kind == "rising":
        start = iterations[-scenario.points]
        clean = np.log1p(scenario.fall) / (iterations[-1] - start) * np.maximum(iterations - start, 0.0)
    else:
        span = iterations[-1] - iterations[-scenario.points]
        clean = np.log1p(-scenario.fall) / span * iterations
    levels = rng.normal(0, 0.2, scenario.trials)
    curves = {trial: np.exp(levels[trial] + clean + _noise(scenario, n, rng)) for trial in range(scenario.trials)}
    return pd.DataFrame(curves, index=iterations.astype(int))


def verdict_shares(
    scenario: Scenario,
    repeats: int,
    seed: int = 0,
    settings: StatisticsSettings = StatisticsSettings(),
) -> dict[str, float]:
    """The share of each verdict over ``repeats`` simulated set-ups."""
    rng = np.random.default_rng(
        [
            seed,
            round(scenario.noise * 100),
            scenario.points,
            scenario.trials,
            round(scenario.fall * 100),
            scenario.kind == "plateau",
            list(NOISE_KINDS).index(scenario.noise_kind),
            *([1] if scenario.kind == "rising" else []),
        ]
    )
    counts = Counter(
        verdict(
            window_trend(simulated_set_up(scenario, rng)),
            settings.convergence_tolerance,
            settings.degradation_tolerance,
        )
        for _ in range(repeats)
    )
    return {name: counts[name] / repeats for name in VERDICTS}


def scenarios() -> list[Scenario]:
    """The table's scenarios: plateaus under each noise kind, falls of 10% and 20%, and rises of 10-50%."""
    plateaus = [
        Scenario("plateau", noise, points, trials, noise_kind=kind)
        for kind in NOISE_KINDS
        for noise in NOISES
        for points in POINTS
        for trials in TRIALS
    ]
    falls = [
        Scenario("falling", noise, points, trials, fall)
        for fall in FALLS
        for noise in NOISES
        for points in POINTS
        for trials in TRIALS
    ]
    rises = [
        Scenario("rising", noise, points, trials, rise)
        for rise in RISES
        for noise in NOISES[::2]
        for points in POINTS[1::2]
        for trials in TRIALS
    ]
    return plateaus + falls + rises


def calibration_table(repeats: int) -> pd.DataFrame:
    rows = []
    for scenario in scenarios():
        shares = verdict_shares(scenario, repeats)
        rows.append(
            {
                "curve": scenario.curve,
                "noise": f"{scenario.noise:.0%} {scenario.noise_kind}",
                "points": scenario.points,
                "trials": scenario.trials,
                **shares,
            }
        )
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame, repeats: int) -> str:
    lines = [
        "| curve | noise | window points | trials | yes | no | degraded | not judged |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for _, row in table.iterrows():
        shares = " | ".join(f"{row[name]:.1%}" for name in VERDICTS)
        lines.append(f"| {row.curve} | {row.noise} | {row.points} | {row.trials} | {shares} |")
    return "\n".join(lines) + f"\n\n{repeats} simulated set-ups per row.\n"


PAGE = """# The convergence check's verdicts on simulated curves

Made by `python -m ganstudy.stats.calibration --repeats {repeats} --out docs/convergence-calibration.md`
(seeded: the same table on any machine but for a borderline case; the method and the targets are in
[the guide](guide.md#convergence)). Each row: the share of each verdict over {repeats} simulated set-ups
at the schema's tolerances (5% and 25%). Noise: the sd of the log score, independent, AR(1) with lag-1
correlation 0.5 (ar1) or 0.8 (ar1-0.8), or independent with {outliers:.0%} of the scores tripled. A rising
curve is a plateau until the window and then rises by the share named over it: above the degradation
tolerance (25%) its "yes" is a false pass.

"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=400, help="simulated set-ups per scenario (400)")
    parser.add_argument(
        "--out", help="write the page here (docs/convergence-calibration.md) instead of printing the table"
    )
    args = parser.parse_args(argv)
    table = markdown(calibration_table(args.repeats), args.repeats)
    if args.out is None:
        print(table, end="")
        return
    with open(args.out, "w") as handle:
        handle.write(PAGE.format(repeats=args.repeats, outliers=OUTLIER_SHARE) + table)


if __name__ == "__main__":
    main()
