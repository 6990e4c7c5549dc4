"""The looks of a study on a schedule (ganstudy.stats.looks): each look's tests against scipy's, its decisions
against the boundaries, a later look agreeing with an earlier one, failures ranked worst, and the design p
that the tables and the page compare with alpha. The workflow that takes them: tests/test_looks_workflow.py."""

from __future__ import annotations

from itertools import combinations
from math import comb

import numpy as np
import pandas as pd
import pytest
from scipy.stats import mannwhitneyu, rankdata

from ganstudy.config.validate import ConfigError
from ganstudy.plan.parts import schedule_problems
from ganstudy.stats.looks import judged_pairs, look_record, looks_table
from ganstudy.stats.sequential import RankLaw
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.study.trials import Schedule


def tidy(values: dict[str, list[float]], metric: str = "fid") -> pd.DataFrame:
    """Scores as the aggregate step writes them (setup, trial, metric, value)."""
    rows = [
        {"setup": setup, "trial": trial, "metric": metric, "value": value}
        for setup, scores in values.items()
        for trial, value in enumerate(scores)
    ]
    return pd.DataFrame(rows)


SETTINGS = StatisticsSettings(alpha=0.05, test="auto")


def scipy_p(x: list[float], y: list[float]) -> float:
    """The study's auto test by scipy: exact up to 100,000 splits, else the tie-corrected normal approximation."""
    method = "exact" if comb(len(x) + len(y), len(x)) <= 100_000 else "asymptotic"
    return mannwhitneyu(x, y, method=method).pvalue


def enumerated_p(x: list[float], y: list[float]) -> float:
    """Two-sided p of U over every split of the pooled (tied) outcomes: our own enumeration."""
    ranks = rankdata(np.concatenate([x, y]))
    mean = len(x) * (len(ranks) + 1) / 2
    observed = abs(ranks[: len(x)].sum() - mean)
    splits = [abs(ranks[list(c)].sum() - mean) for c in combinations(range(len(ranks)), len(x))]
    return float(np.mean(np.array(splits) >= observed - 1e-9))


def test_each_look_tests_the_first_trials_as_scipy_does_and_decides_at_its_boundary():
    rng = np.random.default_rng(7)
    # a better than b by 2 sd: decided at some look; b and c alike: open to the end.
    values = {"a": list(rng.normal(0, 1, 12)), "b": list(rng.normal(2, 1, 12)), "c": list(rng.normal(2, 1, 12))}
    schedule = Schedule(4, 4, 12)
    record = look_record(tidy(values), list(values), "fid", schedule, 3, SETTINGS, 0)
    by_pair = {(d["setup_a"], d["setup_b"]): d for d in record["decisions"]}
    for (x, y), decision in by_pair.items():
        expected = [scipy_p(values[x][:n], values[y][:n]) for n in (4, 8, 12)]
        assert decision["nominal"] == pytest.approx(expected, rel=1e-9)
    # a vs b: first at the Holm level of three open pairs, decided at the first look whose statistic crosses
    # the boundary of its own relabellings.
    law = RankLaw.of(np.array(values["a"]), np.array(values["b"]), schedule, 3, 0)
    ab = by_pair[("a", "b")]
    first = next(k for k in range(3) if law.observed[k] > law.boundaries(0.05 / 3)[k])
    assert ab["decided_at"] == first + 1 and ab["level"] == pytest.approx(0.05 / 3)
    assert by_pair[("b", "c")]["decided_at"] is None
    assert record["more"] is False and record["look"] == 3 and record["trials"] == 12
    # The design p scaled to alpha is below alpha exactly where a look decided the comparison.
    scaled = judged_pairs(record)
    decided = {pair: d["decided_at"] is not None for pair, d in by_pair.items()}
    assert {pair: judged.p < 0.05 for pair, judged in scaled.items()} == decided


def test_a_later_look_takes_the_earlier_looks_decisions_and_asks_more_only_while_one_is_open():
    rng = np.random.default_rng(3)
    values = {"a": list(rng.normal(0, 1, 9)), "b": list(rng.normal(0.3, 1, 9))}
    schedule = Schedule(3, 3, 9)
    looks = [look_record(tidy(values), ["a", "b"], "fid", schedule, k, SETTINGS, 0) for k in (1, 2, 3)]
    for earlier, later in zip(looks, looks[1:]):
        assert later["decisions"][0]["nominal"][: earlier["look"]] == earlier["decisions"][0]["nominal"]
    # Open with looks to come: another round, and no design p yet; at the last look the study ends.
    open_looks = [look for look in looks[:2] if look["decisions"][0]["decided_at"] is None]
    assert all(look["more"] and look["decisions"][0]["p_design"] is None for look in open_looks)
    assert looks[2]["more"] is False and looks[2]["decisions"][0]["p_design"] is not None


