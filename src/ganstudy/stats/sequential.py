"""Group-sequential rank tests: a study that adds rounds of trials until its comparisons are decided.

A schedule ``{first, step, most}`` looks at n_1 = first, n_2 = first + step, ... trials per set-up, the last
look at ``most``. At each look every comparison not yet decided is tested by the study's two-sided
Mann-Whitney test; it is decided when its nominal p is below the look's boundary. The boundaries
spend alpha over the looks by Lan and DeMets' O'Brien-Fleming-like function
f(t) = 2 - 2 Phi(z_{1 - a/2} / sqrt(t)), t = n_k / most: almost nothing at the first looks, nearly all of
alpha at the last, so that a study that runs to ``most`` loses little against the fixed design of ``most``
trials. Under the null, with continuous scores, the joint law of the rank statistics at every look does not
depend on the scores' distribution, so the boundaries are found once per design by simulating null
studies of uniform scores (NULL_STUDIES, seeded): at look k, the nominal p below which the crossings at or
before look k, in the simulated studies, stay within f(t_k) times the level.

Several comparisons share alpha as Holm's procedure does, made group-sequential by Maurer and Bretz's
graphical recycling ("Multiple testing in group sequential trials using graphical approaches", Statistics
in Biopharmaceutical Research, 2013): each open comparison is tested at alpha / (number open); a decided
comparison passes its share to the others, whose boundaries at every look are then those of the larger
level. This keeps the family-wise error at alpha over all looks and comparisons (simulated in
tests/test_sequential.py: 10,000 null studies).

Each comparison reports the look it was decided at and a p-value valid for the design: the stagewise-ordered
p (the null probability of crossing at an earlier look, plus that of reaching this look and a nominal p at
most the one observed), at the look it was decided or, never decided, at the last. Computed on the same
simulated null studies as the boundaries, it is at most the comparison's level exactly when it crossed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.stats import norm

from ganstudy.stats.tests import rowwise_test

# Null studies simulated per design to find its boundaries: a boundary's crossing probability is then
# known to about 0.0007 at 0.05.
NULL_STUDIES = 100_000


@dataclass(frozen=True)
class Schedule:
    """Trials per set-up at each look: ``first``, then ``step`` more at a time, up to ``most``."""

    first: int
    step: int
    most: int

    @property
    def looks(self) -> tuple[int, ...]:
        counts = list(range(self.first, self.most, self.step)) + [self.most]
        return tuple(counts)

    def fractions(self) -> np.ndarray:
        """The information fraction of each look: its trials over ``most``."""
        return np.array(self.looks, float) / self.most

    @classmethod
    def of(cls, trials: int | Mapping[str, int]) -> Schedule | None:
        """The config's ``trials`` as a schedule; None where it is a fixed number."""
        return None if isinstance(trials, int) else cls(trials["first"], trials["step"], trials["most"])


def most_trials(trials: int | Mapping[str, int]) -> int:
    """The trials per set-up a study's ``trials`` may run: the number, or the schedule's ``most``."""
    return trials if isinstance(trials, int) else trials["most"]


def obrien_fleming(fractions: np.ndarray, alpha: float) -> np.ndarray:
    """Lan-DeMets O'Brien-Fleming-like alpha spent by each information fraction: 2 - 2 Phi(z / sqrt(t))."""
    return 2 - 2 * norm.cdf(norm.ppf(1 - alpha / 2) / np.sqrt(fractions))


def nominal_pvalues(a: np.ndarray, b: np.ndarray, looks: tuple[int, ...], test: str) -> np.ndarray:
    """Each study's (row's) two-sided Mann-Whitney p at every look, on its first n_k trials of each set-up:
    the study's test (exact or asymptotic as ``test`` chooses for n_k against n_k)."""
    return np.stack([rowwise_test(a[:, :n], b[:, :n], test)[1] for n in looks], axis=1)


@lru_cache(maxsize=64)
def _null_pvalues(schedule: Schedule, test: str) -> np.ndarray:
    """NULL_STUDIES null studies' nominal p at every look (continuous scores: uniform, no ties)."""
    rng = np.random.default_rng([schedule.first, schedule.step, schedule.most])
    scores = rng.random((2, NULL_STUDIES, schedule.most))
    return nominal_pvalues(scores[0], scores[1], schedule.looks, test)


