"""Group-sequential rank tests: a study that adds rounds of trials until its comparisons are decided.

A schedule ``{first, step, most}`` looks at n_1 = first, n_2 = first + step, ... trials per set-up, the last
look at ``most``; the trials between two looks are a round. At each look every comparison not yet decided is
tested on the trials of every look so far. Alpha is spent over the looks by Lan and DeMets'
O'Brien-Fleming-like function f(t) = 2 - 2 Phi(z_{1 - a/2} / sqrt(t)), t = n_k / most: almost nothing at the
first looks, nearly all at the last, so that a study that runs to ``most`` loses little against the fixed
design of ``most`` trials.

The boundaries come from the scores at hand (a permutation group-sequential test). Under the null a round's
trials of the two set-ups are exchangeable, whatever their scores' law, ties and failed trials included:
given each round's pooled outcomes, every way of giving the round's trials their set-up labels (each set-up
keeping its number of trials in the round) is equally likely. The statistic at look k is that of the
study's two-sided Mann-Whitney test on the first n_k trials, the distance of the first set-up's midrank sum
from its null mean, whose nominal p (exact, exact with ties, or asymptotic) falls as it grows. Its joint law
at every look taken, over the relabellings within rounds, is counted where the schedule has at most
EXACT_SPLITS of them and drawn otherwise (RELABELLINGS, seeded from the study seed and the round, with the
observed labelling among them, which keeps the level exact). The boundary at look k is the smallest
distance that lets at most f(t_k) of the relabellings cross at or before look k; look k's boundary uses
rounds 1 .. k only, so a look computed again, or later, gives the same decisions at every earlier look.
Given the scores, a comparison crosses with probability at most alpha under the null, so ties and failures
cannot overspend (a design simulated once on continuous scores did: 0.055 with 20% failures).

Several comparisons share alpha as Holm's procedure does, made group-sequential by Maurer and Bretz's
graphical recycling ("Multiple testing in group sequential trials using graphical approaches", Statistics
in Biopharmaceutical Research, 2013): each open comparison is tested at alpha / (number open); a decided
comparison passes its share to the others, whose boundaries at every look are then those of the larger
level.

Each comparison reports the look it was decided at and a p-value valid for the design: the stagewise-ordered
p (the share of relabellings that cross at an earlier look, or reach this look with a statistic at least the
one observed), at the look it was decided or, never decided, at the last; it is at most the comparison's
level exactly when it crossed.
"""

from __future__ import annotations

import argparse
import multiprocessing
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations

import numpy as np
from scipy.stats import norm, rankdata

from ganstudy.stats.settings import ONCE_DECIDED, Stopping
from ganstudy.stats.tests import EXACT_SPLITS, rank_test
from ganstudy.study.trials import Schedule

# Drawn relabellings of a schedule whose relabellings are too many to count; with the observed one, 10,000.
RELABELLINGS = 9_999

Pair = tuple[str, str]


def counted(schedule: Schedule) -> bool:
    """Whether the relabellings within rounds of two set-ups' trials on ``schedule`` are counted (at most
    EXACT_SPLITS of them) rather than drawn."""
    return schedule.relabellings() <= EXACT_SPLITS


def obrien_fleming(fractions: np.ndarray, alpha: float) -> np.ndarray:
    """Lan-DeMets O'Brien-Fleming-like alpha spent by each information fraction: 2 - 2 Phi(z / sqrt(t))."""
    return 2 - 2 * norm.cdf(norm.ppf(1 - alpha / 2) / np.sqrt(fractions))


@lru_cache(maxsize=32)
def _every_labelling(size: int, firsts: int) -> np.ndarray:
    """Every way of labelling ``firsts`` of ``size`` trials as the first set-up's: one 0/1 row each."""
    chosen = np.array(list(combinations(range(size), firsts)), int).reshape(-1, firsts)
    labels = np.zeros((len(chosen), size))
    labels[np.arange(len(chosen))[:, None], chosen] = 1
    labels.flags.writeable = False
    return labels


@lru_cache(maxsize=32)
def _drawn_labellings(seed: tuple[int, ...], round_: int, size: int, firsts: int) -> np.ndarray:
    """RELABELLINGS random labellings of a round's trials, from the seed and the round alone: the same at
    every look that takes the round, and shared by the study's comparisons (Holm holds under any dependence)."""
    rng = np.random.default_rng([*seed, round_, size, firsts])
    base = np.tile(np.r_[np.ones(firsts), np.zeros(size - firsts)], (RELABELLINGS, 1))
    labels = rng.permuted(base, axis=1)
    labels.flags.writeable = False
    return labels


