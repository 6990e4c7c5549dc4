"""Group-sequential rank tests (issue 83, item 4): the boundaries spend alpha as O'Brien-Fleming's function
says (checked against an enumeration of every ordering of a small design and a fresh simulation), the
family-wise error over all looks and comparisons stays at alpha (10,000 null studies, continuous and tied
scores), the design's p agrees with the decision, and against the fixed design of the most trials the
schedule keeps most of the power for fewer trials on average."""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pytest
from scipy.stats import mannwhitneyu, norm

from ganstudy.stats.sequential import (
    Schedule,
    boundaries,
    decide,
    more_needed,
    nominal_pvalues,
    obrien_fleming,
    sequential_holm,
    simulate,
    stagewise_p,
)

DEFAULT = Schedule(8, 4, 24)


def test_the_schedule_looks_and_spends_as_lan_and_demets_say():
    assert DEFAULT.looks == (8, 12, 16, 20, 24) and Schedule(8, 5, 20).looks == (8, 13, 18, 20)
    spent = obrien_fleming(DEFAULT.fractions(), 0.05)
    # By hand: 2 - 2 Phi(z_0.975 / sqrt(1/3)) at the first look; all of alpha at the last.
    assert spent[0] == pytest.approx(2 - 2 * norm.cdf(norm.ppf(0.975) * np.sqrt(3)))
    assert spent[-1] == pytest.approx(0.05)
    assert np.all(np.diff(spent) > 0)


def test_an_enumeration_of_every_ordering_crosses_no_more_than_is_spent():
    # Looks at 3 and 4 trials per set-up: the 8 trials' ranks are one of 8! equally likely orders under the null.
    schedule = Schedule(3, 1, 4)
    level = 0.5  # large enough that both looks have a boundary to cross at these few trials
    bounds = boundaries(schedule, level, "exact")
    orders = np.array(list(permutations(range(8))), float)
    # Trial i of a set-up is column i: a = columns 0-3, b = columns 4-7; look 1 takes the first three of each.
    p = nominal_pvalues(orders[:, :4], orders[:, 4:], schedule.looks, "exact")
    assert p[:, 0] == pytest.approx(mannwhitneyu(orders[:, :3], orders[:, 4:7], axis=1, method="exact").pvalue)
    first = np.mean(p[:, 0] < bounds[0])
    either = np.mean((p[:, 0] < bounds[0]) | (p[:, 1] < bounds[1]))
    spent = obrien_fleming(schedule.fractions(), level)
    assert first <= spent[0] + 1e-12 and either <= spent[1] + 1e-12
    # The boundaries spend what the discrete statistic allows: crossing at the boundary itself would spend too much.
    too_much = np.mean((p[:, 0] < bounds[0]) | (p[:, 1] <= bounds[1]))
    assert either > 0 and too_much > spent[1]


def test_a_fresh_simulation_crosses_each_look_within_its_spending():
    rng = np.random.default_rng(99)
    scores = rng.normal(size=(2, 20_000, DEFAULT.most))
    p = nominal_pvalues(scores[0], scores[1], DEFAULT.looks, "auto")
    bounds = boundaries(DEFAULT, 0.05, "auto")
    crossed = np.cumsum(p < np.array(bounds), axis=1) > 0
    spent = obrien_fleming(DEFAULT.fractions(), 0.05)
    # 3 standard errors of a share near 0.05 over 20,000 studies: 0.0046.
    assert np.all(crossed.mean(axis=0) <= spent + 0.0046), (crossed.mean(axis=0), spent)


@pytest.mark.parametrize(
    "draw",
    [lambda rng, size: rng.random(size), lambda rng, size: rng.integers(0, 5, size).astype(float)],
    ids=["continuous", "tied"],
)
@pytest.mark.parametrize("setups", [2, 3])
def test_the_family_wise_error_over_all_looks_stays_at_alpha(draw, setups):
    # Set-ups alike, every comparison looked at 5 times: 10,000 null studies.
    result = simulate([draw] * setups, DEFAULT, 0.05, studies=10_000, seed=1)
    # alpha plus 2 standard errors of the simulation (0.0044).
    assert result["decides_any"] <= 0.05 + 0.0044, result


