import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from ganstudy.stats.aggregate import aggregate_scores
from ganstudy.stats.hardware import NOT_RECORDED as HARDWARE_NOT_RECORDED
from ganstudy.stats.protocol import NOT_RECORDED, protocol_text
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.stats.summary import (
    kruskal_table,
    latex_table,
    markdown_table,
    pairwise_table,
    pvalue_matrix,
    results_table,
    summary_table,
    write_stats,
)
from ganstudy.stats.tests import a12, a12_magnitude, holm, kruskal_wallis, ranksum_pvalue


def _hand_ranksum(x, y):
    """Normal approximation of U with tie and continuity corrections, written out from the textbook."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n1, n2 = len(x), len(y)
    ranks = sps.rankdata(np.concatenate([x, y]))
    u1 = ranks[:n1].sum() - n1 * (n1 + 1) / 2
    n = n1 + n2
    _, ties = np.unique(np.concatenate([x, y]), return_counts=True)
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - (ties**3 - ties).sum() / (n * (n - 1))))
    z = (abs(u1 - n1 * n2 / 2) - 0.5) / sigma
    return 2 * sps.norm.sf(z)


@pytest.mark.parametrize(
    "n1, n2, thesis",
    # Seed 002, table 4.5 (MNIST 4LP, 30/30/15/8 trials) and table 4.7 (6 trials): fully separated groups.
    [(30, 30, 3.02e-11), (30, 15, 6.46e-8), (30, 8, 1.88e-5), (6, 6, 5.07e-3)],
)
def test_ranksum_reproduces_the_thesis_tables_for_separated_groups(n1, n2, thesis):
    low, high = np.arange(n1) / 10.0, 100 + np.arange(n2) / 10.0
    assert ranksum_pvalue(low, high) == pytest.approx(thesis, rel=5e-3)


def test_ranksum_matches_a_hand_computation_on_tied_data():
    x = [1.0, 2.0, 2.0, 3.0, 5.0, 5.0, 5.0]
    y = [2.0, 4.0, 5.0, 6.0, 6.0, 7.0]
    ours = ranksum_pvalue(x, y)
    assert ours == pytest.approx(_hand_ranksum(x, y), rel=1e-12)
    assert ours == pytest.approx(sps.mannwhitneyu(x, y, method="asymptotic").pvalue, rel=1e-12)
    # scipy's ranksums has no tie correction: a different (wrong for the thesis) number.
    assert abs(ours - sps.ranksums(x, y).pvalue) > 1e-3


def test_ranksum_of_an_empty_group_is_nan():
    assert math.isnan(ranksum_pvalue([], [1.0, 2.0]))


def _scores():
    rows = []
    values = {"a": [10.0, 12.0, 11.0, 13.0], "b": [20.0, 22.0, 21.0, 19.0], "c": [15.0]}
    for setup, vals in values.items():
        for trial, v in enumerate(vals):
            rows.append(
                {
                    "study": "s",
                    "setup": setup,
                    "trial": trial,
                    "metric": "fid",
                    "value": v,
                    "train_seconds": 60.0 * (trial + 1),
                }
            )
    return pd.DataFrame(rows), values


def test_summary_table_matches_numpy():
    scores, values = _scores()
    table = summary_table(scores, "fid", ["a", "b", "c"]).set_index("setup")
    a = np.array(values["a"])
    # Every trial of a beats every one of b and c's one: superiority 1; b loses to both, 0.
    assert table.superiority.tolist() == [1.0, 0.0, 0.5]
    assert table.loc["a", "trials"] == 4
    assert table.loc["a", "mean"] == pytest.approx(a.mean())
    assert table.loc["a", "sd"] == pytest.approx(a.std(ddof=1))
    assert (table.loc["a", "min"], table.loc["a", "max"], table.loc["a", "median"]) == (10.0, 13.0, 11.5)
    assert table.loc["a", "mean_train_minutes"] == pytest.approx(2.5)
    assert math.isnan(table.loc["c", "sd"])  # one trial has no spread
    # 4 trials have no distribution-free 95% interval of the median (all 4 on one side: 2 / 16 > 0.05).
    assert math.isnan(table.loc["a", "median_low"]) and math.isnan(table.loc["c", "median_high"])
    assert (table.loc["a", "failed"], table.loc["a", "failure_rate"]) == (0, 0.0)
    # 10 trials: P(Binomial(10, 1/2) <= 1) = 0.0107 <= 0.025 < P(<= 2) = 0.0547, so the 2nd and 9th values.
    ten = summary_table(_frame({"t": [9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0, 10.0]}), "fid", ["t"])
    assert sps.binom.cdf(1, 10, 0.5) <= 0.025 < sps.binom.cdf(2, 10, 0.5)
    assert (ten.median_low[0], ten.median_high[0]) == (2.0, 9.0)


def test_pvalue_matrix_is_the_upper_triangle_in_setup_order():
    scores, values = _scores()
    matrix = pvalue_matrix(pairwise_table(scores, "fid", ["a", "b", "c"]), ["a", "b", "c"])
    assert list(matrix.index) == ["a", "b"] and list(matrix.columns) == ["b", "c"]
    # 4 against 4 trials: the exact test (auto), 2 / C(8, 4).
    assert matrix.loc["a", "b"] == pytest.approx(sps.mannwhitneyu(values["a"], values["b"], method="exact").pvalue)
    assert math.isnan(matrix.loc["b", "b"])


def test_a_pair_with_a_nan_score_keeps_its_p_value_in_the_matrix(tmp_path):
    # Issue 66: the matrix took every score, NaN included, and left the pair out ("–") while the pairs table tested it.
    scores = _frame({"a": [1.0, 2.0, 3.0, float("nan")], "b": [4.0, 5.0, 6.0, 7.0]})
    scores.to_csv(tmp_path / "scores.csv", index=False)
    write_stats(tmp_path / "scores.csv", ["a", "b"], ["fid"], tmp_path / "tables")
    matrix = pd.read_csv(tmp_path / "tables" / "pvalues_fid.csv", index_col=0)
    pairs = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv")
    # The NaN trial failed: it ranks worse (higher FID) than every finite score.
    worst = sps.mannwhitneyu([1, 2, 3, np.inf], [4, 5, 6, 7], method="exact").pvalue
    assert matrix.loc["a", "b"] == pytest.approx(worst) == pytest.approx(2 * 12 / 70)  # U = 4: 12 of 70 splits
    assert matrix.loc["a", "b"] == pairs.p_value[0] and pairs.n_a[0] == 4


def test_markdown_table_formats_numbers_and_missing_values():
    text = markdown_table(pd.DataFrame({"setup": ["a"], "p": [3.0217e-11], "sd": [float("nan")]}))
    assert text.splitlines() == ["| setup | p | sd |", "|---|---|---|", "| a | 3.022e-11 | – |"]


def test_aggregate_and_write_stats(tmp_path):
    paths = []
    for setup, fids in {"x": [1.0, 2.0, 3.0], "y": [4.0, 5.0, 6.0]}.items():
        for trial, fid in enumerate(fids):
            path = tmp_path / f"{setup}{trial}.json"
            path.write_text(
                json.dumps(
                    {
                        "setup_name": setup,
                        "trial": trial,
                        "train_seconds": 30.0,
                        "scores": {"fid": fid, "isc": 10 - fid},
                    }
                )
            )
            paths.append(path)
    table = aggregate_scores("demo", paths, tmp_path / "scores.csv")
    assert len(table) == 12 and list(table.columns) == [
        "study",
        "setup",
        "trial",
        "metric",
        "value",
        "train_seconds",
        "ranks",
        "cores_per_rank",
        "gpus_per_rank",
        "grid",
        "hardware",
        "protocol",
    ]
    # Records that do not say what a rank held (ganstudy before 2026-12) count one core and no GPU.
    assert set(table.cores_per_rank) == {1} and set(table.gpus_per_rank) == {0}
    assert set(table.hardware) == {HARDWARE_NOT_RECORDED}
    assert set(table.protocol) == {NOT_RECORDED}
    written = write_stats(tmp_path / "scores.csv", ["x", "y"], ["fid", "isc"], tmp_path / "tables")
    assert sorted(p.name for p in written) == sorted(
        [
            f"{kind}_{m}.{ext}"
            for kind in ("summary", "pvalues", "pairs")
            for m in ("fid", "isc")
            for ext in ("csv", "md", "tex")
        ]
        + [f"{name}.{ext}" for name in ("kruskal", "results") for ext in ("csv", "md", "tex")]
    )
    summary = pd.read_csv(tmp_path / "tables" / "summary_fid.csv")
    assert list(summary.setup) == ["x", "y"] and list(summary["mean"]) == [2.0, 5.0]
    assert "lower is better" in (tmp_path / "tables" / "summary_fid.md").read_text()
    assert "higher is better" in (tmp_path / "tables" / "summary_isc.md").read_text()
    pvalues = pd.read_csv(tmp_path / "tables" / "pvalues_fid.csv", index_col=0)
    assert pvalues.loc["x", "y"] == pytest.approx(sps.mannwhitneyu([1, 2, 3], [4, 5, 6], method="exact").pvalue)


def _scored(protocol: dict | None, **settings) -> dict:
    return {
        "protocol": protocol,
        "settings": {"kid_subsets": 100, "kid_subset_size": 1000, **settings},
        "versions": {"torch-fidelity": "0.4.0"},
    }


CLASSIFIER = {
    "kind": "classifier",
    "sha256": "ab" * 32,
    "layers": ["logits"],
    "input": "8x8 uint8 as generated, no resize, scaled to [-1, 1]",
    "dtype": "float32",
}
INCEPTION = {
    "kind": "inception",
    "sha256": "cd" * 32,
    "layers": ["2048", "logits_unbiased"],
    "input": "8x8 uint8 resized to 299x299",
    "dtype": "float32",
}


def test_a_score_s_protocol_names_what_its_metric_read():
    both = _scored(
        {
            "generated": 2000,
            "real": 1437,
            "real_split": "train",
            "extractors": {"quality": INCEPTION, "classifier": CLASSIFIER},
        }
    )
    fid = protocol_text(both, "fid")
    assert fid == (
        "Inception-v3 (sha256 cdcdcdcdcdcd) layer 2048/logits_unbiased, 8x8 uint8 resized to 299x299, float32; "
        "2000 generated vs 1437 real (train split); torch-fidelity 0.4.0"
    )
    # class_fid reads the classifier only; kid_std is kid's column and says kid's settings.
    assert protocol_text(both, "class_fid").startswith(
        "the data set's classifier (sha256 abababababab) layer logits, 8x8 uint8 as generated"
    )
    assert "kid_subsets 100; kid_subset_size 1000; 2000 generated" in protocol_text(both, "kid_std")
    showers = _scored(
        {"generated": 500, "real": 500, "real_split": "test", "extractors": {}}, energy_bins=[0, 100, 500]
    )
    assert protocol_text(showers, "sf_mean") == "energy_bins [0, 100, 500]; 500 generated vs 500 real (test split)"
    assert protocol_text({"scores": {}}, "fid") == NOT_RECORDED


def test_tables_say_the_protocol_and_warn_where_the_scores_compared_were_measured_otherwise(tmp_path):
    paths = []
    for setup, fids in {"x": [1.0, 2.0, 3.0], "y": [4.0, 5.0, 6.0], "z": [2.0, 3.0, 4.0]}.items():
        for trial, fid in enumerate(fids):
            # z's scores were measured on another Inception file (another sha256): not comparable with x's and y's.
            extractor = {**INCEPTION, "sha256": "ef" * 32} if setup == "z" else INCEPTION
            protocol = {"generated": 2000, "real": 1437, "real_split": "train", "extractors": {"quality": extractor}}
            path = tmp_path / f"{setup}{trial}.json"
            path.write_text(
                json.dumps(
                    {
                        "setup_name": setup,
                        "trial": trial,
                        "train_seconds": 30.0,
                        "scores": {"fid": fid},
                        **_scored(protocol),
                    }
                )
            )
            paths.append(path)
    aggregate_scores("demo", paths, tmp_path / "scores.csv")
    write_stats(tmp_path / "scores.csv", ["x", "y"], ["fid"], tmp_path / "alike")
    alike = (tmp_path / "alike" / "summary_fid.md").read_text()
    assert "Protocol: Inception-v3 (sha256 cdcdcdcdcdcd)" in alike and "WARNING" not in alike
    assert r"\footnotesize Protocol: Inception-v3" in (tmp_path / "alike" / "pairs_fid.tex").read_text()
    assert "fid: Protocol: Inception-v3" in (tmp_path / "alike" / "results.md").read_text()
    write_stats(tmp_path / "scores.csv", ["x", "y", "z"], ["fid"], tmp_path / "mixed", StatisticsSettings(min_trials=1))
    mixed = (tmp_path / "mixed" / "pairs_fid.md").read_text()
    assert (
        "Protocol A: Inception-v3 (sha256 cdcdcdcdcdcd)" in mixed
        and "Protocol B: Inception-v3 (sha256 efefefefefef)" in mixed
    )
    assert "WARNING: these fid scores were measured under 2 protocols (set-ups: x A; y A; z B)" in mixed
    pairs = pd.read_csv(tmp_path / "mixed" / "pairs_fid.csv").set_index(["setup_a", "setup_b"]).note.fillna("")
    assert (
        "protocols differ" not in pairs[("x", "y")]
        and pairs[("x", "z")].endswith("protocols differ (A vs B): not comparable")
        and pairs[("y", "z")].endswith("protocols differ (A vs B): not comparable")
    )
    summary = pd.read_csv(tmp_path / "mixed" / "summary_fid.csv").set_index("setup").note
    assert list(summary) == ["protocol A", "protocol A", "protocol B"]


# Hidden ties: equal after rounding only, as scores printed with few digits are.
TIED_A = [41.2, 40.9, 41.2, 39.8, 40.9, 42.0, 41.2]
TIED_B = [40.9, 38.1, 39.8, 39.8, 37.5, 40.9]


def test_holm_matches_statsmodels_and_a_hand_computation():
    from statsmodels.stats.multitest import multipletests

    p = [0.01, 0.04, 0.03, 0.005, 0.5]
    np.testing.assert_allclose(holm(p), multipletests(p, method="holm")[1], rtol=1e-12)
    # By hand: sorted 0.005*5, 0.01*4, 0.03*3, 0.04*2 (raised to the running max 0.09), 0.5*1.
    np.testing.assert_allclose(holm(p), [0.04, 0.09, 0.09, 0.025, 0.5])
    adjusted = holm([0.02, float("nan"), 0.01])
    assert math.isnan(adjusted[1]) and adjusted[0] == pytest.approx(0.02) and adjusted[2] == pytest.approx(0.02)


def test_a12_matches_the_mann_whitney_u_and_a_hand_count():
    u = sps.mannwhitneyu(TIED_A, TIED_B).statistic
    assert a12(TIED_A, TIED_B) == pytest.approx(u / (len(TIED_A) * len(TIED_B)))
    # 3 values against 2: wins (3>1, 3>2, 2>1) = 3, ties (2=2, 1=1) = 2 -> (3 + 2/2) / 6.
    assert a12([3, 2, 1], [1, 2]) == pytest.approx(4 / 6)
    assert [a12_magnitude(v) for v in (0.5, 0.45, 0.62, 0.30, 0.95)] == [
        "negligible",
        "negligible",
        "small",
        "medium",
        "large",
    ]


def test_kruskal_wallis_matches_scipy_and_the_tie_corrected_formula():
    groups = [TIED_A, TIED_B, [36.0, 39.8, 37.5]]
    h, df, p = kruskal_wallis(groups)
    reference = sps.kruskal(*groups)
    assert (h, df) == (pytest.approx(reference.statistic), 2) and p == pytest.approx(reference.pvalue)
    values = np.concatenate(groups)
    ranks = sps.rankdata(values)
    n, start, total = len(values), 0, 0.0
    for g in groups:
        total += ranks[start : start + len(g)].sum() ** 2 / len(g)
        start += len(g)
    _, ties = np.unique(values, return_counts=True)
    by_hand = (12 / (n * (n + 1)) * total - 3 * (n + 1)) / (1 - (ties**3 - ties).sum() / (n**3 - n))
    assert h == pytest.approx(by_hand, rel=1e-12)
    assert math.isnan(kruskal_wallis([[1.0, 1.0], [1.0]])[0])


def _frame(values_by_setup, metric="fid"):
    return pd.DataFrame(
        [
            {"study": "s", "setup": s, "trial": t, "metric": metric, "value": v, "train_seconds": 60.0}
            for s, vals in values_by_setup.items()
            for t, v in enumerate(vals)
        ]
    )


def test_pairs_adjust_over_the_metric_and_say_which_set_up_is_better():
    scores = _frame({"a": TIED_A, "b": TIED_B, "c": [30.0, 31.0, 29.5, 30.5, 31.5]})
    thesis = StatisticsSettings(test="asymptotic", min_trials=6)
    pairs = pairwise_table(scores, "fid", ["a", "b", "c"], thesis).set_index(["setup_a", "setup_b"])
    raw = [
        ranksum_pvalue(TIED_A, TIED_B),
        ranksum_pvalue(TIED_A, scores[scores.setup == "c"].value),
        ranksum_pvalue(TIED_B, scores[scores.setup == "c"].value),
    ]
    assert set(pairs.test) == {"asymptotic"}
    np.testing.assert_allclose(pairs.p_value, raw)
    np.testing.assert_allclose(pairs.p_holm, holm(raw))
    # Lower FID is better: c beats both; a scores higher than b, so b is better.
    assert pairs.loc[("a", "c"), "better"] == "c" and pairs.loc[("a", "b"), "better"] == "b"
    assert pairs.loc[("a", "c"), "a12"] == 1.0 and pairs.loc[("a", "c"), "effect"] == "large"
    assert pairs.loc[("a", "c"), "note"] == "underpowered: c < 6 trials"
    isc = pairwise_table(_frame({"a": [1.0, 2.0], "b": [3.0, 4.0]}, "isc"), "isc", ["a", "b"])
    assert isc.test.tolist() == ["exact"] and isc.p_value[0] == pytest.approx(1 / 3)
    assert isc.better.tolist() == ["b"]  # higher IS is better


def test_problem_set_ups_are_marked_not_fatal():
    scores = _frame({"single": [40.0], "flat": [5.0, 5.0, 5.0], "holes": [1.0, float("nan"), 3.0], "none": []})
    exclude = StatisticsSettings(min_trials=3, failures="exclude")
    summary = summary_table(scores, "fid", ["single", "flat", "holes", "none"], exclude).set_index("setup")
    assert summary.loc["single", "note"] == "underpowered: 1 < 3 trials" and math.isnan(summary.loc["single", "sd"])
    assert summary.loc["flat", "note"] == "constant" and summary.loc["flat", "iqr"] == 0
    assert summary.loc["holes", "trials"] == 3 and summary.loc["holes", "failed"] == 1
    assert "1 failed (1 NaN), left out (statistics.failures = exclude)" in summary.loc["holes", "note"]
    assert summary.loc["holes", "mean"] == 2.0
    assert summary.loc["none", "note"] == "no runs" and summary.loc["none", "trials"] == 0
    pairs = pairwise_table(scores, "fid", ["single", "flat", "holes", "none"], exclude)
    # Identical scores differ in nothing (p = 1), and the note says so rather than "too few scores".
    flat_vs_flat = pairwise_table(_frame({"x": [5.0, 5.0], "y": [5.0, 5.0]}), "fid", ["x", "y"])
    assert (
        flat_vs_flat.p_value[0] == 1.0
        and flat_vs_flat.better[0] == "–"
        and flat_vs_flat.note[0].startswith("all scores identical;")
    )
    assert pairs.set_index(["setup_a", "setup_b"]).loc[("single", "none"), "note"] == (
        "no trials on one side; underpowered: single, none < 3 trials"
    )
    assert math.isnan(kruskal_table(_frame({"x": [5.0, 5.0], "y": [5.0]}), ["fid"], ["x", "y"]).p_value[0])


def test_the_thesis_table_4_5_layout_from_a_scores_csv(tmp_path):
    # Table 4.5's shape: 30/30/15/8 trials of 3x3 .. 18x18 with the thesis's means; separated groups give its p-values.
    trials = {"3x3": (30, 41.23), "6x6": (30, 24.63), "12x12": (15, 19.89), "18x18": (8, 17.20)}
    rows = []
    for setup, (n, mean) in trials.items():
        rows += [
            {
                "study": "thesis",
                "setup": setup,
                "trial": t,
                "metric": "fid",
                "value": mean + (t - (n - 1) / 2) * 0.01,
                "train_seconds": 4800.0,
            }
            for t in range(n)
        ]
    pd.DataFrame(rows).to_csv(tmp_path / "scores.csv", index=False)
    # The thesis's convention (statistics.test: asymptotic) reproduces its published p-values.
    write_stats(
        tmp_path / "scores.csv",
        list(trials),
        ["fid"],
        tmp_path / "tables",
        StatisticsSettings(test="asymptotic", min_trials=8, digits=3),
    )
    matrix = pd.read_csv(tmp_path / "tables" / "pvalues_fid.csv", index_col=0)
    assert list(matrix.index) == ["3x3", "6x6", "12x12"] and list(matrix.columns) == ["6x6", "12x12", "18x18"]
    assert matrix.loc["3x3", "6x6"] == pytest.approx(3.02e-11, rel=5e-3)
    assert matrix.loc["3x3", "12x12"] == pytest.approx(6.46e-8, rel=5e-3)
    assert matrix.loc["6x6", "18x18"] == pytest.approx(1.88e-5, rel=5e-3)
    assert math.isnan(matrix.loc["6x6", "6x6"]) and math.isnan(matrix.loc["12x12", "6x6"])
    markdown = (tmp_path / "tables" / "pvalues_fid.md").read_text()
    # 6.4667e-8 prints as 6.47e-08 at 3 digits (the thesis printed 6.46).
    assert "| 3x3 | 3.02e-11 | 6.47e-08 | 1.88e-05 |" in markdown
    latex = (tmp_path / "tables" / "pvalues_fid.tex").read_text()
    assert r"\toprule" in latex and r"3x3 & 3.02e-11 & 6.47e-08 & 1.88e-05 \\" in latex
    summary = pd.read_csv(tmp_path / "tables" / "summary_fid.csv")
    assert summary.trials.tolist() == [30, 30, 15, 8] and summary["mean"].round(2).tolist() == [
        41.23,
        24.63,
        19.89,
        17.20,
    ]


def test_results_table_is_mean_plus_minus_sd_per_set_up_and_metric():
    rows = [{"setup": "a", "trial": t, "metric": "fid", "value": v} for t, v in enumerate([10.0, 12.0, 14.0])]
    rows += [{"setup": "a", "trial": t, "metric": "isc", "value": v} for t, v in enumerate([2.0, 2.0, np.nan])]
    rows += [{"setup": "b", "trial": 0, "metric": "fid", "value": 7.5}]
    table = results_table(pd.DataFrame(rows), ["fid", "isc"], ["a", "b", "c"], digits=3).set_index("setup")
    # sd of 10, 12, 14 (n-1) is 2; the NaN IS is left out; one trial has no sd; no trial, no value.
    assert table.loc["a", "fid (lower is better)"] == "12 ± 2"
    assert table.loc["a", "isc (higher is better)"] == "2 ± 0 (1 of 3 failed)"
    assert table.loc["b", "fid (lower is better)"] == "7.5 ± –" and table.loc["c", "fid (lower is better)"] == "–"
    latex = latex_table(table.reset_index(), "mean ± sd")
    assert r"a & 12 $\pm$ 2 & 2 $\pm$ 0 (1 of 3 failed) \\" in latex and r"\caption{mean $\pm$ sd}" in latex


def test_scoring_noise_pools_the_trials_sample_set_variances_and_compares_the_trials_means():
    from ganstudy.stats.scoring_noise import comparison_table, noise_lines, noise_table

    # Set-up a: trial 0 scored 1, 3, 2 on its three sample sets, trial 1 scored 2, 2, 2; set-up b is a's plus 10,
    # except for one NaN draw (left out of its trial's variance and mean).
    a = {0: [1.0, 3.0, 2.0], 1: [2.0, 2.0, 2.0]}
    b = {0: [11.0, 13.0, 12.0], 1: [12.0, 12.0, np.nan]}
    draws = pd.DataFrame(
        [
            {"setup": s, "trial": t, "draw": d, "metric": "fid", "value": v}
            for s, trials in (("a", a), ("b", b))
            for t, values in trials.items()
            for d, v in enumerate(values)
        ]
    )
    noise = noise_table(draws, ["fid"], ["a", "b"]).set_index("setup")
    # By hand: a's within-trial variances 1 and 0 (2 degrees of freedom each): pooled sd 1/sqrt(2); its draw-0
    # scores 1 and 2: sd 1/sqrt(2); ratio 1. b's: variances 1 (2 dof) and 0 (1 dof): pooled sqrt(2/3).
    assert noise.loc["a", "scoring_sd"] == pytest.approx(math.sqrt(0.5))
    assert noise.loc["a", "trial_sd"] == pytest.approx(math.sqrt(0.5))
    assert noise.loc["a", "noise_share"] == pytest.approx(1.0)
    assert noise.loc["b", "scoring_sd"] == pytest.approx(math.sqrt(2 / 3))
    assert list(noise.trials) == [2, 2] and list(noise.draws) == [3, 3]
    assert [line.split(",")[0] for line in noise_lines(noise.reset_index(), 100)] == ["a", "b"]
    pairs = comparison_table(draws, ["fid"], ["a", "b"], StatisticsSettings()).iloc[0]
    # Means a: 2, 2; b: 12, 12, one pair in the family. Tied, so exact by permutation: of the 6 ways to split
    # {2, 2, 12, 12} in two pairs, 2 are as separated as these (counted by hand).
    # A12 is the probability that a scores higher: 0, and lower is better in FID.
    assert pairs.p_holm_means == pytest.approx(2 / 6) and pairs.a12_means == 0.0 and pairs.better_means == "a"
    assert pairs.p_holm == pytest.approx(sps.mannwhitneyu([1.0, 2.0], [11.0, 12.0], method="exact").pvalue)
