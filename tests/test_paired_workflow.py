"""A shrunken pix2pix study through the workflow: paired images in, trained in modes single and
data_parallel with an in-training L1 on held-out pairs, scored on the test split's pairs without a
classifier, tables, figures and report."""

import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from test_workflow import report_captions, snakemake

pytestmark = pytest.mark.workflow


def paired_folder(root):
    """pix2pix's layout: train/ and test/ of A|B images, B the mirror image of A in inverted colours."""
    rng = np.random.default_rng(3)
    for folder, count in (("train", 6), ("test", 3)):
        (root / folder).mkdir(parents=True)
        for i in range(count):
            a = np.kron(rng.integers(0, 256, (4, 4, 3)), np.ones((4, 4, 1))).astype(np.uint8)
            Image.fromarray(np.concatenate([a, 255 - a[:, ::-1]], axis=1)).save(root / folder / f"{i}.png")
    return root


def study(tmp_path, weights):
    setup = {
        "network": "pix2pix",
        "iterations": 2,
        "batch_size": 2,
        "hidden_units": 8,
        "score_period": 1,
        "score_samples": 2,
    }
    return {
        "study": "pairs",
        "trials": 2,
        "dataset": {
            "name": "paired_folder",
            "path": str(paired_folder(tmp_path / "facades")),
            "direction": "BtoA",
            "image_size": 16,
        },
        "setups": {"single": {**setup, "mode": "single"}, "dp": {**setup, "mode": "data_parallel", "ranks": 2}},
        "evaluation": {
            "metrics": ["l1", "psnr", "ssim", "fid"],
            "batch_size": 4,
            "extractor": "inception",
            "inception_weights": str(weights),
        },
        "compute": {"max_ranks": 2},
    }


def test_a_pix2pix_study_runs_end_to_end_without_a_classifier(tmp_path, env, stand_in_inception):
    config = study(tmp_path, stand_in_inception[0])
    done = snakemake(tmp_path, config, "--cores", "2", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "results" / "pairs"
    assert not (out / "classifier").exists()
    scores = pd.read_csv(out / "scores.csv")
    assert set(scores.metric) == {"l1", "psnr", "ssim", "fid"} and len(scores) == 2 * 2 * 4
    record = json.loads((out / "scores" / "dp" / "trial1.json").read_text())
    assert (
        record["pairs"] == 3
        and record["extractor"].startswith("ganstudy-inception-")
        and "3 real images" in record["notes"]["fid"]
    )
    l1 = scores[scores.metric == "l1"].value
    assert ((0 < l1) & (l1 < 1)).all()
    run = json.loads((out / "runs" / "dp" / "trial0" / "run.json").read_text())
    assert run["world_size"] == 2 and "l1_weight" in run["settings"] and "energy_loss_weights" not in run["settings"]
    # Input | output | target rows of the first 8 (here 6) training pairs: 3 tiles of 16 pixels and their gaps.
    assert Image.open(out / "runs" / "single" / "trial0" / "samples.png").size[1] > 6 * 16
    # The in-training score: L1 on the first 2 held-out pairs, every iteration; the convergence check reads it.
    assert pd.read_csv(out / "runs" / "dp" / "trial0" / "losses.csv").l1.notna().all()
    convergence = pd.read_csv(out / "convergence.csv")
    assert set(convergence.score) == {"l1"} and list(convergence.trials) == [2, 2]
    summary = pd.read_csv(out / "tables" / "summary_ssim.csv")
    assert list(summary.setup) == ["dp", "single"] and list(summary.trials) == [2, 2]
    assert "psnr (higher is better)" in pd.read_csv(out / "tables" / "results.csv").columns
    epochs = pd.read_csv(out / "tables" / "epochs.csv").set_index("setup")
    assert epochs.loc["dp", "ranks"] == 2 and np.isfinite(epochs.loc["single", "g_loss"])
    for name in ("box_l1.png", "box_ssim.png", "samples.png", "score_curves.png"):
        assert (out / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    captions = report_captions(tmp_path, config, env)
    assert "Input | output | target of the first 8 training" in captions["results/pairs/runs/dp/trial1/samples.png"]


@pytest.mark.parametrize(
    "change, problem",
    [
        (
            {"evaluation": {"metrics": ["l1", "label_tvd"]}},
            "['label_tvd'] do not score paired images (they score images with classes)",
        ),
        ({"evaluation": {"metrics": ["fid"]}}, "set evaluation.extractor to inception"),
    ],
)
def test_what_paired_data_cannot_give_stops_the_dag_naming_the_key(tmp_path, env, change, problem):
    config = {**study(tmp_path, "unused"), **change}
    done = snakemake(tmp_path, config, "-n", env=env)
    assert done.returncode != 0 and problem in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]


def test_paired_metrics_need_paired_data(tmp_path, env):
    done = snakemake(tmp_path, {"evaluation": {"metrics": ["fid", "ssim"]}}, "-n", env=env)
    assert (
        done.returncode != 0
        and "['ssim'] do not score images with classes (they score paired images)" in done.stdout + done.stderr
    )
