"""What the answer page may say (issue 83): failed trials counted as the worst outcome, a headline that the
pairwise tests support, magnitude words and intervals only where they agree with the test, the reproduction
table's direction from the rank test, and the median's interval covering at its level. Each case is checked
against scipy or an enumeration of its own, on synthetic scores."""

from __future__ import annotations

from itertools import combinations
from math import comb

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from ganstudy.report.summary_page import write_summary
from ganstudy.stats.convergence import COLUMNS
from ganstudy.stats.reproduction import direction_table
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.stats.summary import pairwise_table, summary_table, write_stats
from ganstudy.stats.tests import a12_interval, agrees_with_test, median_interval, outcomes, rank_test, shift_interval

NAN, INF = float("nan"), float("inf")


def _frame(values: dict[str, list[float]], metric: str = "fid") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"study": "s", "setup": s, "trial": t, "metric": metric, "value": v, "train_seconds": 60.0}
            for s, by_trial in values.items()
            for t, v in enumerate(by_trial)
        ]
    )


def _page(tmp_path, values, settings=StatisticsSettings(), metric="fid"):
    _frame(values, metric).to_csv(tmp_path / "scores.csv", index=False)
    pd.DataFrame([{"setup": s, "converged": "yes"} for s in values], columns=COLUMNS).to_csv(
        tmp_path / "convergence.csv", index=False
    )
    write_stats(
        tmp_path / "scores.csv", list(values), [metric], tmp_path / "tables", settings, tmp_path / "convergence.csv"
    )
    return write_summary(tmp_path, "s", list(values), [metric], [], tmp_path / "summary.md", settings)


UNSTABLE = {"unstable": [20.0] * 6 + [NAN] * 3 + [INF], "stable": [22.0] * 10}


def test_failed_trials_rank_worst_and_the_unstable_set_up_no_longer_wins(tmp_path):
    text = _page(tmp_path, UNSTABLE)
    pairs = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv")
    # Counted as the worst FID, the 4 failures lose to every stable trial: unstable is better in 60 of 100 pairs.
    assert pairs.a12[0] == pytest.approx(1 - 0.6) and pairs.better[0] == "unstable"
    # The tied exact null, enumerated by how many of the pooled 6 twenties, 10 twenty-twos and 4 failures fall in
    # the first set-up: |U - 50| at least the observed (U: pairs the first wins, ties half; lower is better).
    observed, reference = abs(pairs.a12[0] * 100 - 50), 0.0
    for i in range(7):
        for k in range(5):
            j = 10 - i - k
            if 0 <= j <= 10:
                worse = i * 0 + j * (6 - i) + k * (10 - j + 6 - i) + 0.5 * (i * (6 - i) + j * (10 - j) + k * (4 - k))
                weight = comb(6, i) * comb(10, j) * comb(4, k) / comb(20, 10)
                reference += weight * (abs(worse - 50) >= observed - 1e-9)
    # 184,756 splits: auto takes the normal approximation (scipy's, failures as a huge FID); exact takes 99,999
    # seeded resamples, which estimate the enumerated p.
    x, y = [20.0] * 6 + [1e9] * 4, [22.0] * 10
    assert pairs.p_value[0] == pytest.approx(sps.mannwhitneyu(x, y, method="asymptotic").pvalue)
    assert rank_test(outcomes(UNSTABLE["unstable"], False), y, "exact").p == pytest.approx(reference, abs=0.01)
    assert pairs.p_holm[0] >= 0.05
    assert text.splitlines()[2].startswith("No set-up is significantly better than another in FID")
    assert "unstable 10 (4 failed: 3 NaN, 1 inf)" in text
    summary = pd.read_csv(tmp_path / "tables" / "summary_fid.csv").set_index("setup")
    assert summary.loc["unstable", ["trials", "failed", "nan", "inf"]].tolist() == [10, 4, 3, 1]
    assert summary.loc["unstable", "failure_rate"] == 0.4 and summary.loc["unstable", "mean"] == 20.0
    assert "4 failed (3 NaN, 1 inf), ranked worst" in summary.loc["unstable", "note"]


def test_excluding_failures_keeps_the_old_answer_and_says_so(tmp_path):
    text = _page(tmp_path, UNSTABLE, StatisticsSettings(failures="exclude"))
    pairs = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv")
    assert pairs.n_a[0] == 6 and pairs.p_holm[0] < 0.05
    assert pairs.p_value[0] == pytest.approx(sps.mannwhitneyu([20.0] * 6, [22.0] * 10, method="exact").pvalue, rel=0.5)
    assert "**unstable** has the best FID" in text and "**failed trials are left out**" in text


