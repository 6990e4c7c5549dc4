import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from ganstudy.stats.aggregate import aggregate_scores
from ganstudy.stats.summary import markdown_table, pvalue_matrix, summary_table, write_stats
from ganstudy.stats.tests import ranksum_pvalue


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
            rows.append({"study": "s", "setup": setup, "trial": trial, "metric": "fid", "value": v, "train_seconds": 60.0 * (trial + 1)})
    return pd.DataFrame(rows), values


def test_summary_table_matches_numpy():
    scores, values = _scores()
    table = summary_table(scores, "fid", ["a", "b", "c"]).set_index("setup")
    a = np.array(values["a"])
    assert table.loc["a", "trials"] == 4
    assert table.loc["a", "mean"] == pytest.approx(a.mean())
    assert table.loc["a", "sd"] == pytest.approx(a.std(ddof=1))
    assert (table.loc["a", "min"], table.loc["a", "max"], table.loc["a", "median"]) == (10.0, 13.0, 11.5)
    assert table.loc["a", "mean_train_minutes"] == pytest.approx(2.5)
    assert math.isnan(table.loc["c", "sd"])  # one trial has no spread


def test_pvalue_matrix_is_the_upper_triangle_in_setup_order():
    scores, values = _scores()
    matrix = pvalue_matrix(scores, "fid", ["a", "b", "c"])
    assert list(matrix.index) == ["a", "b"] and list(matrix.columns) == ["b", "c"]
    assert matrix.loc["a", "b"] == pytest.approx(sps.mannwhitneyu(values["a"], values["b"], method="asymptotic").pvalue)
    assert math.isnan(matrix.loc["b", "b"])


def test_markdown_table_formats_numbers_and_missing_values():
    text = markdown_table(pd.DataFrame({"setup": ["a"], "p": [3.0217e-11], "sd": [float("nan")]}))
    assert text.splitlines() == ["| setup | p | sd |", "|---|---|---|", "| a | 3.022e-11 | – |"]


def test_aggregate_and_write_stats(tmp_path):
    paths = []
    for setup, fids in {"x": [1.0, 2.0, 3.0], "y": [4.0, 5.0, 6.0]}.items():
        for trial, fid in enumerate(fids):
            path = tmp_path / f"{setup}{trial}.json"
            path.write_text(json.dumps({"setup_name": setup, "trial": trial, "train_seconds": 30.0, "scores": {"fid": fid, "isc": 10 - fid}}))
            paths.append(path)
    table = aggregate_scores("demo", paths, tmp_path / "scores.csv")
    assert len(table) == 12 and list(table.columns) == ["study", "setup", "trial", "metric", "value", "train_seconds"]
    written = write_stats(tmp_path / "scores.csv", ["x", "y"], ["fid", "isc"], tmp_path / "tables")
    assert sorted(p.name for p in written) == sorted(
        f"{kind}_{m}.{ext}" for kind in ("summary", "pvalues") for m in ("fid", "isc") for ext in ("csv", "md")
    )
    summary = pd.read_csv(tmp_path / "tables" / "summary_fid.csv")
    assert list(summary.setup) == ["x", "y"] and list(summary["mean"]) == [2.0, 5.0]
    assert "lower is better" in (tmp_path / "tables" / "summary_fid.md").read_text()
    assert "higher is better" in (tmp_path / "tables" / "summary_isc.md").read_text()
    pvalues = pd.read_csv(tmp_path / "tables" / "pvalues_fid.csv", index_col=0)
    assert pvalues.loc["x", "y"] == pytest.approx(sps.mannwhitneyu([1, 2, 3], [4, 5, 6], method="asymptotic").pvalue)
