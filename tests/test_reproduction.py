"""The papers' numbers beside ours: Welch's test from summary statistics and the direction block."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ganstudy.report.summary_page import _findings
from ganstudy.stats.reproduction import (
    NOT_COMPARABLE,
    claim_table,
    direction_table,
    reproduction_table,
    write_reproduction,
)
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
        "reproduction_claims.csv",
    ]
    markdown = (tmp_path / "tables" / "reproduction.md").read_text()
    assert (
        markdown.count("### ") == 2 and "| isc | dcgan | per_class | per_class |" in markdown and "None" not in markdown
    )
    # These scores (a hand-made scores.csv) carry no protocol: the footnote says so rather than nothing.
    assert "isc (ours): Protocol: not recorded" in markdown


def finding(versus, found, change=None, source="Lipi-Ring, abstract"):
    return {"mean": None, "versus": versus, "finding": found, "change": change, "source": source}


def costed(values: dict[str, list[float]], seconds: dict[str, list[float]], ranks=1, gpus=0) -> pd.DataFrame:
    """FID rows with each trial's training seconds, twice (FID and IS rows: one trial's cost counts once)."""
    rows = [
        {
            "setup": s,
            "trial": t,
            "metric": m,
            "value": v,
            "train_seconds": seconds[s][t],
            "ranks": ranks,
            "cores_per_rank": 2,
            "gpus_per_rank": gpus,
        }
        for m in ("fid", "isc")
        for s, vs in values.items()
        for t, v in enumerate(vs)
    ]
    return pd.DataFrame(rows)


def test_a_papers_findings_beside_our_rank_tests_of_the_same_pairs():
    # Lipi-Ring's claim: the ring's FID no different from the torus's, its compute lower (14.2% to 41.2%).
    ring, torus = [5.0, 7.0, 6.0, 9.0, 4.0, 8.0], [6.5, 5.5, 7.5, 4.5, 8.5, 6.25]
    ring_s, torus_s = [700.0, 720.0, 710.0, 690.0, 705.0, 730.0], [900.0, 880.0, 910.0, 905.0, 890.0, 920.0]
    refs = {
        "ring": {"fid": finding("torus", "no_difference"), "cost": finding("torus", "lower", [-0.412, -0.142])},
        "torus": {},
    }
    table = claim_table(costed({"ring": ring, "torus": torus}, {"ring": ring_s, "torus": torus_s}), refs, ["ring"])
    fid, cost = (table[table.quantity == q].iloc[0] for q in ("FID", "core-hours per trial"))
    assert fid.ours_p == pytest.approx(stats.mannwhitneyu(ring, torus, method="exact").pvalue)
    assert (fid.paper_finding, fid.ours_finding, fid.agree) == ("no significant difference",) * 2 + ("yes",)
    # Hodges-Lehmann: the median of the 36 differences ring - torus; the medians' change by hand.
    assert fid.ours_shift == pytest.approx(np.median(np.subtract.outer(ring, torus)))
    assert fid.ours_shift_low <= fid.ours_shift <= fid.ours_shift_high
    assert fid.ours_change == pytest.approx(np.median(ring) / np.median(torus) - 1)
    # Cost: seconds x 1 rank x 2 cores, in hours; every ring trial cheaper than every torus trial.
    hours = np.array(ring_s) * 2 / 3600, np.array(torus_s) * 2 / 3600
    assert cost.ours_median == pytest.approx(np.median(hours[0])) and cost.versus_median == pytest.approx(
        np.median(hours[1])
    )
    assert cost.ours_p == pytest.approx(stats.mannwhitneyu(*hours, method="exact").pvalue)
    assert (cost.ours_finding, cost.agree) == ("lower", "yes")
    assert (cost.paper_change_low, cost.paper_change_high) == (-0.412, -0.142)
    assert cost.ours_change == pytest.approx(np.median(ring_s) / np.median(torus_s) - 1)


def test_a_finding_ours_reverses_or_cannot_judge_is_said_so():
    # Ours finds the ring's FID higher (worse) where the paper finds no difference, and its cost on GPUs.
    ring, torus = [9.0, 9.5, 10.0, 11.0, 12.0], [4.0, 4.5, 5.0, 5.5, 6.0]
    seconds = {"ring": [100.0] * 5, "torus": [100.0] * 5}
    refs = {"ring": {"fid": finding("torus", "no_difference"), "cost": finding("torus", "lower")}}
    table = claim_table(costed({"ring": ring, "torus": torus}, seconds, ranks=2, gpus=1), refs, ["ring"])
    fid, cost = table.iloc[0], table.iloc[1]
    assert (fid.ours_finding, fid.agree) == ("higher", "no")
    # Equal costs: the tied test cannot reject; GPU-hours where both trained on GPUs.
    assert cost.quantity == "GPU-hours per trial" and cost.ours_median == pytest.approx(100 * 2 / 3600)
    assert (cost.ours_finding, cost.agree) == ("no significant difference", "no")
    # Failed trials rank worst: a ring whose trials all diverged has the higher (worse) FID.
    failed = claim_table(costed({"ring": [np.inf] * 5, "torus": torus}, seconds), refs, ["ring"]).iloc[0]
    assert (failed.ours_finding, failed.agree) == ("higher", "no")
    # Two trials against two: no test can reject, and none is made to say so.
    few = claim_table(costed({"ring": ring[:2], "torus": torus[:2]}, seconds), refs, ["ring"]).iloc[0]
    assert few.ours_finding == "no significant difference" and np.isnan(few.ours_shift_low)


def test_findings_are_a_third_block_and_a_table_of_their_own_and_the_page_says_them(tmp_path):
    ring, torus = [5.0, 7.0, 6.0, 9.0], [6.5, 5.5, 7.5, 4.5]
    seconds = {"ring": [700.0, 710.0, 690.0, 720.0], "torus": [900.0, 905.0, 895.0, 910.0]}
    refs = {"ring": {"cost": finding("torus", "lower", [-0.412, -0.142])}}
    costed({"ring": ring, "torus": torus}, seconds).to_csv(tmp_path / "scores.csv", index=False)
    written = write_reproduction(tmp_path / "scores.csv", refs, ["ring", "torus"], tmp_path / "tables")
    assert written[-1].name == "reproduction_claims.csv"
    markdown = (tmp_path / "tables" / "reproduction.md").read_text()
    # Findings only: no paper's numbers, no directions between them; the findings' block alone.
    assert markdown.count("### ") == 1 and "| ring | torus | core-hours per trial |" in markdown
    assert "no evidence that the two are alike" in markdown
    page = _findings(written[-1], 3, 0.05)
    p = stats.mannwhitneyu(np.array(seconds["ring"]), np.array(seconds["torus"]), method="exact").pvalue
    assert (
        "- ring against torus, core-hours per trial: the paper finds lower (-41.2% to -14.2%); ours lower "
        f"(medians {np.median(seconds['ring']) / np.median(seconds['torus']) - 1:+.1%}" in page
    )
    # Every ring trial cheaper than every torus trial: exact p = 2 / C(8, 4) = 0.0286.
    assert p == pytest.approx(2 / 70) and "p = 0.0286): agrees." in page