def test_a_set_up_whose_trials_all_failed_is_ranked_last_not_dropped(tmp_path):
    text = _page(tmp_path, {"broken": [NAN] * 5, "a": [5.0, 6.0, 7.0, 8.0, 9.0], "b": [6.5, 7.5, 8.5, 9.5, 10.5]})
    rows = [line.split("|")[1:4] for line in text.split("## FID")[1].splitlines() if line.startswith("| ")][1:]
    assert [row[1].strip() for row in rows] == ["a", "b", "broken"]
    assert rows[2][2].strip() == "5 (5 failed: 5 NaN)"
    pairs = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv").set_index(["setup_a", "setup_b"])
    # 5 against 5 with every trial of a better: the exact test's smallest p, 2 / C(10, 5).
    assert pairs.loc[("broken", "a"), "p_value"] == pytest.approx(2 / 252)
    assert pairs.loc[("broken", "a"), "better"] == "a"


def test_infinite_outcomes_follow_the_metric_direction():
    assert outcomes([1.0, NAN, INF, -INF], higher=False).tolist() == [1.0, INF, INF, INF]
    assert outcomes([1.0, NAN, INF], higher=True).tolist() == [1.0, -INF, -INF]
    assert outcomes([1.0, NAN, INF], higher=True, failures="exclude").tolist() == [1.0]
    with pytest.raises(ValueError, match="statistics.failures 'drop' is not one of worst, exclude"):
        outcomes([1.0], True, "drop")
    # A diverged IS ranks below every finite IS.
    pairs = pairwise_table(_frame({"a": [3.0, 4.0, INF], "b": [2.0, 2.5, 2.7]}, "isc"), "isc", ["a", "b"])
    assert pairs.a12[0] == pytest.approx(6 / 9)


def test_the_headline_names_a_set_up_that_no_other_beats(tmp_path):
    # Issue 83: A has the highest mean probability of beating the others, but B beats A significantly.
    values = {"A": [20.0] * 50, "B": [19.0] * 33 + [200.0] * 17, "C": [100.0] * 50}
    text = _page(tmp_path, values, StatisticsSettings(test="asymptotic"))
    pairs = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv").set_index(["setup_a", "setup_b"])
    assert pairs.loc[("A", "B"), "better"] == "B" and pairs.loc[("A", "B"), "p_holm"] < 0.05
    summary = pd.read_csv(tmp_path / "tables" / "summary_fid.csv").set_index("setup")
    assert summary.superiority.idxmax() == "A"
    headline = text.splitlines()[2]
    assert headline.startswith("**B** has the best FID (lower is better): it is significantly better than every other")
    assert "A ranks highest on average" in headline and "loses to B significantly" in headline
    assert "**A** ranks first" not in text


def test_a_cycle_of_significant_wins_names_no_best(tmp_path):
    # Efron-like dice: each beats the next with probability 5/9; 600 trials each make every win significant.
    faces = {"A": [2.0, 4.0, 9.0], "B": [1.0, 6.0, 8.0], "C": [3.0, 5.0, 7.0]}
    values = {name: sides * 200 for name, sides in faces.items()}
    text = _page(tmp_path, values, StatisticsSettings(test="asymptotic"))
    pairs = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv")
    assert (pairs.p_holm < 0.05).all()
    headline = text.splitlines()[2]
    assert headline.startswith("No single best in FID (lower is better): every set-up loses a significant test")
    # Lower is better: B beats A, A beats C and C beats B, each in 5 of 9 pairs of faces.
    for win in ("B over A", "A over C", "C over B"):
        assert win in headline


