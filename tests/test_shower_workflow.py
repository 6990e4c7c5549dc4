"""A shrunken calo3d study through the workflow: 3DGAN's HDF5 shower files in, trained data-parallel on
1 and 2 ranks, scored with the showers' physics without a classifier, the scaling tables, the shower
figure and the report."""

import json

import h5py
import numpy as np
import pandas as pd
import pytest

from test_workflow import report_captions, snakemake

pytestmark = pytest.mark.workflow

METRICS = ["sf_mean", "sf_width", "longitudinal", "transverse_x", "transverse_y", "gan3d"]


def shower_files(root):
    """Two files of 15 showers (5x5x7 cells, GeV) whose deposited energy is 2% of the primary energy."""
    root.mkdir()
    rng = np.random.default_rng(11)
    for name in ("EleEscan_1_1.h5", "EleEscan_1_2.h5"):
        energy = rng.uniform(10, 500, 15)
        cells = rng.exponential(1.0, (15, 5, 5, 7))
        with h5py.File(root / name, "w") as handle:
            handle["ECAL"] = cells / cells.sum(axis=(1, 2, 3), keepdims=True) * 0.02 * energy[:, None, None, None]
            handle["target"] = np.stack([np.zeros(15), energy], axis=1)
    return root


def test_a_calo3d_study_runs_end_to_end_without_a_classifier(tmp_path, env):
    setup = {
        "mode": "data_parallel",
        "network": "calo3d",
        "iterations": 2,
        "batch_size": 4,
        "latent_dim": 4,
        "hidden_units": 2,
        "score_period": 1,
        "score_samples": 6,
        "checkpoint_period": 1,
    }
    config = {
        "study": "showers",
        "trials": 2,
        "dataset": {"name": "calorimeter", "path": str(shower_files(tmp_path / "calorimeter")), "test_fraction": 0.2},
        "setups": {"one": {**setup, "ranks": 1}, "two": {**setup, "ranks": 2}},
        "evaluation": {
            "metrics": METRICS,
            "batch_size": 4,
            "energy_bins": [0, 600],
            "gan3d_energies": [255],
            "gan3d_half_width": 250,
        },
        "compute": {"max_ranks": 2},
    }
    done = snakemake(tmp_path, config, "--cores", "2", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "results" / "showers"
    assert not (out / "classifier").exists() and not (out / "tables" / "anova.csv").exists()
    manifest = json.loads((out / "data" / "manifest.json").read_text())
    assert (
        manifest["image_shape"] == [1, 5, 5, 7]
        and manifest["condition_shape"] == [1]
        and manifest["files"]["test"]["images"] == 6
    )
    scores = pd.read_csv(out / "scores.csv")
    # gan3d's two parts are columns of their own.
    assert (
        set(scores.metric) == {*METRICS, "gan3d_moments", "gan3d_profiles"}
        and len(scores) == 2 * 2 * 8
        and (scores.value >= 0).all()
    )
    record = json.loads((out / "scores" / "two" / "trial0.json").read_text())
    assert (
        record["showers"] == 6
        and record["energy_bins"][0]["showers"] == 6
        and len(record["profiles"]["longitudinal"]["real"]) == 7
    )
    # 3DGAN's own metric beside ours: one bin of all 6 test showers, its parts in the record.
    assert [row["showers"] for row in record["gan3d_bins"]] == [6]
    assert record["scores"]["gan3d"] == record["scores"]["gan3d_moments"] + record["scores"]["gan3d_profiles"]
    run = json.loads((out / "runs" / "two" / "trial0" / "run.json").read_text())
    assert run["world_size"] == 2 and "energy_loss_weights" in run["settings"] and "l1_weight" not in run["settings"]
    # The in-training physics score on the 6 held-out events, every iteration, feeds the convergence check.
    losses = pd.read_csv(out / "runs" / "two" / "trial0" / "losses.csv")
    assert losses.showers.notna().all() and (losses.showers > 0).all()
    convergence = pd.read_csv(out / "convergence.csv").set_index("setup")
    assert set(convergence.score) == {"showers"} and list(convergence.trials) == [2, 2]
    # Seed 003's table: the 2-rank run against the 1-rank run of the same work.
    timing = pd.read_csv(out / "tables" / "timing.csv").set_index("setup")
    assert timing.loc["two", "baseline"] == "one" and timing.loc["two", "efficiency"] > 0
    assert list(pd.read_csv(out / "tables" / "summary_sf_mean.csv").trials) == [2, 2]
    for name in ("showers.png", "box_longitudinal.png", "samples.png", "speedup.png"):
        assert (out / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    captions = report_captions(tmp_path, config, env)
    assert "3DGAN's validation plots" in captions["results/showers/figures/showers.png"]


def test_scores_that_showers_cannot_give_stop_the_dag(tmp_path, env):
    config = {
        "dataset": {"name": "calorimeter", "path": str(shower_files(tmp_path / "calorimeter"))},
        "setups": {"one": {"mode": "single", "network": "calo3d"}},
        "evaluation": {"metrics": ["fid"]},
    }
    done = snakemake(tmp_path, config, "-n", env=env)
    assert (
        done.returncode != 0
        and "evaluation.metrics ['fid'] do not score calorimeter showers" in done.stdout + done.stderr
    )
    config["evaluation"]["metrics"] = ["sf_mean"]
    done = snakemake(tmp_path, config, "-n", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
