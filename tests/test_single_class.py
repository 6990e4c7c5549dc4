"""Data of one class (issue 45, item 7: a positives-only image folder, the thesis's COVID-19 layout): single,
grid and data_parallel set-ups train and are scored on Inception or on the user's classifier; what needs
several classes (per-class and conditional training, a classifier of the study's own, the ANOVA) is refused
or left out while the workflow plans, naming the key and what to do."""

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import SCHEMA
from ganstudy.config.validate import load_study_config
from ganstudy.data.arrays import Split, file_digest, load_split, save_split
from ganstudy.data.kinds import IMAGES
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.classifier import load_classifier, train_classifier
from ganstudy.evaluate.settings import ClassifierSettings
from ganstudy.plan.classes import class_problems
from ganstudy.stats.anova import write_anova
from test_workflow import snakemake

pytestmark = pytest.mark.workflow


@pytest.fixture(scope="session")
def zeros_folder(tmp_path_factory) -> Path:
    """The 178 zeros of scikit-learn's digits as an image folder of one class (8x8 grey PNGs)."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    root = tmp_path_factory.mktemp("zeros") / "xray"
    (root / "positive").mkdir(parents=True)
    for i, image in enumerate(digits.images[digits.target == 0]):
        Image.fromarray((image * 255 / 16).round().astype(np.uint8)).save(root / "positive" / f"{i:03d}.png")
    return root


def one_class_study(folder: Path, **sections) -> dict:
    study = {
        "study": "zeros",
        "trials": 1,
        "dataset": {"name": "image_folder", "path": str(folder)},
        "setups": {"single": {"iterations": 2, "batch_size": 32, "hidden_units": 32, "score_samples": 50}},
        "evaluation": {"samples": 50, "batch_size": 50, "isc_splits": 2, "metrics": ["fid", "isc"]},
        "compute": {"max_ranks": 2},
    }
    for name, section in sections.items():
        study[name] = {**study.get(name, {}), **section}
    return study


def test_what_needs_several_classes_stops_the_plan_naming_key_and_remedy(tmp_path, env, zeros_folder):
    config = one_class_study(
        zeros_folder,
        setups={
            "per_class": {"mode": "per_class", "iterations": 1},
            "cgan": {"mode": "conditional", "network": "dccgan", "iterations": 1},
            "dp": {"mode": "data_parallel", "network": "dccgan", "iterations": 1},
            "grid": {"mode": "grid", "iterations": 1, "grid": {"shape": "2x2"}},
            "curve": {"iterations": 4, "score_period": 2},
        },
        evaluation={"metrics": ["fid", "label_tvd"]},
    )
    done = snakemake(tmp_path, config, "-n", env=env)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    data = f"dataset 'image_folder' ({zeros_folder}) has one class"
    assert (
        f"setups.per_class.mode: per_class learns the classes, but {data}: use mode data_parallel, grid or single"
        in said
    )
    assert f"setups.cgan.mode: conditional learns the classes, but {data}" in said
    assert f"setups.dp.network: 'dccgan' is conditional (it learns the class labels), but {data}" in said
    assert f"evaluation.metrics label_tvd: compare the classes of samples and data, but {data}: remove them" in said
    for reader in (
        "evaluation.extractor: classifier (metrics fid)",
        "setups.grid (mode grid scores by FID during training)",
        "setups.curve.score_period (FID during training)",
    ):
        assert f"{reader}: scores with a classifier, but {data}, so none can be trained" in said, reader
    # Every set-up that scores in training (score_period is on by default) and is not refused for its mode is
    # named, each with both remedies: single, dp, grid, curve and the extractor.
    assert said.count("set classifier.weights") == said.count("or set evaluation.extractor: inception") == 5
    assert "Traceback" not in said and not (tmp_path / "results").exists()
    checked = subprocess.run(
        ["ganstudy", "validate-config", str(tmp_path / "study.yaml")], capture_output=True, text=True, env=env
    )
    assert (
        checked.returncode != 0 and f"setups.per_class.mode: per_class learns the classes, but {data}" in checked.stderr
    )


def test_a_one_class_study_on_inception_runs_without_a_classifier(tmp_path, env, zeros_folder, stand_in_inception):
    """Single, data_parallel and grid set-ups on the zeros alone, scored on Inception: no classifier, no ANOVA.
    (FID during training on Inception, 2,048 features, takes minutes per grid iteration on this CPU: the
    plan is checked here, the scorer against the scoring job's features below.)"""
    weights = str(stand_in_inception[0])
    config = one_class_study(
        zeros_folder,
        setups={
            "single": {"iterations": 2, "batch_size": 32, "hidden_units": 32, "score_period": 0},
            "dp": {"mode": "data_parallel", "iterations": 2, "batch_size": 32, "hidden_units": 32, "score_period": 0},
            "grid": {"mode": "grid", "iterations": 2, "grid": {"shape": "1x2"}},
        },
        # Inception reads each image at 299x299: as few as the scores allow (the test split's 36 zeros).
        evaluation={"extractor": "inception", "inception_weights": weights, "samples": 20, "reference_split": "test"},
    )
    done = snakemake(tmp_path, config, "-n", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout + done.stderr
    assert "the data have one class: no classifier is trained and the per-class ANOVA is left out" in out
    for rule in ("train_classifier", "reference_statistics", "anova"):
        assert f"rule {rule}:" not in out, rule
    # The grid's job file: what its training reads.
    assert snakemake(tmp_path, config, "--cores", "1", "results/zeros/jobs/grid.json", env=env).returncode == 0
    grid_job = json.loads((tmp_path / "results" / "zeros" / "jobs" / "grid.json").read_text())
    assert grid_job["inputs"]["inception"] == weights and grid_job["inputs"]["reference"].endswith(
        "classifier/reference_inception.npz"
    )
    assert grid_job["sources"]["reference"]["extractor"] == "inception"
    # Trained, scored and tabled: the single set-up (a data_parallel one runs the same scoring; it is planned
    # above, and so is the study's reporting, which reads no class).
    config["setups"] = {"single": config["setups"]["single"]}
    done = snakemake(tmp_path, config, "--cores", "2", "results/zeros/tables/summary_fid.csv", env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    study = tmp_path / "results" / "zeros"
    scores = json.loads((study / "scores" / "single" / "trial0.json").read_text())
    assert set(scores["scores"]) >= {"fid", "isc"} and all(np.isfinite(v) for v in scores["scores"].values())
    assert scores["extractor"].startswith("ganstudy-inception-")
    assert (study / "tables" / "summary_fid.csv").is_file() and not (study / "classifier" / "classifier.pt").exists()


def test_fid_during_training_on_inception_reads_what_the_scoring_job_reads(tmp_path, digits_dir, stand_in_inception):
    from ganstudy.data.arrays import to_uint8
    from ganstudy.evaluate.extractor import inception_extractor
    from ganstudy.evaluate.fid import FidScorer
    from ganstudy.evaluate.scores import reference_statistics

    extractor = inception_extractor(stand_in_inception[0], None)
    real = load_split(digits_dir / "test.npz")
    save_split(tmp_path / "real.npz", Split(real.images[:8], real.labels[:8]))
    reference_statistics(tmp_path / "real.npz", extractor, "2048", 8, tmp_path / "ref.npz", 1)
    scorer = FidScorer(extractor, tmp_path / "ref.npz", torch.device("cpu"))
    generated = torch.from_numpy(load_split(digits_dir / "train.npz").images[:6])
    during = scorer.features(generated)
    scored = extractor.features(torch.from_numpy(to_uint8(generated.numpy())), ["2048"], 8)["2048"]
    assert during.shape == (6, 2048) and during.abs().sum() > 0
    torch.testing.assert_close(during, scored.to(during.dtype), rtol=1e-5, atol=1e-6)


def test_class_problems_name_grid_cell_classes_the_data_do_not_have(tmp_path):
    config = load_study_config(
        _written(
            tmp_path, {"setups": {"g": {"mode": "grid", "grid": {"shape": "1x2", "cell_classes": [[0, 1], [9, 12]]}}}}
        ),
        SCHEMA,
    )
    assert class_problems(config, IMAGES, 10) == [
        "setups.g.grid.cell_classes: cell 1 names class(es) [12], but dataset 'digits' has classes 0..9: name "
        "classes the data have"
    ]
    assert class_problems(config, IMAGES, None) == []


def _written(tmp_path: Path, config: dict) -> Path:
    import yaml

    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _one_class(split: Split) -> Split:
    return Split(split.images, np.zeros_like(split.labels))


def test_the_classifier_job_refuses_one_class_and_the_anova_says_why(tmp_path, digits_dir):
    train, test = tmp_path / "train.npz", tmp_path / "test.npz"
    save_split(train, _one_class(load_split(digits_dir / "train.npz")))
    save_split(test, _one_class(load_split(digits_dir / "test.npz")))
    settings = ClassifierSettings(epochs=1)
    with pytest.raises(
        GanstudyError, match="the training split has one class: a classifier would have nothing to separate"
    ):
        train_classifier(train, test, settings, 0, tmp_path / "c.pt", tmp_path / "c.json", 1)
    table = write_anova(train, tmp_path / "anova.csv", tmp_path / "anova.md")
    assert table.empty and (tmp_path / "anova.csv").read_text().startswith("channel,F,p_value")
    assert "Not computed: the training split has 1 class" in (tmp_path / "anova.md").read_text()


def test_a_given_classifier_is_checked_and_recorded(tmp_path, digits_dir, classifier_path):
    train, test = digits_dir / "train.npz", digits_dir / "test.npz"
    given = ClassifierSettings(weights=str(classifier_path), sha256=file_digest(classifier_path)[:12], min_accuracy=0.8)
    record = train_classifier(train, test, given, 0, tmp_path / "c.pt", tmp_path / "c.json", 1)
    # Its classes are the data's: its accuracy is measured (as the fixture's own record says) and min_accuracy holds.
    assert (tmp_path / "c.pt").read_bytes() == classifier_path.read_bytes()
    assert record["weights_sha256"] == file_digest(classifier_path) and record["num_classes"] == 10
    assert record["test_accuracy"] == pytest.approx(
        json.loads((digits_dir / "classifier.json").read_text())["test_accuracy"]
    )
    assert sum(record["test_predicted_shares"]) == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(GanstudyError, match="not classifier.sha256=0000000000"):
        train_classifier(
            train,
            test,
            ClassifierSettings(weights=str(classifier_path), sha256="0000000000"),
            0,
            tmp_path / "d.pt",
            tmp_path / "d.json",
            1,
        )
    with pytest.raises(GanstudyError, match="below classifier.min_accuracy=1.0"):
        train_classifier(
            train,
            test,
            ClassifierSettings(weights=str(classifier_path), min_accuracy=1.0),
            0,
            tmp_path / "d.pt",
            tmp_path / "d.json",
            1,
        )
    big = tmp_path / "big.npz"
    save_split(big, Split(np.zeros((4, 1, 16, 16), np.float32), np.zeros(4, np.int64)))
    with pytest.raises(GanstudyError, match=r"reads images of shape \(1, 8, 8\), the study's data are \(1, 16, 16\)"):
        train_classifier(
            big, big, ClassifierSettings(weights=str(classifier_path)), 0, tmp_path / "d.pt", tmp_path / "d.json", 1
        )
    assert not (tmp_path / "d.pt").exists()


def test_one_class_data_train_and_score_with_the_users_classifier(tmp_path, env, zeros_folder, classifier_path):
    """Single and grid set-ups on the zeros alone, scored (and the grid's mixtures selected) with the user's
    classifier: the digits classifier, which knows zeros."""
    weights = tmp_path / "digits_classifier.pt"
    shutil.copyfile(classifier_path, weights)
    config = one_class_study(
        zeros_folder,
        setups={
            "grid": {
                "mode": "grid",
                "iterations": 2,
                "hidden_units": 32,
                "batch_size": 32,
                "grid": {"shape": "2x2", "fitness_sample_size": 50, "score_sample_size": 50},
            }
        },
        classifier={"weights": str(weights)},
        evaluation={"metrics": ["fid", "isc", "kid"], "kid_subsets": 10, "kid_subset_size": 20},
    )
    done = snakemake(tmp_path, config, "--cores", "2", env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    study = tmp_path / "results" / "zeros"
    record = json.loads((study / "classifier" / "classifier.json").read_text())
    # The digits classifier sees this study's test images as zeros: its shares say so.
    assert (
        record["weights"] == str(weights)
        and record["test_accuracy"] is None
        and record["test_predicted_shares"][0] > 0.9
    )
    assert (study / "classifier" / "classifier.pt").read_bytes() == weights.read_bytes()
    for setup in ("single", "grid"):
        scores = json.loads((study / "scores" / setup / "trial0.json").read_text())
        assert {"fid", "isc", "kid"} <= set(scores["scores"]) and scores["extractor"].startswith("ganstudy-classifier-")
        assert all(np.isfinite(value) for value in scores["scores"].values())
    assert (study / "tables" / "summary_kid.csv").is_file() and not (study / "tables" / "anova.csv").exists()
    manifest = json.loads((study / "data" / "manifest.json").read_text())
    assert manifest["num_classes"] == 1 and manifest["class_names"] == ["positive"]
    assert load_classifier(study / "classifier" / "classifier.pt").num_classes == 10
