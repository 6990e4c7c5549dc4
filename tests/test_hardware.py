"""The hardware each trial trained on (issue 82): a label per float path in run.json and scores.csv, and the
tables' and answer page's warning where set-ups trained on other kinds in unequal shares."""

from __future__ import annotations

import json
import os
import subprocess

import pandas as pd
import pytest
import torch

from ganstudy.core.provenance import float_path
from ganstudy.report.summary_page import write_summary
from ganstudy.stats.aggregate import aggregate_scores
from ganstudy.stats.convergence import COLUMNS
from ganstudy.stats.hardware import NOT_RECORDED, hardware_notes, unequal_pairs
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.stats.summary import write_stats

AMD = "AMD EPYC (AuthenticAMD family 25 model 17), ATen AVX512, MKL_CBWR auto"
XEON = "Intel(R) Xeon(R) Platinum (GenuineIntel family 6 model 143), ATen AVX512, MKL_CBWR auto"


def test_a_float_path_names_the_cpu_aten_s_kernels_and_mkl_s_branch(monkeypatch):
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True, env={**os.environ, "LC_ALL": "C"})
    facts = dict(line.split(":", 1) for line in lscpu.stdout.splitlines() if ":" in line)
    monkeypatch.delenv("MKL_CBWR", raising=False)
    label = float_path(["cpu"])
    assert label == (
        f"{facts['Model name'].strip()} ({facts['Vendor ID'].strip()} family {facts['CPU family'].strip()} model "
        f"{facts['Model'].strip()}), ATen {torch.backends.cpu.get_cpu_capability()}, MKL_CBWR auto"
    )
    # MKL's generic kernels are another float path of the same code on the same CPU (docs/results.md).
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    assert float_path(["cpu"]) == label.replace("MKL_CBWR auto", "MKL_CBWR COMPATIBLE")
    # A rank that trained on GPUs: their models (a rank of two GPUs names both once each).
    assert float_path(["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"]) == "NVIDIA H100 80GB HBM3"


def _scores(hardware: dict[str, list[str | None]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"setup": setup, "trial": trial, "metric": metric, "value": 1.0, "hardware": label}
            for setup, labels in hardware.items()
            for trial, label in enumerate(labels)
            for metric in ("fid", "isc")
        ]
    )


def test_one_kind_is_named_once_and_equal_shares_are_no_warning():
    lines, pairs = hardware_notes(_scores({"a": [AMD] * 3, "b": [AMD] * 4}), ["a", "b"])
    assert lines == [f"Trained on: {AMD}."] and pairs == []
    # Half of each set-up on each kind: the kinds add spread, not a difference between the set-ups.
    lines, pairs = hardware_notes(_scores({"a": [AMD, XEON] * 2, "b": [XEON, AMD] * 3}), ["a", "b"])
    assert lines == [
        f"Hardware A: {AMD}.",
        f"Hardware B: {XEON}.",
        "Trials per hardware: a 2 on A, 2 on B; b 3 on B, 3 on A.",
    ]
    assert pairs == []
    # Scores from before ganstudy recorded the hardware (no column, or an empty cell) say so.
    assert hardware_notes(_scores({"a": [None] * 2}).drop(columns="hardware"), ["a"])[0] == [
        f"Trained on: {NOT_RECORDED}."
    ]


def test_unequal_shares_are_found_by_proportion_not_by_count():
    shares = {"a": {AMD: 2, XEON: 2}, "b": {AMD: 3, XEON: 3}, "c": {AMD: 4, XEON: 1}, "d": {AMD: 5}}
    assert unequal_pairs(shares) == [("a", "c"), ("a", "d"), ("b", "c"), ("b", "d"), ("c", "d")]


def _score_files(tmp_path, hardware: dict[str, list[str]], fids: dict[str, list[float]]) -> list:
    paths = []
    for setup, labels in hardware.items():
        for trial, (label, fid) in enumerate(zip(labels, fids[setup])):
            path = tmp_path / f"{setup}{trial}.json"
            record = {"setup_name": setup, "trial": trial, "train_seconds": 30.0, "scores": {"fid": fid}}
            path.write_text(json.dumps({**record, "hardware": label}))
            paths.append(path)
    return paths


def test_tables_and_the_answer_page_warn_where_set_ups_trained_on_hardware_in_unequal_shares(tmp_path):
    # The default study's case (docs/results.md): the 2x2's trials on a Xeon, the 1x1's on AMD EPYC; the 2x2's
    # FIDs all above the 1x1's, which an unwarned page would call the set-ups' difference.
    hardware = {"grid1x1": [AMD] * 4, "grid2x2": [XEON] * 3 + [AMD], "grid3x3": [AMD] * 4}
    fids = {"grid1x1": [2.0, 2.5, 3.0, 3.5], "grid2x2": [5.0, 5.5, 6.0, 6.5], "grid3x3": [2.2, 2.7, 3.2, 3.7]}
    aggregate_scores("s", _score_files(tmp_path, hardware, fids), tmp_path / "scores.csv")
    scores = pd.read_csv(tmp_path / "scores.csv")
    assert list(scores.hardware) == [AMD] * 4 + [XEON] * 3 + [AMD] * 5
    setups = list(hardware)
    write_stats(tmp_path / "scores.csv", setups, ["fid"], tmp_path / "tables", StatisticsSettings(min_trials=1))
    warning = (
        "WARNING: set-ups trained on 2 kinds of hardware in unequal shares (grid1x1 vs grid2x2, grid2x2 vs grid3x3)"
    )
    table = (tmp_path / "tables" / "pairs_fid.md").read_text()
    assert f"Hardware A: {AMD}." in table and f"Hardware B: {XEON}." in table and warning in table
    assert "Trials per hardware: grid1x1 4 on A; grid2x2 3 on B, 1 on A; grid3x3 4 on A." in table
    notes = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv").set_index(["setup_a", "setup_b"]).note.fillna("")
    uneven = "trained on other hardware in unequal shares (see the warning)"
    assert notes[("grid1x1", "grid2x2")] == notes[("grid2x2", "grid3x3")] == uneven
    assert notes[("grid1x1", "grid3x3")] == ""
    pd.DataFrame([{"setup": s, "converged": "yes"} for s in setups], columns=COLUMNS).to_csv(
        tmp_path / "convergence.csv", index=False
    )
    page = write_summary(tmp_path, "s", setups, ["fid"], [], tmp_path / "summary.md")
    # In bold before the first metric's verdict, with the kinds it names.
    before = page.split("## FID")[0]
    assert f"**{warning}" in before and f"Hardware B: {XEON}." in before


@pytest.mark.parametrize("labels", [[AMD] * 4, [AMD, XEON, AMD, XEON]])
def test_an_evenly_spread_study_s_page_names_its_hardware_without_a_warning(tmp_path, labels):
    hardware = {"a": labels, "b": labels[::-1]}
    fids = {"a": [2.0, 2.5, 3.0, 3.5], "b": [5.0, 5.5, 6.0, 6.5]}
    aggregate_scores("s", _score_files(tmp_path, hardware, fids), tmp_path / "scores.csv")
    write_stats(tmp_path / "scores.csv", ["a", "b"], ["fid"], tmp_path / "tables", StatisticsSettings(min_trials=1))
    pd.DataFrame([{"setup": s, "converged": "yes"} for s in "ab"], columns=COLUMNS).to_csv(
        tmp_path / "convergence.csv", index=False
    )
    page = write_summary(tmp_path, "s", ["a", "b"], ["fid"], [], tmp_path / "summary.md")
    assert "WARNING" not in page and AMD in page.split("## FID")[0]
