"""Metrics are registered parts: ganstudy's own are entry points like a lab's, every data kind's metrics
come from the registry, and a metric plugin that breaks its contract (wrong type, a direction that is
not one, a result that is not columns of numbers, a column another metric wrote, a name given as
module:attribute) is named with its package and what to fix."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch

from conftest import install
from ganstudy.data.kinds import IMAGES, PAIRS, SHOWERS, all_kinds
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.metrics import (
    METRICS,
    Metric,
    better,
    get_metric,
    kind_metrics,
    metric_problems,
    pretrained_metrics,
    score_all,
)
from ganstudy.evaluate.scoring import Scoring
from ganstudy.evaluate.settings import EvaluationSettings
from ganstudy.registry import resolve

BUILT_IN = {
    "fid",
    "isc",
    "kid",
    "precision",
    "recall",
    "density",
    "coverage",
    "class_fid",
    "label_tvd",
    "l1",
    "psnr",
    "ssim",
    "sf_mean",
    "sf_width",
    "longitudinal",
    "transverse_x",
    "transverse_y",
    "gan3d",
}


def test_built_in_metrics_are_entry_points_of_ganstudy_with_a_direction_a_kind_and_a_compute():
    assert BUILT_IN <= set(METRICS)
    kinds = {kind.name for kind in all_kinds()}
    for name in BUILT_IN:
        metric = get_metric(name)
        assert METRICS.origin(name).distribution == "ganstudy"
        assert (
            metric.better in ("lower", "higher") and metric.kinds <= kinds and callable(resolve(metric.compute, name))
        )
    assert [better(name) for name in ("fid", "isc", "ssim", "sf_mean")] == ["lower", "higher", "higher", "lower"]
    assert better("isc_std") == "?"
    # Each kind's metrics are the registered ones that name it.
    assert set(kind_metrics(IMAGES)) == {
        "fid",
        "isc",
        "kid",
        "precision",
        "recall",
        "density",
        "coverage",
        "class_fid",
        "label_tvd",
    }
    assert set(kind_metrics(PAIRS)) == {
        "fid",
        "isc",
        "kid",
        "precision",
        "recall",
        "density",
        "coverage",
        "l1",
        "psnr",
        "ssim",
    }
    assert set(kind_metrics(SHOWERS)) == {
        "sf_mean",
        "sf_width",
        "longitudinal",
        "transverse_x",
        "transverse_y",
        "gan3d",
    }
    assert (
        pretrained_metrics(PAIRS, ["l1", "fid", "kid"]) == ["fid", "kid"] and pretrained_metrics(IMAGES, ["fid"]) == []
    )


LAB = textwrap.dedent("""
    from ganstudy.evaluate.metrics import Metric

    def sharpness(scoring):
        return {"sharpness": scoring.seed % 7, "sharpness_sd": 0.5}

    def words(scoring):
        return ["sharp"]

    def text(scoring):
        return {"sharp": "very"}

    def silent(scoring):
        return {}

    def quiet(scoring):
        scoring.notes["quiet"] = "not reported: nothing to say"
        return {}

    def clash(scoring):
        return {"sharpness": 1.0}

    SHARPNESS = Metric("a lab's sharpness", "higher", frozenset({"images"}), "lab_metrics:sharpness")
    WORDS = Metric("a list", "lower", frozenset({"images"}), "lab_metrics:words")
    TEXT = Metric("a string", "lower", frozenset({"images"}), "lab_metrics:text")
    SILENT = Metric("nothing", "lower", frozenset({"images"}), "lab_metrics:silent")
    QUIET = Metric("nothing, said so", "lower", frozenset({"images"}), "lab_metrics:quiet")
    CLASH = Metric("another's column", "lower", frozenset({"images"}), "lab_metrics:clash")
    SIDEWAYS = Metric("no direction", "smaller", frozenset({"images"}), "lab_metrics:sharpness")
    # Its compute lives in a module the package forgot to ship.
    UNSHIPPED = Metric("a module left out", "lower", frozenset({"images"}), "lab_metrics.heavy:compute")

    def brightness_gap(scoring):
        # Pixels, not features: the mean brightness of the samples against the real images'.
        real, _ = scoring.real_images()
        return {"brightness_gap": abs(float(scoring.samples.float().mean()) - float(real.float().mean()))}

    BRIGHTNESS_GAP = Metric("mean brightness of samples minus real images'", "lower", frozenset({"images"}),
                            "lab_metrics:brightness_gap", real_images=True)
    UNDECLARED = Metric("reads the real images without saying so", "lower", frozenset({"images"}),
                        "lab_metrics:brightness_gap")
