"""The papers' numbers beside ours: Welch's test from summary statistics and the direction block."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ganstudy.stats.reproduction import NOT_COMPARABLE, direction_table, reproduction_table, write_reproduction
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.stats.tests import welch_pvalue


def ref(mean, sd=None, trials=None, comparable=False, source="paper"):
    return {"mean": mean, "sd": sd, "trials": trials, "source": source, "comparable": comparable}


def scores(values: dict[str, list[float]], metric: str = "fid") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"setup": s, "trial": t, "metric": metric, "value": v, "train_seconds": 1.0}
            for s, vs in values.items()
            for t, v in enumerate(vs)
        ]
    )


def test_welch_from_summary_statistics_is_scipy_s_welch_on_the_raw_samples():
    rng = np.random.default_rng(4)
    a, b = rng.normal(41.2, 2.4, 30), rng.normal(24.6, 2.3, 8)
    raw = stats.ttest_ind(a, b, equal_var=False).pvalue
    assert welch_pvalue(a.mean(), a.std(ddof=1), 30, b.mean(), b.std(ddof=1), 8) == pytest.approx(raw, rel=1e-12)
    # By hand: t = (m1 - m2) / sqrt(s1²/n1 + s2²/n2), Welch-Satterthwaite degrees of freedom.
    v1, v2 = 2.0**2 / 5, 3.0**2 / 7
    t = (10.0 - 13.0) / np.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1**2 / 4 + v2**2 / 6)
    assert welch_pvalue(10.0, 2.0, 5, 13.0, 3.0, 7) == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-12)
    assert np.isnan(welch_pvalue(10.0, None, 5, 13.0, 3.0, 7)) and np.isnan(welch_pvalue(10.0, 2.0, 1, 13.0, 3.0, 7))


def test_a_comparable_reference_is_tested_and_an_incomparable_one_says_so():
    ours = {"g3": [40.0, 42.0, 44.0, 41.0], "g6": [20.0, 22.0, 21.0, 23.0]}
    refs = {
        "g3": {"fid": ref(41.23, 2.36, 30, comparable=True, source="thesis table 4.4")},
        "g6": {"fid": ref(24.63, 2.35, 30)},
    }
    table = reproduction_table(scores(ours), refs, ["g3", "g6"]).set_index("setup")
    mine = np.array(ours["g3"])
    expected = stats.ttest_ind_from_stats(41.23, 2.36, 30, mine.mean(), mine.std(ddof=1), 4, equal_var=False).pvalue
    assert table.loc["g3", "p_welch"] == pytest.approx(expected, rel=1e-12)
    assert table.loc["g3", "difference"] == pytest.approx(mine.mean() - 41.23)
    assert table.loc["g3", "source"] == "thesis table 4.4" and table.loc["g3", "note"] == ""
    assert np.isnan(table.loc["g6", "p_welch"]) and table.loc["g6", "note"] == NOT_COMPARABLE


def test_directions_in_the_paper_and_in_ours_for_a_hand_made_case():
    # FID: lower is better. The paper: 3x3 41.2 > 6x6 24.6 > 12x12 19.9 (bigger grids better).
    # Ours: 6x6 beats 3x3 as in the paper, but 12x12 is worse than 6x6 (disagrees).
    ours = {"g3": [30.0, 31.0, 32.0], "g6": [20.0, 21.0, 22.0], "g12": [25.0, 26.0, 27.0]}
    refs = {
        "g3": {"fid": ref(41.23, 2.36, 30)},
        "g6": {"fid": ref(24.63, 2.35, 30)},
        "g12": {"fid": ref(19.89, 2.54, 15)},
    }
    table = direction_table(scores(ours), refs, ["g3", "g6", "g12"])
    got = {(r.setup_a, r.setup_b): (r.paper_better, r.ours_better, r.agree) for r in table.itertuples()}
    assert got == {
        ("g3", "g6"): ("g6", "g6", "yes"),
        ("g3", "g12"): ("g12", "g12", "yes"),
        ("g6", "g12"): ("g12", "g6", "no"),
    }
    row = table[(table.setup_a == "g3") & (table.setup_b == "g6")].iloc[0]
    assert row.paper_p_welch == pytest.approx(
        stats.ttest_ind_from_stats(41.23, 2.36, 30, 24.63, 2.35, 30, equal_var=False).pvalue
    )
    # 3 against 3 trials: the exact test by default (the pairs tables' choice), the thesis's asymptotic one
    # where statistics.test says so.
    assert row.ours_test == "exact" and row.ours_p == pytest.approx(
        stats.mannwhitneyu(ours["g3"], ours["g6"], method="exact").pvalue
    )
    thesis = direction_table(scores(ours), refs, ["g3", "g6", "g12"], StatisticsSettings(test="asymptotic")).iloc[0]
    assert thesis.ours_test == "asymptotic"
    assert thesis.ours_p == pytest.approx(stats.mannwhitneyu(ours["g3"], ours["g6"], method="asymptotic").pvalue)


def test_higher_is_better_metrics_and_missing_statistics(tmp_path):
    # Seed 001's IS table gives no trials: directions still compare, the paper's p cannot be computed.
    ours = {"dcgan": [2.0, 2.1], "per_class": [2.6, 2.7]}
    refs = {"dcgan": {"isc": ref(2.54, 0.54)}, "per_class": {"isc": ref(2.71, 0.04)}}
    table = direction_table(scores(ours, "isc"), refs, ["dcgan", "per_class"])
    assert table.paper_better.tolist() == ["per_class"] and table.ours_better.tolist() == ["per_class"]
    assert np.isnan(table.paper_p_welch[0])
    scores(ours, "isc").to_csv(tmp_path / "scores.csv", index=False)
    written = write_reproduction(tmp_path / "scores.csv", refs, ["dcgan", "per_class"], tmp_path / "tables")
    assert [p.name for p in written] == [
        "reproduction.csv",
        "reproduction.md",
        "reproduction.tex",
        "reproduction_directions.csv",
    ]
    markdown = (tmp_path / "tables" / "reproduction.md").read_text()
    assert (
        markdown.count("### ") == 2 and "| isc | dcgan | per_class | per_class |" in markdown and "None" not in markdown
    )
    # These scores (a hand-made scores.csv) carry no protocol: the footnote says so rather than nothing.
    assert "isc (ours): Protocol: not recorded" in markdown