def _seed(seed: int | Sequence[int]) -> tuple[int, ...]:
    return (int(seed),) if np.ndim(seed) == 0 else tuple(int(s) for s in seed)


@dataclass
class RankLaw:
    """One comparison after the looks taken: its rank statistic at each look (``observed``) and the
    statistic of every relabelling within rounds (``distances``, one row each, the observed labelling among
    them), from which its boundaries, decisions and design p follow at any level."""

    distances: np.ndarray
    observed: np.ndarray
    fractions: np.ndarray
    # Each round's trials (pooled: the first set-up's, then the other's) and labellings (1: the first set-up's):
    # every one where they are counted, else the drawn ones, the observed labelling first.
    rounds: list[np.ndarray] = field(default_factory=list, repr=False)
    labels: list[np.ndarray] = field(default_factory=list, repr=False)
    counted: bool = True
    # The sign of the first set-up's midrank sum against its null mean at each look: +1 where its outcomes lie higher.
    signs: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    _bounds: dict[float, np.ndarray] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, a: np.ndarray, b: np.ndarray, schedule: Schedule, looks: int, seed: int | Sequence[int]) -> RankLaw:
        """The law of set-up a's trials against b's at the first ``looks`` looks. ``a`` and ``b`` hold each
        set-up's outcomes in trial order (as ``tests.outcomes`` gives them: a failed trial ranked worst is
        infinite, NaN is left out), at least up to the last of those looks."""
        edges = (0, *schedule.looks[:looks])
        rounds = []
        for lo, hi in zip(edges, edges[1:]):
            first, second = np.asarray(a[lo:hi], float), np.asarray(b[lo:hi], float)
            rounds.append((first[~np.isnan(first)], second[~np.isnan(second)]))
        values = np.concatenate([np.concatenate(pair) for pair in rounds])
        round_of = np.concatenate([np.full(len(x) + len(y), r) for r, (x, y) in enumerate(rounds)])
        is_first = np.concatenate([np.r_[np.ones(len(x), bool), np.zeros(len(y), bool)] for x, y in rounds])
        # Twice each trial's midrank among the trials of each look (0 before its round): sums of these are
        # integers, so equal statistics compare equal.
        ranks = np.zeros((len(values), looks))
        for k in range(looks):
            inside = round_of <= k
            if inside.any():
                ranks[inside, k] = 2 * rankdata(values[inside])
        firsts = np.cumsum([len(x) for x, _ in rounds])
        pooled = np.cumsum([len(x) + len(y) for x, y in rounds])
        centre = firsts * (pooled + 1)
        observed_sums = ranks[is_first].sum(axis=0)
        signed = observed_sums - centre
        observed = np.abs(signed)
        blocks = [ranks[round_of == r] for r in range(looks)]
        every = counted(schedule)
        if every:
            labels = [_every_labelling(len(x) + len(y), len(x)) for x, y in rounds]
            # Every relabelling: the sum over rounds of each round's every labelling, all combinations (in
            # integers: smaller and faster to partition than floats), the first round's slowest.
            sums = np.zeros((1, looks), np.int32)
            for labelling, block in zip(labels, blocks):
                part = (labelling @ block).astype(np.int32)
                sums = (sums[:, None, :] + part[None, :, :]).reshape(-1, looks)
        else:
            labels = [_drawn_labellings(_seed(seed), r, len(x) + len(y), len(x)) for r, (x, y) in enumerate(rounds)]
            drawn = sum(labelling @ block for labelling, block in zip(labels, blocks))
            sums = np.vstack([observed_sums, drawn])
        return cls(
            np.abs(sums - centre.astype(np.int32)).astype(np.int32),
            observed,
            schedule.fractions()[:looks],
            [np.concatenate(pair) for pair in rounds],
            labels,
            every,
            np.sign(signed),
        )

    def first(self, looks: int) -> RankLaw:
        """The law at the first ``looks`` of its looks: the same boundaries, decisions and design p there as a
        law built at that look (later rounds do not move an earlier look's boundary)."""
        return RankLaw(
            self.distances[:, :looks],
            self.observed[:looks],
            self.fractions[:looks],
            self.rounds,
            self.labels,
            self.counted,
            self.signs[:looks],
        )

    @property
    def looks(self) -> int:
        return len(self.fractions)

    def boundaries(self, level: float) -> np.ndarray:
        """Each look's boundary at ``level``: a comparison crosses at look k when its statistic exceeds the
        k-th value. It is the smallest value that lets at most O'Brien-Fleming's spent share of the
        relabellings cross at or before look k (those that crossed earlier counted)."""
        if level not in self._bounds:
            spent = obrien_fleming(self.fractions, level)
            total = len(self.distances)
            crossed = np.zeros(total, bool)
            bounds = np.empty(self.looks)
            for k in range(self.looks):
                still = self.distances[~crossed, k]
                allowed = int(np.floor(spent[k] * total + 1e-9)) - int(crossed.sum())
                cut = len(still) - 1 - allowed
                bounds[k] = np.partition(still, cut)[cut] if cut >= 0 else -1.0
                crossed |= self.distances[:, k] > bounds[k]
            self._bounds[level] = bounds
        return self._bounds[level]

    def crossing(self, level: float) -> int | None:
        """The first look (0-based) at which the statistic crosses ``level``'s boundary; None where it does not."""
        crossed = self.observed > self.boundaries(level)
        return int(np.argmax(crossed)) if crossed.any() else None

    def boundary_p(self, level: float, at: int, test: str = "auto") -> float:
        """The nominal p (the study's ``test``) that parts crossing from not crossing at look ``at`` (0-based)
        at ``level``: halfway between the p of a relabelling on the boundary and that of the nearest beyond
        it, so that a comparison crosses there exactly where its nominal p is below it, and an interval at
        one minus it agrees with the decision. 1 where every relabelling crosses; half the boundary's p where
        none can."""
        column, bound = self.distances[:, at], self.boundaries(level)[at]
        on, beyond = np.flatnonzero(column == bound), np.flatnonzero(column > bound)
        if not len(on):
            return 1.0
        p_on = rank_test(*self._split(int(on[0]), at), test).p
        if not len(beyond):
            return p_on / 2
        nearest = int(beyond[np.argmin(column[beyond])])
        return (p_on + rank_test(*self._split(nearest, at), test).p) / 2

    def _split(self, row: int, at: int) -> tuple[np.ndarray, np.ndarray]:
        """The trials up to look ``at`` of relabelling ``row``: the first set-up's and the other's."""
        if self.counted:
            picks = np.unravel_index(row, [len(labelling) for labelling in self.labels])
            chosen = [labelling[pick] for labelling, pick in zip(self.labels, picks)]
        elif row == 0:
            # The observed labelling: the first set-up's trials first in each round.
            chosen = [np.sort(labelling[0])[::-1] for labelling in self.labels]
        else:
            chosen = [labelling[row - 1] for labelling in self.labels]
        pairs = list(zip(self.rounds[: at + 1], chosen))
        return (
            np.concatenate([pooled[pick == 1] for pooled, pick in pairs]),
            np.concatenate([pooled[pick == 0] for pooled, pick in pairs]),
        )

    def conditional_power(self, level: float) -> float:
        """The chance that the comparison crosses at the schedule's last look if the trend its trials show so
        far goes on (Lan and Wittes's B-value, "The B-value: a tool for monitoring data", Biometrics 1988):
        Phi((z / sqrt(t) - z_c) / sqrt(1 - t)), where z is the statistic at the last look taken over the root
        mean square of its relabellings' (ties and failures counted), t that look's information fraction and
        z_c the two-sided normal quantile of ``level``. 1 at the schedule's last look (nothing is left to
        predict)."""
        t = float(self.fractions[-1])
        if t >= 1:
            return 1.0
        spread = float(np.sqrt(np.mean(np.square(self.distances[:, -1], dtype=float))))
        z = float(self.observed[-1]) / spread if spread > 0 else 0.0
        return float(norm.cdf((z / np.sqrt(t) - norm.ppf(1 - level / 2)) / np.sqrt(1 - t)))

    def design_p(self, level: float, at: int) -> float:
        """The design's p of the comparison stopped (or ended) at look ``at`` (0-based): the share of
        relabellings that cross ``level``'s boundary at an earlier look, or reach this look with a statistic
        at least the observed one."""
        earlier = (self.distances[:, :at] > self.boundaries(level)[:at]).any(axis=1)
        return float(np.mean(earlier | (self.distances[:, at] >= self.observed[at])))