def test_against_the_fixed_design_the_schedule_keeps_power_for_fewer_trials():
    shifted = [lambda rng, size: rng.normal(1.0, 1.0, size), lambda rng, size: rng.normal(0.0, 1.0, size)]
    sequential = simulate(shifted, DEFAULT, 0.05, studies=2000, seed=2)
    fixed = simulate(shifted, Schedule(24, 1, 24), 0.05, studies=2000, seed=2)
    # A 1-sd shift: power 0.91 against 0.92, for 17.4 trials per set-up on average against 24 (AMD EPYC Zen 4).
    assert fixed["mean_trials"] == 24 and sequential["mean_trials"] < 0.8 * 24
    assert sequential["decides_all"] >= fixed["decides_all"] - 0.03, (sequential, fixed)


def test_holm_passes_a_decided_comparisons_share_to_the_others():
    # Look 2 of 3, two comparisons: a vs b crosses alpha/2's boundary, a vs c only alpha's; recycling decides both.
    schedule = Schedule(8, 4, 16)
    half, whole = boundaries(schedule, 0.025), boundaries(schedule, 0.05)
    between = (half[1] + whole[1]) / 2
    assert half[1] < between < whole[1]
    nominal = {("a", "b"): [0.5, half[1] / 2], ("a", "c"): [0.5, between]}
    assert set(decide({pair: np.array(p) for pair, p in nominal.items()}, schedule, 0.05)) == set(nominal)
    # Without a vs b's crossing, a vs c stays open at alpha/2, and the study goes on to its third look.
    alone = {("a", "b"): [0.5, 0.5], ("a", "c"): [0.5, between]}
    decisions = sequential_holm(alone, schedule, 0.05)
    assert [d.look for d in decisions] == [None, None] and more_needed(decisions, schedule)
    decisions = sequential_holm(nominal, schedule, 0.05)
    assert [d.look for d in decisions] == [1, 1] and not more_needed(decisions, schedule)
    # The design's p is below its level exactly where the comparison was decided; open with a look to come, none.
    assert all(np.isnan(d.p_design) for d in sequential_holm(alone, schedule, 0.05))
    assert all(d.p_design <= d.level for d in sequential_holm(nominal, schedule, 0.05))
    # At the last look, decided or not, the design's p and the boundary agree for every nominal p.
    bounds = boundaries(schedule, 0.05)
    # The boundary itself is a p the null studies reach: it is exclusive, so a p on it does not cross.
    for p in [*np.linspace(0.0005, 0.2, 60), bounds[2]]:
        (last,) = sequential_holm({("a", "b"): [0.5, 0.5, p]}, schedule, 0.05)
        assert (last.look is not None) == (p < bounds[2]) == (last.p_design <= 0.05), p
    # The design's p is below its level exactly where the comparison was decided.
    assert all((d.p_design <= d.level) == (d.look is not None) for d in decisions)


def test_the_design_p_of_a_comparison_that_ran_to_the_end_is_its_own_crossing_probability():
    bounds = boundaries(DEFAULT, 0.05)
    # Never crossed, nominal p 0.5 at the last look: the design's p is at least that look's share of null p <= 0.5.
    p = stagewise_p(DEFAULT, len(DEFAULT.looks) - 1, 0.5, 0.05)
    assert 0.45 <= p <= 0.55
    assert stagewise_p(DEFAULT, 0, bounds[0] * 0.999, 0.05) <= obrien_fleming(DEFAULT.fractions(), 0.05)[0] + 1e-12


def test_a_schedules_plan_from_measured_outcomes_matches_an_independent_resampling(tmp_path):
    import pandas as pd

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
        [sys.executable, "-m", "ganstudy.stats.sequential", "--studies", "200", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "Schedule 8, 12, 16, 20, 24 trials" in text and text.count("| sequential |") == 6
