"""calibration: how often the convergence check flags a plateau or passes a curve still falling, by
simulation of the curves it judges.

A simulated set-up is ``trials`` curves of ``4 * points`` scores (a window of ``points`` at the default
quarter), each its own level times multiplicative noise (log-normal, sd ``noise``; optionally AR(1) with
lag-1 correlation 0.5, or with 2% of the scores tripled, as a collapsed batch scores):

- plateau: an exponential fall from 10 times the level, finished long before the window (the window sees
  none of it);
- falling: still falling log-linearly by ``fall`` (10% or more) over the window, and before it.

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
OUTLIER_SHARE = 0.02
AR_CORRELATION = 0.5


@dataclass(frozen=True)
class Scenario:
    kind: str  # "plateau" or "falling"
    noise: float  # sd of the log score
    points: int  # scores in the window
    trials: int
    fall: float = 0.0  # falling: the relative fall over the window
    noise_kind: str = "independent"  # or "ar1" or "outliers"


def _noise(scenario: Scenario, n: int, rng: np.random.Generator) -> np.ndarray:
    draws = rng.normal(0, scenario.noise, n)
    if scenario.noise_kind == "ar1":
        # Stationary AR(1) with the same marginal sd.
        innovations = draws * np.sqrt(1 - AR_CORRELATION**2)
        draws = np.empty(n)
        draws[0] = rng.normal(0, scenario.noise)
        for i in range(1, n):
            draws[i] = AR_CORRELATION * draws[i - 1] + innovations[i]
    if scenario.noise_kind == "outliers":
        draws[rng.random(n) < OUTLIER_SHARE] += np.log(3)
    return draws


def simulated_set_up(scenario: Scenario, rng: np.random.Generator) -> pd.DataFrame:
    """One set-up's curves: iterations 1..4*points x trials."""
    n = round(scenario.points / WINDOW)
    iterations = np.arange(1, n + 1, dtype=float)
    if scenario.kind == "plateau":
        clean = np.log1p(9 * np.exp(-iterations / (n / 20)))
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
            ("independent", "ar1", "outliers").index(scenario.noise_kind),
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
    """The table's scenarios: plateaus under each noise kind, and falls of 10% and 20%."""
    plateaus = [
        Scenario("plateau", noise, points, trials, noise_kind=kind)
        for kind in ("independent", "ar1", "outliers")
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
    return plateaus + falls


def calibration_table(repeats: int) -> pd.DataFrame:
    rows = []
    for scenario in scenarios():
        shares = verdict_shares(scenario, repeats)
        rows.append(
            {
                "curve": scenario.kind if scenario.kind == "plateau" else f"falling {scenario.fall:.0%}",
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
correlation {ar}, or independent with {outliers:.0%} of the scores tripled.

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
        handle.write(PAGE.format(repeats=args.repeats, ar=AR_CORRELATION, outliers=OUTLIER_SHARE) + table)


if __name__ == "__main__":
    main()