@dataclass(frozen=True)
class Decision:
    """One comparison after the looks taken: the look it was decided at (None: not decided), the level it
    was tested at when decided (or last), and the p valid for the design (NaN while it is open with looks
    to come)."""

    pair: Pair
    look: int | None
    level: float
    p_design: float


def decide(laws: Mapping[Pair, RankLaw], alpha: float) -> dict[Pair, tuple[int, float]]:
    """The group-sequential Holm procedure over each comparison's looks: every open comparison is tested at
    alpha / (open comparisons); one that crosses its boundary at a look taken is
    decided, and its share passes to the others, which are tested again at the larger level (its boundaries
    at every look taken), until none crosses. Returns each decided pair's first crossing look (0-based) and
    the level it was decided at."""
    decided: dict[Pair, tuple[int, float]] = {}
    while len(decided) < len(laws):
        open_pairs = [pair for pair in laws if pair not in decided]
        level = alpha / len(open_pairs)
        crossing = {pair: laws[pair].crossing(level) for pair in open_pairs}
        crossing = {pair: look for pair, look in crossing.items() if look is not None}
        if not crossing:
            break
        decided |= {pair: (look, level) for pair, look in crossing.items()}
    return decided


def sequential_holm(
    laws: Mapping[Pair, RankLaw], schedule: Schedule, alpha: float, frozen: Collection[Pair] = ()
) -> list[Decision]:
    """``decide`` over the looks taken, with each comparison's p valid for the design (``RankLaw.design_p``):
    at the look it was decided, or, open at its last look (the schedule's, or the last before one of its
    set-ups stopped: ``frozen``), there at the level it had; NaN while it is open with looks to come."""
    decided = decide(laws, alpha)
    still_open = max(1, len(laws) - len(decided))
    decisions = []
    for pair, law in laws.items():
        look, level = decided.get(pair, (None, alpha / still_open))
        ended = look is not None or law.looks == len(schedule.looks) or pair in frozen
        p = law.design_p(level, law.looks - 1 if look is None else look) if ended else float("nan")
        decisions.append(Decision(pair, look, level, p))
    return decisions