def test_failed_trials_count_as_the_worst_outcome_at_every_look():
    # b's trials fail from the fourth on. Counted worst, its three failures balance its three better trials
    # (p near 1 at the second look); left out, b's three finite trials all beat a's six (exact p 2/84), the
    # instability a schedule must not reward.
    values = {"a": [5.0, 6, 7, 5.5, 6.5, 7.5], "b": [4.0, 4.5, 4.8, np.nan, np.inf, np.nan]}
    schedule = Schedule(3, 3, 6)
    worst = look_record(tidy(values), ["a", "b"], "fid", schedule, 2, SETTINGS, 0)["decisions"][0]
    outcome_b = [4.0, 4.5, 4.8, np.inf, np.inf, np.inf]
    assert worst["nominal"][1] == pytest.approx(enumerated_p(values["a"], outcome_b))
    excluded = look_record(tidy(values), ["a", "b"], "fid", schedule, 2, StatisticsSettings(failures="exclude"), 0)
    assert (
        excluded["decisions"][0]["nominal"][1]
        == pytest.approx(mannwhitneyu(values["a"], [4.0, 4.5, 4.8], method="exact").pvalue)
        == pytest.approx(2 / 84)
    )
    assert worst["nominal"][1] > 0.9


def test_with_futility_a_study_whose_comparison_cannot_be_decided_ends_at_its_look_and_says_why():
    # Two set-ups interleaved (their rank statistic near 0 after 8 of 24): the B-value's conditional power is
    # about 0, so statistics.futility 0.1 ends the study at look 1, undecided, where without it rounds go on.
    values = {"a": [float(v) for v in range(0, 48, 2)], "b": [float(v) for v in range(1, 49, 2)]}
    schedule = Schedule(8, 4, 24)
    futile = look_record(tidy(values), ["a", "b"], "fid", schedule, 1, StatisticsSettings(futility=0.1), 0)
    assert not futile["more"] and futile["decisions"][0]["decided_at"] is None
    assert futile["decisions"][0]["p_design"] > 0.05
    why = futile["setups"]["a"]["why"]
    assert futile["setups"]["a"]["stopped_at"] == 1 and "unlikely to be decided by the schedule's most" in why
    assert look_record(tidy(values), ["a", "b"], "fid", schedule, 1, SETTINGS, 0)["more"]


def test_the_looks_table_names_each_comparisons_look_trials_and_p():
    values = {"a": [1.0, 2, 3, 4, 5, 6, 7, 8], "b": [11.0, 12, 13, 14, 15, 16, 17, 18]}
    record = look_record(tidy(values), ["a", "b"], "fid", Schedule(5, 3, 8), 1, SETTINGS, 0)
    row = looks_table(record).iloc[0]
    # 5 against 5, every a below every b: exact p = 2 / C(10, 5), below the first look's boundary.
    assert row.decided_at == 1 and row.trials == 5
    assert row.p_nominal == pytest.approx(2 / 252)
    assert row.p_design <= 0.05 and row.p_design_holm == pytest.approx(row.p_design)
    assert record["more"] is False


def test_a_schedule_that_cannot_run_is_refused_naming_the_remedy():
    setups = {"a": {"trials": None}, "b": {"trials": 4}}
    problems = schedule_problems({"first": 8, "step": 2, "most": 8}, setups)
    assert "trials: first (8) must be below most (8)" in problems[0] and "trials: N" in problems[0]
    assert problems[1].startswith("setups.b.trials:") and "remove trials from b" in problems[1]
    assert schedule_problems(6, setups) == []


def test_a_schedule_missing_a_key_is_a_config_error(default_config):
    from ganstudy.config.schema import CONFIG_SCHEMA
    from ganstudy.config.validate import validate_study_config

    default_config["trials"] = {"first": 4, "most": 8}
    with pytest.raises(ConfigError, match="'trials': 'step' is a required property"):
        validate_study_config(default_config, CONFIG_SCHEMA)