@lru_cache(maxsize=256)
def boundaries(schedule: Schedule, level: float, test: str = "auto") -> tuple[float, ...]:
    """Each look's boundary at ``level``: a comparison crosses at look k when its nominal p is below the k-th
    value. It is the smallest nominal p of the simulated null studies still open at look k whose inclusion
    would let the crossings at or before k exceed O'Brien-Fleming's spent share; so a p that no null study
    reaches (scores with ties) crosses exactly where its stagewise p is within the share."""
    null = _null_pvalues(schedule, test)
    spent = obrien_fleming(schedule.fractions(), level)
    crossed = np.zeros(len(null), bool)
    found = []
    for k in range(len(schedule.looks)):
        open_p = np.sort(null[~crossed, k])
        # Crossings allowed at this look: the spent share less those of the earlier looks.
        allowed = max(0, int(np.floor(spent[k] * len(null) + 1e-9)) - int(crossed.sum()))
        bound = float(open_p[allowed]) if allowed < len(open_p) else float("inf")
        found.append(bound)
        crossed |= null[:, k] < bound
    return tuple(found)


@dataclass(frozen=True)
class Decision:
    """One comparison after the looks taken: the look it was decided at (None: not decided), its nominal p
    at each look taken, the level it was tested at when decided, and the p valid for the design."""

    pair: tuple[str, str]
    look: int | None
    nominal: tuple[float, ...]
    level: float
    p_design: float


def stagewise_p(schedule: Schedule, look: int, nominal: float, level: float, test: str = "auto") -> float:
    """The design's p of a comparison stopped (or ended) at ``look`` (0-based) with nominal p ``nominal``:
    the share of null studies that cross a ``level`` boundary at an earlier look, or reach this look and
    have a nominal p at most ``nominal`` there."""
    null = _null_pvalues(schedule, test)
    bounds = boundaries(schedule, level, test)
    earlier = np.zeros(len(null), bool)
    for k in range(look):
        earlier |= null[:, k] < bounds[k]
    return float(np.mean(earlier | (null[:, look] <= nominal + 1e-12)))


def decide(
    nominal: dict[tuple[str, str], np.ndarray], schedule: Schedule, alpha: float, test: str = "auto"
) -> dict[tuple[str, str], tuple[int, float]]:
    """The group-sequential Holm procedure over the looks taken (each pair's nominal p per look, in order):
    every open comparison is tested at alpha / (open comparisons); one whose nominal p crosses its boundary
    at a look taken is decided, and its share passes to the others, which are tested again at the larger
    level (its boundaries at every look taken), until none crosses. Returns each decided pair's first
    crossing look (0-based) and the level it was decided at."""
    decided: dict[tuple[str, str], tuple[int, float]] = {}
    while len(decided) < len(nominal):
        open_pairs = [pair for pair in nominal if pair not in decided]
        level = alpha / len(open_pairs)
        bounds = boundaries(schedule, level, test)
        crossing = {pair: next((j for j, p in enumerate(nominal[pair]) if p < bounds[j]), None) for pair in open_pairs}
        crossing = {pair: look for pair, look in crossing.items() if look is not None}
        if not crossing:
            break
        decided |= {pair: (look, level) for pair, look in crossing.items()}
    return decided


def sequential_holm(
    nominal: dict[tuple[str, str], list[float]], schedule: Schedule, alpha: float, test: str = "auto"
) -> list[Decision]:
    """``decide`` over the looks taken, with each comparison's p valid for the design (``stagewise_p``): at
    the look it was decided, or, open at the last look, there at the level it had; NaN while it is open
    with looks to come (the study has not ended for it)."""
    decided = decide({pair: np.asarray(p, float) for pair, p in nominal.items()}, schedule, alpha, test)
    still_open = max(1, len(nominal) - len(decided))
    decisions = []
    for pair, values in nominal.items():
        look, level = decided.get(pair, (None, alpha / still_open))
        ended = look is not None or len(values) == len(schedule.looks)
        at = len(values) - 1 if look is None else look
        p = stagewise_p(schedule, at, values[at], level, test) if ended else float("nan")
        decisions.append(Decision(pair, look, tuple(values), level, p))
    return decisions


def more_needed(decisions: list[Decision], schedule: Schedule) -> bool:
    """Whether the study takes another round: a comparison is open and the schedule has a look left."""
    taken = max((len(d.nominal) for d in decisions), default=0)
    return taken < len(schedule.looks) and any(d.look is None for d in decisions)