@dataclass(frozen=True)
class Stop:
    """A set-up that took no more rounds: the look (1-based) after which, and why."""

    look: int
    why: str


@dataclass(frozen=True)
class Looks:
    """A study's looks up to the last taken: each comparison's decision, the set-ups that stopped taking
    rounds before the study ended, each pair's looks (fewer than those taken where a set-up stopped), and
    whether another round follows."""

    decisions: list[Decision]
    stopped: dict[str, Stop]
    looks: dict[Pair, int]
    more: bool
    taken: int


def take_looks(
    setups: Sequence[str],
    law_at: Callable[[Pair, int], RankLaw],
    schedule: Schedule,
    taken: int,
    alpha: float,
    stopping: Stopping = ONCE_DECIDED,
    higher: bool = False,
) -> Looks:
    """The looks 1 .. ``taken`` of a study of ``setups`` (``law_at(pair, looks)``: the pair's law at its first
    ``looks`` looks). After each look a set-up stops taking rounds where none of its comparisons is live (open,
    with the other set-up still taking rounds, and, with ``stopping.futility``, likely enough to be decided):
    every one decided, or, with ``stopping.beaten``, once another set-up beats it significantly (the direction
    by ``higher``: whether larger outcomes are better); its open comparisons then end undecided at the look
    it stopped, which never raises their error. A futile comparison whose set-ups go on for others is still
    tested at their looks. A pair's comparison always takes both set-ups' trials of each of its looks. The
    study goes on while a comparison is live and the schedule has a look left; set-ups that end with it are
    not counted as stopped. A study that ended before ``taken`` is returned as it ended."""
    pairs = list(combinations(setups, 2))
    stopped: dict[str, Stop] = {}
    for k in range(1, taken + 1):
        looks = {pair: min([k, *(stopped[s].look for s in pair if s in stopped)]) for pair in pairs}
        laws = {pair: law_at(pair, looks[pair]) for pair in pairs}
        frozen = [pair for pair in pairs if looks[pair] < k]
        decisions = sequential_holm(laws, schedule, alpha, frozen)
        futile = {
            d.pair
            for d in decisions
            if stopping.futility and d.look is None and laws[d.pair].conditional_power(d.level) < stopping.futility
        }
        stops = _stops(decisions, laws, setups, stopped, k, stopping, futile, higher)
        gone = set(stopped) | set(stops)
        live = [d for d in decisions if _live(d, futile, gone)]
        more = bool(live) and k < len(schedule.looks)
        if more:
            stopped |= stops
            continue
        if k < len(schedule.looks) and any(d.look is None for d in decisions):
            # Ended early by its stops, with comparisons undecided: these end here, and the stops say why.
            stopped |= stops
            decisions = sequential_holm(laws, schedule, alpha, pairs)
        break
    return Looks(decisions, stopped, looks, more, k)


