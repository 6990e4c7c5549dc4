"""Group-sequential rank tests with boundaries from the scores at hand (issue 95, item 1): the law of a
comparison holds the statistic of every relabelling of its trials within rounds (checked by relabelling the
trials one by one), its order is that of the workflow's own nominal p, a drawn law agrees with the counted
one, and given the scores no more than the spent share of relabellings crosses, ties and failures included
(an independent computation in p-space with the workflow's rank_test). A look computed later gives the same
decisions, Holm passes a decided comparison's share on, the design p agrees with the decision, null studies
(2,000 a case, through the same functions) keep the family-wise error at alpha, and against the fixed design
of the most trials the schedule keeps its power for fewer trials."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy import stats
from scipy.stats import norm

from ganstudy.stats.sequential import (
    NULL_CASES,
    RELABELLINGS,
    RankLaw,
    counted,
    decide,
    obrien_fleming,
    pair_laws,
    sequential_holm,
    simulate,
)
from ganstudy.stats.settings import Stopping
from ganstudy.stats.tests import rank_test
from ganstudy.study.trials import Schedule

DEFAULT = Schedule(8, 2, 10)
LONG = Schedule(8, 4, 24)


def relabelled(a: np.ndarray, b: np.ndarray, schedule: Schedule):
    """Every relabelling of a's and b's trials within the schedule's rounds, by hand: (a', b') pairs."""
    edges = (0, *schedule.looks)
    rounds = [np.r_[a[lo:hi], b[lo:hi]] for lo, hi in zip(edges, edges[1:])]
    choices = [list(combinations(range(len(r)), len(r) // 2)) for r in rounds]

    def walk(r: int, first: list, second: list):
        if r == len(rounds):
            yield np.array(first), np.array(second)
            return
        for chosen in choices[r]:
            rest = [i for i in range(len(rounds[r])) if i not in chosen]
            yield from walk(r + 1, first + list(rounds[r][list(chosen)]), second + list(rounds[r][rest]))

    yield from walk(0, [], [])


def test_the_schedule_looks_rounds_and_spends_as_lan_and_demets_say():
    assert LONG.looks == (8, 12, 16, 20, 24) and Schedule(8, 5, 20).looks == (8, 13, 18, 20)
    assert Schedule(8, 5, 20).rounds() == (8, 5, 5, 2)
    # C(16, 8) C(4, 2) = 77,220 relabellings are counted; 8/4/24's 10^11 are drawn.
    assert counted(DEFAULT) and not counted(LONG)
    spent = obrien_fleming(LONG.fractions(), 0.05)
    # By hand: 2 - 2 Phi(z_0.975 / sqrt(1/3)) at the first look; all of alpha at the last.
    assert spent[0] == pytest.approx(2 - 2 * norm.cdf(norm.ppf(0.975) * np.sqrt(3)))
    assert spent[-1] == pytest.approx(0.05)
    assert np.all(np.diff(spent) > 0)


def test_the_law_holds_every_relabelling_and_orders_them_as_the_workflows_test_does():
    # Ties and failed trials (inf: ranked worst) in both set-ups, looks at 3 and 5 trials.
    schedule = Schedule(3, 2, 5)
    a, b = np.array([1.0, np.inf, 2, 3, np.inf]), np.array([2.0, 2, np.inf, 0.5, 1])
    law = RankLaw.of(a, b, schedule, 2, seed=0)
    by_hand = [RankLaw.of(x, y, schedule, 2, seed=0).observed for x, y in relabelled(a, b, schedule)]
    assert len(by_hand) == 20 * 6 == len(law.distances)
    assert sorted(map(tuple, by_hand)) == sorted(map(tuple, law.distances.astype(float)))
    # A larger statistic is a nominal p of the workflow's test at most as large, at each look.
    for k, n in enumerate(schedule.looks):
        pairs = sorted(
            (RankLaw.of(x, y, schedule, 2, 0).observed[k], rank_test(x[:n], y[:n]).p)
            for x, y in relabelled(a, b, schedule)
        )
        p = [q for _, q in pairs]
        assert all(later <= earlier + 1e-12 for earlier, later in zip(p, p[1:])), k


def test_given_the_scores_no_more_than_the_spent_share_crosses_by_an_independent_computation():
    # Looks at 4 and 6 trials, tied scores and failures: the workflow's nominal p of each of the 420
    # relabellings, boundaries found in p-space by the spending rule, compared with the law's decisions.
    schedule, level = Schedule(4, 2, 6), 0.3
    a, b = np.array([1.0, 2, 2, np.inf, 3, 1]), np.array([0.0, 2, np.inf, np.inf, 1, 4])
    p = np.array([[rank_test(x[:n], y[:n]).p for n in schedule.looks] for x, y in relabelled(a, b, schedule)])
    spent = obrien_fleming(schedule.fractions(), level)
    crossed = np.zeros(len(p), bool)
    for k in range(2):
        allowed = int(np.floor(spent[k] * len(p) + 1e-9)) - crossed.sum()
        still = np.sort(p[~crossed, k])
        # The largest p-boundary (exclusive) that lets at most ``allowed`` more cross.
        bound = still[allowed] if allowed < len(still) else np.inf
        crossed |= p[:, k] < bound
        assert crossed.mean() <= spent[k] + 1e-12
    assert crossed.any()
    ours = [RankLaw.of(x, y, schedule, 2, 0).crossing(level) is not None for x, y in relabelled(a, b, schedule)]
    law = RankLaw.of(a, b, schedule, 2, 0)
    # Each relabelling has the same law (the same rounds' outcomes): its own boundaries decide it.
    assert np.array_equal(np.array(ours), crossed)
    assert (law.distances > law.boundaries(level)).any(axis=1).mean() == pytest.approx(crossed.mean())


def test_a_drawn_law_agrees_with_the_counted_one_and_is_seeded():
    rng = np.random.default_rng(5)
    a, b = np.round(rng.normal(0, 1, 24), 1), np.round(rng.normal(0.3, 1, 24), 1)
    drawn = RankLaw.of(a, b, LONG, 1, seed=7)
    counted = RankLaw.of(a, b, Schedule(8, 2, 10), 1, seed=7)
    assert len(drawn.distances) == RELABELLINGS + 1 and drawn.distances[0] == drawn.observed[0]
    assert counted.observed[0] == drawn.observed[0]
    # The first look's law (the first 8 trials' C(16, 8) = 12,870 labellings) against 10,000 draws of it.
    for cut in np.quantile(counted.distances[:, 0], [0.5, 0.9, 0.99]):
        exact = np.mean(counted.distances[:, 0] >= cut)
        assert np.mean(drawn.distances[:, 0] >= cut) == pytest.approx(exact, abs=4 * np.sqrt(exact / 10_000))
    again = RankLaw.of(a, b, LONG, 1, seed=7)
    assert np.array_equal(again.distances, drawn.distances)
    assert not np.array_equal(RankLaw.of(a, b, LONG, 1, seed=8).distances, drawn.distances)


@pytest.mark.parametrize("schedule", [DEFAULT, LONG], ids=["counted", "drawn"])
def test_a_look_computed_later_gives_the_earlier_looks_boundaries_decisions_and_design_p(schedule):
    rng = np.random.default_rng(2)
    outcomes = {
        "a": np.where(rng.random(24) < 0.2, np.inf, rng.normal(0, 1, 24)),
        "b": np.round(rng.normal(1.0, 1, 24)),
        "c": rng.normal(0.2, 1, 24),
    }
    every = pair_laws(outcomes, schedule, len(schedule.looks), 2026)
    for k in range(1, len(schedule.looks) + 1):
        at_k = pair_laws(outcomes, schedule, k, 2026)
        assert decide(at_k, 0.05) == decide({pair: law.first(k) for pair, law in every.items()}, 0.05)
        for pair, law in at_k.items():
            assert np.array_equal(law.boundaries(0.05 / 3), every[pair].boundaries(0.05 / 3)[:k])
            assert law.design_p(0.05, k - 1) == pytest.approx(every[pair].design_p(0.05, k - 1), abs=1e-12)


def law_with(observed: list[float]) -> RankLaw:
    """A law of two looks whose relabellings' statistics are 0 .. 999 at both looks, and ``observed``."""
    values = np.arange(1000)
    return RankLaw(np.stack([values, values[::-1]], axis=1), np.array(observed, float), np.array([0.5, 1.0]))


def test_holm_passes_a_decided_comparisons_share_to_the_others():
    half, whole = law_with([0, 0]).boundaries(0.025), law_with([0, 0]).boundaries(0.05)
    assert half[1] > whole[1]
    # a vs b crosses alpha/2's boundary at the second look, a vs c only alpha's: recycling decides both.
    laws = {("a", "b"): law_with([0, half[1] + 1]), ("a", "c"): law_with([0, whole[1] + 1])}
    assert decide(laws, 0.05) == {("a", "b"): (1, 0.025), ("a", "c"): (1, 0.05)}
    schedule = Schedule(4, 4, 8)
    decisions = sequential_holm(laws, schedule, 0.05)
    assert [d.look for d in decisions] == [1, 1]
    assert all(d.p_design <= d.level for d in decisions)
    # Without a vs b's crossing, a vs c stays open at alpha/2; at the first look, with one to come, no design p.
    alone = {("a", "b"): law_with([0, 0]), ("a", "c"): law_with([0, whole[1] + 1])}
    assert [d.look for d in sequential_holm(alone, schedule, 0.05)] == [None, None]
    first = {pair: RankLaw(law.distances[:, :1], law.observed[:1], law.fractions[:1]) for pair, law in alone.items()}
    decisions = sequential_holm(first, schedule, 0.05)
    assert all(np.isnan(d.p_design) for d in decisions)


def test_at_the_last_look_the_design_p_is_below_the_level_exactly_where_the_boundary_is_crossed():
    rng = np.random.default_rng(3)
    a, b = np.where(rng.random(10) < 0.3, np.inf, rng.integers(0, 4, 10)), rng.integers(0, 4, 10).astype(float)
    law = RankLaw.of(a, b, DEFAULT, 2, 0)
    bounds = law.boundaries(0.05)
    for value in np.unique(law.distances[:, 1]):
        probe = RankLaw(law.distances, np.array([0.0, value]), law.fractions)
        (last,) = sequential_holm({("a", "b"): probe}, DEFAULT, 0.05)
        assert (last.look is not None) == (value > bounds[1]) == (last.p_design <= 0.05), value


@pytest.mark.parametrize(
    ("case", "setups"),
    [("normal", 2), ("tied integers 0-4", 2), ("20% failures (worst)", 2), ("20% failures (worst)", 3)],
)
def test_the_family_wise_error_over_all_looks_stays_at_alpha(case, setups):
    # Set-ups alike, 2,000 null studies through the looks' own test (docs/sequential-design.md: 20,000).
    result = simulate([NULL_CASES[case]] * setups, DEFAULT, 0.05, studies=2000, seed=1)
    # alpha plus 2.33 standard errors of the simulation (0.0114): one-sided 1%.
    assert result["decides_any"] <= 0.05 + 0.0114, result


def test_against_the_fixed_design_the_schedule_keeps_power_for_fewer_trials():
    shifted = [NULL_CASES["normal"], lambda rng, size: rng.normal(1.0, 1.0, size)]
    sequential = simulate(shifted, LONG, 0.05, studies=1000, seed=2)
    fixed = simulate(shifted, Schedule(24, 1, 24), 0.05, studies=1000, seed=2)
    assert fixed["mean_trials"] == 24 and sequential["mean_trials"] < 0.8 * 24
    assert sequential["decides_all"] >= fixed["decides_all"] - 0.03, (sequential, fixed)


def test_a_schedules_plan_from_measured_outcomes_matches_an_independent_resampling(tmp_path):
    import pandas as pd
    from scipy.stats import mannwhitneyu

    from ganstudy.stats.design import schedule_plan
    from ganstudy.stats.settings import StatisticsSettings
    from ganstudy.stats.summary import write_stats

    rng = np.random.default_rng(4)
    measured = {"a": rng.normal(10.0, 1.0, 6), "b": rng.normal(11.0, 1.0, 6), "c": rng.normal(13.0, 1.0, 6)}
    rows = [
        {"study": "s", "setup": s, "trial": t, "metric": "fid", "value": v, "train_seconds": 360.0}
        for s, values in measured.items()
        for t, v in enumerate(values)
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "scores.csv", index=False)
    write_stats(tmp_path / "scores.csv", list(measured), ["fid"], tmp_path / "tables")
    plan = schedule_plan(tmp_path, Schedule(6, 3, 12), "fid", StatisticsSettings()).set_index("design")
    # The fixed design of 12 trials, by hand: resampled studies, scipy's test, Holm over the 3 pairs.
    decided_all = []
    for _ in range(2000):
        drawn = {s: rng.choice(v, 12) for s, v in measured.items()}
        p = [mannwhitneyu(drawn[x], drawn[y]).pvalue for x, y in (("a", "b"), ("a", "c"), ("b", "c"))]
        decided_all.append(all(q * (3 - rank) < 0.05 for rank, q in enumerate(sorted(p))))
    assert plan.loc["fixed", "decides_all"] == pytest.approx(np.mean(decided_all), abs=0.04)
    assert plan.loc["fixed", "mean_trials"] == 12 and 6 <= plan.loc["sequential", "mean_trials"] <= 12
    # 3 set-ups at 0.1 core-hours a trial each.
    assert plan.loc["fixed", "hours"] == pytest.approx(12 * 3 * 0.1) and set(plan.unit) == {"core-hours"}


def test_the_operating_page_is_made_by_its_command(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "page.md"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ganstudy.stats.sequential",
            "--studies",
            "40",
            "--sweep-studies",
            "5",
            "--schedules",
            "4,2,6",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "## Schedule 4, 6" in text and "every relabelling counted" in text
    assert text.count("| null, ") == 10 and text.count("| fixed |") == 3
    assert "## A sweep" in text and text.count("| also stops once beaten |") == 1
    assert text.count("| also stops once futile |") == 1 and text.count("| also stops once beaten or futile |") == 1


# Set-up a's trials below every other; b's and c's interleaved (issue 95, item 4).
SEPARATED = {
    "a": np.arange(12.0),
    "b": 20.0 + np.arange(12.0),
    "c": 20.5 + np.arange(12.0),
}


def looks_of(outcomes: dict, schedule: Schedule, taken: int, stopping: Stopping | None = None):
    from ganstudy.stats.sequential import take_looks

    def law_at(pair, looks):
        return RankLaw.of(outcomes[pair[0]], outcomes[pair[1]], schedule, looks, 7)

    return take_looks(list(outcomes), law_at, schedule, taken, 0.05, stopping or Stopping(), higher=False)


def test_a_set_up_whose_comparisons_are_all_decided_takes_no_more_rounds():
    from ganstudy.stats.sequential import Stop

    schedule = Schedule(8, 2, 12)
    first = looks_of(SEPARATED, schedule, 1)
    assert first.stopped == {"a": Stop(1, "every comparison decided")} and first.more
    # At the second look a's comparisons keep their first look's trials; b against c takes both rounds.
    second = looks_of({**SEPARATED, "a": np.r_[SEPARATED["a"][:8], [np.nan] * 4]}, schedule, 2)
    assert second.looks == {("a", "b"): 1, ("a", "c"): 1, ("b", "c"): 2} and second.stopped == first.stopped
    assert [d.look for d in second.decisions] == [0, 0, None] and second.more
    # Stopping a set-up whose comparisons are decided changes no decision.
    assert [d.look for d in second.decisions] == [d.look for d in looks_of(SEPARATED, schedule, 2).decisions]


def test_with_stop_beaten_the_beaten_stop_and_their_comparison_ends_undecided():
    from ganstudy.stats.sequential import Stop

    looks = looks_of(SEPARATED, Schedule(8, 2, 12), 3, Stopping(beaten=True))
    # b and c lose to a at the first look: every set-up stops there, b vs c undecided with its design p.
    assert looks.taken == 1 and not looks.more
    assert looks.stopped == {
        "b": Stop(1, "a beat it significantly at look 1"),
        "c": Stop(1, "a beat it significantly at look 1"),
        "a": Stop(1, "every comparison decided"),
    }
    undecided = next(d for d in looks.decisions if d.pair == ("b", "c"))
    # Both of a's comparisons decided, their shares passed on: b vs c tested at all of alpha.
    assert undecided.look is None and undecided.level == 0.05 and undecided.p_design > 0.05


def test_conditional_power_is_the_b_value_s_from_the_mann_whitney_z():
    # Look 1 of 8/2/10 (every relabelling counted, continuous scores): the relabellings' spread of the rank sum
    # is the textbook sd sqrt(n1 n2 (N + 1) / 12), so z is scipy's U standardised, t = 8 / 10.
    rng = np.random.default_rng(5)
    a, b = rng.normal(0.6, 1, 10), rng.normal(0, 1, 10)
    law = RankLaw.of(a, b, DEFAULT, 1, 0)
    u = stats.mannwhitneyu(a[:8], b[:8]).statistic
    z = abs(u - 32) / np.sqrt(64 * 17 / 12)
    for level in (0.05, 0.01):
        expected = stats.norm.cdf((z / np.sqrt(0.8) - stats.norm.ppf(1 - level / 2)) / np.sqrt(0.2))
        assert law.conditional_power(level) == pytest.approx(expected, rel=1e-9)
    assert RankLaw.of(a, b, DEFAULT, 2, 0).conditional_power(0.05) == 1.0


def test_with_futility_set_ups_whose_open_comparisons_cannot_be_decided_stop():
    from ganstudy.stats.sequential import Stop

    schedule = Schedule(8, 2, 12)
    # a is decided against b and c at look 1; b and c interleave (their B-value's power is about 0).
    looks = looks_of(SEPARATED, schedule, 3, Stopping(futility=0.1))
    why = (
        "its comparisons still open are unlikely to be decided by the schedule's most "
        "(conditional power under the trend seen below 0.1)"
    )
    assert looks.taken == 1 and not looks.more
    assert looks.stopped == {"a": Stop(1, "every comparison decided"), "b": Stop(1, why), "c": Stop(1, why)}
    assert [d.look for d in looks.decisions] == [0, 0, None] and looks.decisions[2].p_design > 0.05
    # Without futility b and c go on to the schedule's end; the decisions made are the same.
    going_on = looks_of(SEPARATED, schedule, 3)
    assert going_on.taken == 3 and [d.look for d in going_on.decisions] == [0, 0, None]


@pytest.mark.parametrize(
    "stopping",
    [Stopping(), Stopping(beaten=True), Stopping(futility=0.1)],
    ids=["stops once decided", "also once beaten", "also once futile"],
)
def test_stopping_set_ups_keeps_the_family_wise_error_at_alpha(stopping):
    # One set-up 2 sd better, two alike: an error is a decision between the alike two (1,000 studies).
    draws = [lambda rng, size: rng.normal(-2.0, 1, size), NULL_CASES["normal"], NULL_CASES["normal"]]
    result = simulate(draws, DEFAULT, 0.05, studies=1000, seed=3, stopping=stopping, alike=[(1, 2)])
    # alpha plus 2.33 standard errors (0.016).
    assert result["error"] <= 0.05 + 0.016, result
    assert result["power"] > 0.8 and result["mean_trials"] <= result["every_round_trials"]