""")

POINTS = "[ganstudy.metrics]\n" + "".join(
    f"{name} = lab_metrics:{name.upper()}\n"
    for name in (
        "sharpness",
        "words",
        "text",
        "silent",
        "quiet",
        "clash",
        "sideways",
        "unshipped",
        "brightness_gap",
        "undeclared",
    )
)


@pytest.fixture
def lab(site):
    install(site, "lab-metrics", POINTS, "lab_metrics", LAB)
    return Scoring(EvaluationSettings(), 15)


def test_a_lab_metric_registers_like_the_built_ins_and_its_columns_are_scores(lab):
    assert get_metric("sharpness").better == "higher" and better("sharpness") == "higher"
    assert str(METRICS.origin("sharpness")) == "lab_metrics:SHARPNESS (from lab-metrics 1.2)"
    assert score_all(["sharpness", "quiet"], lab) == {"sharpness": 1.0, "sharpness_sd": 0.5}
    assert lab.notes == {"quiet": "not reported: nothing to say"}
    assert metric_problems(IMAGES, ["fid", "sharpness"], "classifier") == []
    problem = metric_problems(PAIRS, ["sharpness"], "inception")[0]
    assert "evaluation.metrics ['sharpness'] do not score paired images (they score images with classes)" in problem


@pytest.mark.parametrize(
    "name, problem",
    [
        (
            "words",
            "metric 'words' (lab_metrics:WORDS (from lab-metrics 1.2)) compute returned list, not a mapping of "
            "column name to number",
        ),
        (
            "text",
            "metric 'text' (lab_metrics:TEXT (from lab-metrics 1.2)) compute returned 'sharp': 'very'; columns are "
            "names (str) with numbers",
        ),
        (
            "silent",
            "metric 'silent' (lab_metrics:SILENT (from lab-metrics 1.2)) compute returned no column and left no note "
            "in scoring.notes['silent']",
        ),
        (
            "sideways",
            "metric 'sideways' (lab_metrics:SIDEWAYS (from lab-metrics 1.2)) says better is 'smaller', not one of "
            "lower, higher; fix it in its package",
        ),
    ],
)
def test_a_metric_that_breaks_its_contract_is_named_with_its_package(lab, name, problem):
    with pytest.raises(GanstudyError) as error:
        score_all([name], lab)
    assert problem in str(error.value)


def test_a_metric_whose_compute_module_is_missing_is_named_by_the_plan_not_after_training(lab):
    # The plan is torch-free: it looks the module up without importing it.
    assert metric_problems(IMAGES, ["fid", "unshipped"], "classifier") == [
        "evaluation.metrics: metric 'unshipped' (lab_metrics:UNSHIPPED (from lab-metrics 1.2)) names "
        "'lab_metrics.heavy:compute', but module 'lab_metrics.heavy' is not installed: fix its package or install it"
    ]


def test_two_metrics_writing_one_column_is_an_error_not_an_overwrite(lab):
    with pytest.raises(
        GanstudyError,
        match=r"metric 'clash' \(lab_metrics:CLASH \(from lab-metrics 1.2\)\) writes column\(s\) "
        r"\['sharpness'\] that another of evaluation.metrics",
    ):
        score_all(["sharpness", "clash"], lab)


def test_a_metric_named_as_module_and_attribute_is_refused_with_why(lab):
    problems = metric_problems(IMAGES, ["lab_metrics:SHARPNESS", "sharpnes"], "classifier")
    assert problems[0] == (
        "evaluation.metrics: metric 'lab_metrics:SHARPNESS' is named as module:attribute, but a metric's name "
        "is its column in scores.csv and in the tables: register it as an entry point of group "
        "'ganstudy.metrics' in its package (docs/plugins.md)"
    )
    assert problems[1].startswith("evaluation.metrics: unknown metric 'sharpnes'; registered metrics: ")
    assert "sharpness" in problems[1] and "module:attribute" not in problems[1]
    assert isinstance(get_metric("quiet"), Metric)


def test_density_and_coverage_match_an_independent_computation():
    import numpy as np
    import torch
    from sklearn.neighbors import NearestNeighbors

    from ganstudy.evaluate.quality import density_coverage

    generator = torch.Generator().manual_seed(3)
    real, fake = torch.randn(120, 6, generator=generator), 0.7 * torch.randn(90, 6, generator=generator) + 0.4
    found = density_coverage(real, fake, k=5)
    # Naeem et al.'s definitions, with scikit-learn's neighbours: the k-th neighbour besides the point itself.
    radii = NearestNeighbors(n_neighbors=6).fit(real.numpy()).kneighbors(real.numpy())[0][:, 5]
    distance = np.linalg.norm(real.numpy()[:, None, :] - fake.numpy()[None, :, :], axis=2)
    inside = distance < radii[:, None]
    assert found["density"] == pytest.approx(inside.sum() / (5 * 90), rel=1e-12)
    assert found["coverage"] == pytest.approx(inside.any(axis=1).mean(), rel=1e-12)
    assert 0 < found["coverage"] < 1 and found["density"] > 0
    # Samples that are the real images themselves cover every ball.
    assert density_coverage(real, real.clone(), k=5)["coverage"] == 1.0


def test_a_metric_that_declares_it_reads_the_real_images_gets_them(lab, digits_dir):
    from ganstudy.data.arrays import load_split, to_uint8
    from ganstudy.evaluate.scoring import ImageScoring

    real = load_split(digits_dir / "test.npz")
    samples = torch.from_numpy(to_uint8(load_split(digits_dir / "train.npz").images[:40]))
    scoring = ImageScoring(EvaluationSettings(), 15, samples, None, None, None, None, real_path=digits_dir / "test.npz")
    # Against numpy on the split's own pixels, as uint8 like the samples.
    expected = abs(samples.numpy().mean() - np.clip(np.rint((real.images + 1) * 127.5), 0, 255).mean())
    assert score_all(["brightness_gap"], scoring)["brightness_gap"] == pytest.approx(expected, rel=1e-6)
    assert scoring.real_count() == len(real.labels) and scoring.protocol("test")["real"] == len(real.labels)
    # Without the split (the workflow gives it only for metrics that declare the read), the metric is named.
    unscored = ImageScoring(EvaluationSettings(), 15, samples, None, None, None, None)
    with pytest.raises(
        GanstudyError,
        match=r"metric 'undeclared' \(lab_metrics:UNDECLARED \(from lab-metrics 1.2\)\): it reads the "
        r"real images, and this scoring has none: declare real_images=True",
    ):
        score_all(["undeclared"], unscored)


@pytest.mark.workflow
def test_the_scoring_jobs_get_the_reference_split_only_where_a_metric_reads_the_real_images(lab, site, tmp_path, env):
    from conftest import planned_jobs, with_pythonpath
    from test_workflow import snakemake

    study = {"study": "tiny", "trials": 1, "setups": {"bce": {"iterations": 2}}}
    arguments = "results/tiny/arguments/evaluate/bce/trial0.args"
    inputs, lines = {}, {}
    for metrics in (["fid"], ["fid", "brightness_gap"]):
        config = {**study, "evaluation": {"metrics": metrics}}
        done = snakemake(tmp_path, config, "-n", env=with_pythonpath(env, site))
        assert done.returncode == 0, done.stderr[-3000:]
        [job] = planned_jobs(done.stdout, "evaluate")
        inputs[len(metrics)] = job["input"].split(", ")
        # A real start writes every job's arguments file (one argument per line) before any job runs.
        done = snakemake(tmp_path, config, "--cores", "1", arguments, env=with_pythonpath(env, site))
        assert done.returncode == 0, done.stderr[-3000:]
        lines[len(metrics)] = (tmp_path / arguments).read_text().splitlines()
    assert "--real" not in lines[1] and "results/tiny/data/train.npz" not in inputs[1]
    real = lines[2].index("--real")
    assert lines[2][real - 2 : real + 3] == [
        "--reference",
        "results/tiny/classifier/reference_stats.npz",
        "--real",
        "results/tiny/data/train.npz",
        "--trial",
    ]
    assert "results/tiny/data/train.npz" in inputs[2]


def test_a_scoring_of_other_samples_reuses_the_extractor_and_the_reference_and_scores_as_a_fresh_one(
    scoring, digits_dir
):
    from ganstudy.data.arrays import load_split, to_uint8
    from ganstudy.evaluate.scoring import ImageScoring

    classifier, reference = scoring
    settings = EvaluationSettings(metrics=("fid", "isc"), extractor="classifier", fid_features="logits")
    images = torch.from_numpy(to_uint8(load_split(digits_dir / "train.npz").images))
    made = lambda rows: ImageScoring(settings, 3, images[rows], None, classifier, reference, None)  # noqa: E731
    first, second, fresh = made(slice(0, 200)), made(slice(200, 400)), made(slice(200, 400))
    score_all(settings.metrics, first)
    second.reuse(first)
    assert score_all(settings.metrics, second) == score_all(settings.metrics, fresh)
    # The extractor and the reference are the first scoring's objects; the features are the second's own.
    assert second.extractor is first.extractor and second.quality_reference() is first.quality_reference()
    assert fresh.extractor is not first.extractor
    assert not torch.equal(second.quality_features()["logits"], first.quality_features()["logits"])
    other = ImageScoring(settings, 3, images[:200], None, classifier, None, None)
    with pytest.raises(ValueError, match="the same settings, files and device"):
        other.reuse(first)