def _stops(
    decisions: list[Decision],
    laws: Mapping[Pair, RankLaw],
    setups: Sequence[str],
    stopped: Mapping[str, Stop],
    look: int,
    stopping: Stopping,
    futile: Collection[Pair],
    higher: bool,
) -> dict[str, Stop]:
    """The set-ups that stop after ``look``: beaten (with ``stopping.beaten``), then, until none changes, those
    with no live comparison left (``futile``: the open ones unlikely to be decided by the schedule's end)."""
    stops: dict[str, Stop] = {}
    if stopping.beaten:
        for d in decisions:
            if d.look is None or set(d.pair) & set(stopped):
                continue
            a_higher = laws[d.pair].signs[d.look] > 0
            winner, loser = d.pair if a_higher == higher else d.pair[::-1]
            if loser not in stops:
                stops[loser] = Stop(look, f"{winner} beat it significantly at look {d.look + 1}")
    changed = True
    while changed:
        changed = False
        for setup in setups:
            if setup in stopped or setup in stops:
                continue
            mine = [d for d in decisions if setup in d.pair]
            if any(_live(d, futile, set(stopped) | set(stops)) for d in mine):
                continue
            stops[setup] = Stop(look, _why_stopped(mine, futile, stopping.futility))
            changed = True
    return stops


def _live(decision: Decision, futile: Collection[Pair], gone: Collection[str]) -> bool:
    """Whether a comparison keeps its set-ups taking rounds: open, not futile, neither set-up gone."""
    return decision.look is None and decision.pair not in futile and not set(decision.pair) & set(gone)


def _why_stopped(mine: list[Decision], futile: Collection[Pair], futility: float) -> str:
    if all(d.look is not None for d in mine):
        return "every comparison decided"
    if any(d.pair in futile for d in mine):
        return (
            "its comparisons still open are unlikely to be decided by the schedule's most "
            f"(conditional power under the trend seen below {futility:g})"
        )
    return "no open comparison with a set-up still taking rounds"


def pair_laws(
    outcomes: Mapping[str, np.ndarray], schedule: Schedule, looks: int, seed: int | Sequence[int]
) -> dict[Pair, RankLaw]:
    """The law of every pair of set-ups (``outcomes``: each one's outcomes in trial order) at ``looks`` looks."""
    return {(a, b): RankLaw.of(outcomes[a], outcomes[b], schedule, looks, seed) for a, b in combinations(outcomes, 2)}


def _views(full: Mapping[Pair, RankLaw]) -> Callable[[Pair, int], RankLaw]:
    """Each pair's law at its first n looks from its law of every look (``RankLaw.first``), one view per pair
    and n, so that its boundaries are found once."""
    views: dict[tuple[Pair, int], RankLaw] = {}

    def law_at(pair: Pair, n: int) -> RankLaw:
        if (pair, n) not in views:
            views[pair, n] = full[pair].first(n)
        return views[pair, n]

    return law_at