def simulate(
    draws: list, schedule: Schedule, alpha: float, test: str = "auto", studies: int = 1000, seed: int = 0
) -> dict[str, float]:
    """Operating characteristics of a schedule by simulation: ``draws`` gives each set-up's score sampler
    (rng, size) -> scores; returns the share of studies that decide at least one comparison (under the null:
    the family-wise error), the share that decide every comparison, and the mean trials per set-up used (a
    study stops once every comparison is decided)."""
    rng = np.random.default_rng(seed)
    scores = [np.reshape(draw(rng, studies * schedule.most), (studies, schedule.most)) for draw in draws]
    pairs = list(combinations(range(len(draws)), 2))
    nominal = {pair: nominal_pvalues(scores[pair[0]], scores[pair[1]], schedule.looks, test) for pair in pairs}
    any_decided = all_decided = 0
    used = []
    for study in range(studies):
        for k in range(len(schedule.looks)):
            decided = decide({pair: nominal[pair][study, : k + 1] for pair in pairs}, schedule, alpha, test)
            if len(decided) == len(pairs):
                break
        used.append(schedule.looks[k])
        any_decided += bool(decided)
        all_decided += len(decided) == len(pairs)
    return {
        "decides_any": any_decided / studies,
        "decides_all": all_decided / studies,
        "mean_trials": float(np.mean(used)),
    }


def _uniform(rng: np.random.Generator, size: int) -> np.ndarray:
    return rng.random(size)


def _tied(rng: np.random.Generator, size: int) -> np.ndarray:
    return rng.integers(0, 5, size).astype(float)


def _normal(shift: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda rng, size: rng.normal(shift, 1.0, size)


def operating_table(schedule: Schedule, alpha: float, studies: int) -> pd.DataFrame:
    """The schedule against the fixed design of its most trials, on null studies (2 and 3 set-ups alike,
    continuous and tied scores: the family-wise error) and on two set-ups shifted by 0.5, 1 and 1.5 sd
    (power, mean trials)."""
    cases = {
        "null, 2 set-ups": [_uniform] * 2,
        "null, 3 set-ups": [_uniform] * 3,
        "null, 3 set-ups, tied scores": [_tied] * 3,
        **{f"{shift} sd apart": [_normal(shift), _normal(0.0)] for shift in (0.5, 1.0, 1.5)},
    }
    fixed = Schedule(schedule.most, 1, schedule.most)
    rows = []
    for name, draws in cases.items():
        for design_name, design in (("sequential", schedule), ("fixed", fixed)):
            rows.append({"case": name, "design": design_name, **simulate(draws, design, alpha, studies=studies)})
    return pd.DataFrame(rows)


PAGE = """# Sequential designs: error, power and trials, simulated

Made by `python -m ganstudy.stats.sequential --studies {studies} --out docs/sequential-design.md` (seeded:
the same table on any machine; the method is in [the guide](guide.md#statistics)). Schedule {looks} trials
per set-up against the fixed design of {most}, alpha {alpha}, two-sided Mann-Whitney (auto: exact where
countable), O'Brien-Fleming spending, group-sequential Holm. decides_any under the null is the family-wise
error over all looks and comparisons; decides_all, the power to decide every comparison; mean_trials, the
trials per set-up a study took (it stops once every comparison is decided). {studies} simulated studies
per row.

"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedule", default="8,4,24", help="FIRST,STEP,MOST (8,4,24)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--studies", type=int, default=10_000, help="simulated studies per row (10,000)")
    parser.add_argument("--out", help="write the page here (docs/sequential-design.md) instead of printing the table")
    args = parser.parse_args(argv)
    schedule = Schedule(*(int(part) for part in args.schedule.split(",")))
    table = operating_table(schedule, args.alpha, args.studies)
    lines = ["| case | design | decides_any | decides_all | mean_trials |", "|---|---|---:|---:|---:|"]
    lines += [
        f"| {r.case} | {r.design} | {r.decides_any:.4f} | {r.decides_all:.4f} | {r.mean_trials:.2f} |"
        for r in table.itertuples()
    ]
    text = "\n".join(lines) + "\n"
    if args.out is None:
        print(text, end="")
        return
    looks = ", ".join(map(str, schedule.looks))
    with open(args.out, "w") as handle:
        handle.write(PAGE.format(studies=args.studies, looks=looks, most=schedule.most, alpha=args.alpha) + text)


if __name__ == "__main__":
    main()