def test_magnitude_words_and_a12_intervals_only_where_the_test_agrees(tmp_path):
    # Issue 83: 3 against 3, completely separated: A12 = 1, exact p = 0.1, Holm over 1 pair 0.1.
    text = _page(tmp_path, {"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0]})
    pairs = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv")
    assert pairs.p_holm[0] == pytest.approx(0.1) and pairs.effect[0] == "–"
    assert np.isnan(pairs.a12_low[0]) and "no A12 interval" in pairs.note[0]
    assert "(large)" not in text and "large" not in text.split("## FID")[1]
    # Over every split of 6 distinct values into 3 and 3 (the exact null), an interval shown never leaves out
    # 0.5: the test cannot reject there. Newcombe's own interval would in 2 of 20 splits (10%).
    shown = unshown_exclusions = 0
    for first in combinations(range(6), 3):
        x = np.array(first, float)
        y = np.array([v for v in range(6) if v not in first], float)
        low, high = a12_interval(x, y)
        excluded = low > 0.5 or high < 0.5
        if agrees_with_test(low, high, rank_test(x, y).p):
            shown += excluded
        else:
            unshown_exclusions += excluded
    assert shown == 0 and unshown_exclusions == 2


def test_the_reproduction_direction_is_the_rank_tests():
    # Issue 83: a's mean is lower (one lucky trial), but b beats a in 90% of the pairs; the p is that test's.
    scores = _frame({"a": [10.0] * 9 + [0.1], "b": [9.5] * 10})
    refs = {
        s: {"fid": {"source": "p", "mean": m, "sd": 1.0, "trials": 10, "comparable": False}}
        for s, m in (("a", 5.0), ("b", 6.0))
    }
    row = direction_table(scores, refs, ["a", "b"]).iloc[0]
    assert row.ours_better == "b" and row.paper_better == "a" and row.agree == "no"
    assert row.ours_p == pytest.approx(rank_test([10.0] * 9 + [0.1], [9.5] * 10).p)


def test_the_mean_table_says_where_its_order_is_not_the_tests(tmp_path):
    _page(tmp_path, {"a": [10.0] * 9 + [0.1], "b": [9.5] * 10})
    results = (tmp_path / "tables" / "results.md").read_text()
    assert "fid: the means order the set-ups a, b; the rank tests' order (failed trials counted) is b, a" in results


@pytest.mark.parametrize(
    "draw, median",
    [
        (lambda rng, n: np.exp(rng.normal(np.log(20), 0.5, n)), 20.0),
        # 1 trial in 10 collapses to about 200: a shape where the geometric mean's t-interval covered 41-65%.
        (lambda rng, n: np.where(rng.random(n) < 0.1, rng.normal(200, 10, n), rng.normal(20, 1, n)), None),
    ],
)
def test_the_median_interval_covers_at_its_level_on_skewed_and_collapse_shaped_scores(draw, median):
    rng = np.random.default_rng(7)
    truth = median if median is not None else float(np.median(draw(rng, 2_000_000)))
    for n in (6, 10, 20):
        covered = [low <= truth <= high for low, high in (median_interval(draw(rng, n)) for _ in range(2000))]
        # At least 95% (order statistics are conservative), less 3 Monte Carlo standard errors.
        assert np.mean(covered) >= 0.95 - 3 * np.sqrt(0.05 * 0.95 / 2000), n


def test_the_summary_interval_is_the_medians_with_failures_ranked_worst():
    table = summary_table(_frame({"a": [3.0, 1.0, 2.0, 5.0, 4.0, NAN, 6.0, 7.0, 8.0, INF]}), "fid", ["a"])
    # 10 outcomes, the 2 failures highest: the 2nd and 9th of 1..8, inf, inf.
    assert (table.median_low[0], table.median_high[0]) == (2.0, INF) and table["median"][0] == 5.5


def _lognormal(rng, n, shift):
    return np.exp(rng.normal(np.log(20) + shift, 0.5, n))


def _collapsing(rng, n, shift):
    # One trial in five collapses to an FID ten times the rest.
    return np.where(rng.random(n) < 0.2, rng.normal(200, 10, n), rng.normal(20 + shift, 1, n))


@pytest.mark.parametrize(
    "draw_a, draw_b",
    [
        (lambda r, n: _lognormal(r, n, 0.3), lambda r, n: _lognormal(r, n, 0.0)),
        (lambda r, n: _collapsing(r, n, 0.0), lambda r, n: r.normal(21, 1, n)),
        (lambda r, n: _collapsing(r, n, 0.0), lambda r, n: _collapsing(r, n, 1.0)),
    ],
    ids=["lognormal", "one collapses", "both collapse"],
)
def test_the_a12_and_shift_intervals_cover_what_they_estimate(draw_a, draw_b):
    # A12's target: P(a > b); the shift's: the median of a - b over all pairs (the Hodges-Lehmann estimand).
    rng = np.random.default_rng(3)
    a, b = draw_a(rng, 3000), draw_b(rng, 3000)
    a12_truth = float(np.mean(a[:, None] > b[None, :]))
    shift_truth = float(np.median(a[:, None] - b[None, :]))
    a12_hits, shift_hits = [], []
    for _ in range(800):
        x, y = draw_a(rng, 10), draw_b(rng, 10)
        low, high = a12_interval(x, y)
        a12_hits.append(low <= a12_truth <= high)
        _, low, high = shift_interval(x, y)
        shift_hits.append(low <= shift_truth <= high)
    # 95% each, less 3 Monte Carlo standard errors (0.023).
    assert np.mean(a12_hits) >= 0.927 and np.mean(shift_hits) >= 0.927, (np.mean(a12_hits), np.mean(shift_hits))


def test_the_box_plot_draws_the_finite_scores_and_counts_the_failed(tmp_path, monkeypatch):
    from ganstudy.report import figures

    _frame(UNSTABLE).to_csv(tmp_path / "scores.csv", index=False)
    drawn = []
    monkeypatch.setattr(figures, "_save", lambda figure, path: drawn.append(figure))
    figures.box_plot(tmp_path / "scores.csv", "fid", list(UNSTABLE), tmp_path / "box.png")
    axes = drawn[0].axes[0]
    assert [tick.get_text() for tick in axes.get_xticklabels()] == ["unstable\n(4 of 10 failed)", "stable"]
    # The unstable box is drawn from its 6 finite scores (a NaN would leave it empty): its median line at 20.
    medians = [line.get_ydata()[0] for line in axes.lines if line.get_label() == "_nolegend_"]
    assert np.isfinite(axes.get_ylim()).all() and 20.0 in medians


def test_a_study_of_one_set_up_compares_nothing_and_says_so(tmp_path):
    text = _page(tmp_path, {"only": [20.0, 21.0, 19.5, 22.0, 20.5]})
    assert "**only** is the study's only set-up: its FID has no other to compare with." in text
    assert "probability nan" not in text