def simulate(
    draws: list,
    schedule: Schedule,
    alpha: float,
    studies: int = 1000,
    seed: int = 0,
    stopping: Stopping = ONCE_DECIDED,
    higher: bool = False,
    alike: Collection[tuple[int, int]] = (),
) -> dict[str, float]:
    """Operating characteristics of a schedule by simulation, through the looks' own test (``take_looks``):
    ``draws`` gives each set-up's outcome sampler (rng, size) -> outcomes (inf: a failed trial ranked worst).
    Returns the share of studies that decide at least one comparison (under the null: the family-wise
    error), the share that decide every comparison, the mean trials per set-up used (a set-up stops once
    none of its comparisons is live, as ``stopping`` says) and those had every set-up
    taken every round until the study ended; with ``alike`` (pairs of set-up indices drawn alike), the share
    of studies that decide one of them (the family-wise error), the mean share of the other comparisons
    decided (power) and of those of the first set-up. Each study draws its relabellings from its own seed."""
    rng = np.random.default_rng(seed)
    scores = [np.reshape(draw(rng, studies * schedule.most), (studies, schedule.most)) for draw in draws]
    names = [str(i) for i in range(len(draws))]
    nulls = {(str(a), str(b)) for a, b in alike}
    tallies: dict[str, list[float]] = {key: [] for key in ("any", "all", "used", "rounds", "error", "power", "first")}
    for study in range(studies):
        outcomes = {name: setup[study] for name, setup in zip(names, scores)}
        # Every look's law from one law of all looks: the same as a law of the first k (rounds after k do not
        # move look k's boundaries), computed once.
        law_at = _views(pair_laws(outcomes, schedule, len(schedule.looks), (seed, study)))
        looks = take_looks(names, law_at, schedule, len(schedule.looks), alpha, stopping, higher)
        ended = [looks.stopped[name].look if name in looks.stopped else looks.taken for name in names]
        decided = {d.pair: d.look is not None for d in looks.decisions}
        tallies["any"].append(any(decided.values()))
        tallies["all"].append(all(decided.values()))
        tallies["used"].append(np.mean([schedule.looks[look - 1] for look in ended]))
        tallies["rounds"].append(schedule.looks[looks.taken - 1])
        tallies["error"].append(any(decided[pair] for pair in nulls))
        different = [decided[pair] for pair in decided if pair not in nulls]
        tallies["power"].append(np.mean(different) if different else np.nan)
        firsts = [decided[pair] for pair in decided if pair not in nulls and "0" in pair]
        tallies["first"].append(np.mean(firsts) if firsts else np.nan)
    result = {
        "decides_any": float(np.mean(tallies["any"])),
        "decides_all": float(np.mean(tallies["all"])),
        "mean_trials": float(np.mean(tallies["used"])),
        "every_round_trials": float(np.mean(tallies["rounds"])),
    }
    if nulls:
        result |= {key: float(np.mean(tallies[name])) for key, name in (("error", "error"), ("power", "power"))}
        result["power_first"] = float(np.mean(tallies["first"]))
    return result


# Simulated studies behind the probability that a schedule decides a comparison at the effect its trials show.
SCHEDULE_STUDIES = 400


def resampler(outcomes: np.ndarray) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Draws of a set-up's trials: its measured outcomes, with replacement."""
    return lambda rng, size: rng.choice(outcomes, size)


def schedule_power(
    x: np.ndarray, y: np.ndarray, schedule: Schedule, alpha: float, stopping: Stopping = ONCE_DECIDED
) -> float:
    """The probability that ``schedule`` decides a comparison at ``alpha`` (either way) when each set-up's trials
    are drawn from its measured outcomes: the share of SCHEDULE_STUDIES simulated studies, through the looks'
    own test and the study's ``stopping``, that do."""
    draws = [resampler(np.asarray(x)), resampler(np.asarray(y))]
    return simulate(draws, schedule, alpha, SCHEDULE_STUDIES, stopping=stopping)["decides_all"]


def _normal(shift: float = 0.0) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda rng, size: rng.normal(shift, 1.0, size)


def _lognormal(rng: np.random.Generator, size: int) -> np.ndarray:
    return rng.lognormal(0.0, 1.0, size)


def _tied(rng: np.random.Generator, size: int) -> np.ndarray:
    return rng.integers(0, 5, size).astype(float)


def _failing(share: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Normal scores of which ``share`` failed (inf: ranked worst, the workflow's default)."""
    return lambda rng, size: np.where(rng.random(size) < share, np.inf, rng.normal(0.0, 1.0, size))


# The null cases: set-ups alike, continuous, tied and failing scores.
NULL_CASES: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "normal": _normal(),
    "lognormal": _lognormal,
    "tied integers 0-4": _tied,
    "20% failures (worst)": _failing(0.2),
    "40% failures (worst)": _failing(0.4),
}
SHIFTS = (0.5, 1.0, 1.5)


def _interval(share: float, studies: int) -> str:
    """A simulated share's 95% interval (Wilson's)."""
    z = norm.ppf(0.975)
    centre = (share + z**2 / (2 * studies)) / (1 + z**2 / studies)
    half = z * np.sqrt(share * (1 - share) / studies + z**2 / (4 * studies**2)) / (1 + z**2 / studies)
    return f"[{centre - half:.4f}, {centre + half:.4f}]"


@dataclass(frozen=True)
class Row:
    """One simulated row of the page: a case, a design, its set-ups' draws (names: NULL_CASES or "shift X"),
    the stopping rule and the set-ups drawn alike."""

    case: str
    design: str
    schedule: Schedule
    draws: tuple[str, ...]
    stopping: Stopping = ONCE_DECIDED
    alike: tuple[tuple[int, int], ...] = ()


def _draw(name: str) -> Callable[[np.random.Generator, int], np.ndarray]:
    return _normal(float(name.removeprefix("shift "))) if name.startswith("shift ") else NULL_CASES[name]


def operating_rows(schedule: Schedule) -> list[Row]:
    """The schedule on null studies (2 and 3 set-ups alike, each of NULL_CASES: the family-wise error) and,
    against the fixed design of its most trials, on two set-ups shifted by SHIFTS sd (power, mean trials)."""
    fixed = schedule.fixed()
    rows = [
        Row(f"null, {setups} set-ups, {name}", "sequential", schedule, (name,) * setups)
        for setups in (2, 3)
        for name in NULL_CASES
    ]
    return rows + [
        Row(f"{shift} sd apart", design_name, design, (f"shift {shift}", "normal"))
        for shift in SHIFTS
        for design_name, design in (("sequential", schedule), ("fixed", fixed))
    ]


# A sweep of 9 set-ups (lower is better), in pairs alike: the best two, one 0.5 sd behind, and six clearly worse.
SWEEP = (0.0, 0.0, 0.5, 1.5, 1.5, 2.0, 2.0, 3.0, 3.0)


# The stopping rules simulated on the sweep: statistics.stop_beaten, and statistics.futility at 0.1.
SWEEP_FUTILITY = 0.1
SWEEP_RULES = (
    ("stops once decided", ONCE_DECIDED),
    ("also stops once beaten", Stopping(beaten=True)),
    ("also stops once futile", Stopping(futility=SWEEP_FUTILITY)),
    ("also stops once beaten or futile", Stopping(beaten=True, futility=SWEEP_FUTILITY)),
)


def sweep_rows(schedule: Schedule) -> list[Row]:
    """The sweep under each of SWEEP_RULES."""
    alike = tuple((a, b) for a, b in combinations(range(len(SWEEP)), 2) if SWEEP[a] == SWEEP[b])
    draws = tuple(f"shift {shift}" for shift in SWEEP)
    return [Row("sweep of 9", rule, schedule, draws, stopping, alike) for rule, stopping in SWEEP_RULES]


def _simulated(row: Row, alpha: float, studies: int) -> dict[str, float]:
    draws = [_draw(name) for name in row.draws]
    return simulate(draws, row.schedule, alpha, studies, 0, row.stopping, alike=row.alike)


PAGE = """# Sequential designs: error, power and trials, simulated

Made by `python -m ganstudy.stats.sequential --studies {studies} --sweep-studies {sweep_studies} --workers 2
--out docs/sequential-design.md` (seeded: the same tables on any machine; the method is in
[the guide](guide.md#statistics)). Each study is run through the looks' own test, the one the workflow runs
(`ganstudy.stats.sequential.take_looks`: boundaries from the relabellings of the study's own scores within
rounds, O'Brien-Fleming spending of alpha {alpha}, group-sequential Holm), with its ties and failed trials
(ranked worst, the default of `statistics.failures`). decides_any under the null is the family-wise error over
all looks and comparisons (with its 95% interval); decides_all, the power to decide every comparison;
mean_trials, the trials per set-up a study took (a set-up stops once none of its comparisons is open with a
set-up still taking rounds). {studies} simulated studies per row.
"""

SECTION = """
## Schedule {looks}

Looks at {looks} trials per set-up against the fixed design of {most} ({method}).

"""

SWEEP_SECTION = """
## A sweep: set-ups that stop when their questions are answered

Nine set-ups on schedule {looks} (lower is better, normal scores of sd 1, shifted by {shifts}: pairs drawn
alike, the best two, one 0.5 sd behind and six clearly worse), {studies} simulated studies per row. error: the
share of studies that decide a comparison of two set-ups drawn alike (the family-wise error, with its 95%
interval); power: the mean share of the other comparisons decided; power (best): of those of the first
set-up; mean_trials: per set-up. "every set-up every round" trains every set-up until the study ends, with the
same decisions as "stops once decided" (a set-up whose comparisons are all decided changes none by stopping).
"beaten": `statistics.stop_beaten: true`; "futile": `statistics.futility: {futility:g}` (a set-up also stops once
each of its open comparisons has a conditional power under the trend its trials show below {futility:g}).

"""


def _section(schedule: Schedule, rows: list[Row], results: list[dict[str, float]], studies: int) -> str:
    method = (
        "every relabelling counted"
        if counted(schedule)
        else f"{RELABELLINGS + 1:,} relabellings a comparison, the observed one among them"
    )
    lines = [
        "| case | design | decides_any | 95% interval | decides_all | mean_trials |",
        "|---|---|---:|---|---:|---:|",
    ]
    lines += [
        f"| {row.case} | {row.design} | {r['decides_any']:.4f} | {_interval(r['decides_any'], studies)} | "
        f"{r['decides_all']:.4f} | {r['mean_trials']:.2f} |"
        for row, r in zip(rows, results)
    ]
    looks = ", ".join(map(str, schedule.looks))
    return SECTION.format(looks=looks, most=schedule.most, method=method) + "\n".join(lines) + "\n"


def _sweep_section(schedule: Schedule, rows: list[Row], results: list[dict[str, float]], studies: int) -> str:
    every = results[0] | {"mean_trials": results[0]["every_round_trials"]}
    lines = [
        "| set-ups | error | 95% interval | power | power (best) | mean_trials | trials saved |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for name, r in (("every set-up every round", every), *((row.design, r) for row, r in zip(rows, results))):
        saved = 1 - r["mean_trials"] / every["mean_trials"]
        lines.append(
            f"| {name} | {r['error']:.4f} | {_interval(r['error'], studies)} | {r['power']:.3f} | "
            f"{r['power_first']:.3f} | {r['mean_trials']:.2f} | {saved:.0%} |"
        )
    looks = ", ".join(map(str, schedule.looks))
    shifts = ", ".join(f"{shift:g}" for shift in SWEEP)
    section = SWEEP_SECTION.format(looks=looks, shifts=shifts, studies=studies, futility=SWEEP_FUTILITY)
    return section + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--schedules", nargs="+", default=["8,2,10", "8,4,24"], help="FIRST,STEP,MOST each (8,2,10 8,4,24)"
    )
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--studies", type=int, default=20_000, help="simulated studies per row (20,000)")
    parser.add_argument("--sweep-studies", type=int, default=1000, help="simulated sweeps per row (1,000)")
    parser.add_argument("--workers", type=int, default=1, help="processes that simulate rows side by side")
    parser.add_argument("--out", help="write the page here (docs/sequential-design.md) instead of printing the tables")
    args = parser.parse_args(argv)
    schedules = [Schedule.parse(text) for text in args.schedules]
    tables = [(operating_rows(schedule), args.studies) for schedule in schedules]
    tables.append((sweep_rows(schedules[-1]), args.sweep_studies))
    jobs = [(row, args.alpha, studies) for rows, studies in tables for row in rows]
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        results = iter(pool.starmap(_simulated, jobs, chunksize=1))
    sections = [
        _section(schedule, rows, [next(results) for _ in rows], studies)
        for schedule, (rows, studies) in zip(schedules, tables)
    ]
    sweep, studies = tables[-1]
    sections.append(_sweep_section(schedules[-1], sweep, [next(results) for _ in sweep], studies))
    page = PAGE.format(studies=args.studies, sweep_studies=args.sweep_studies, alpha=args.alpha) + "".join(sections)
    if args.out is None:
        print(page, end="")
        return
    with open(args.out, "w") as handle:
        handle.write(page)


if __name__ == "__main__":
    main()
