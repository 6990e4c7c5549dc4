import json

import numpy as np
import pytest
import torch
from scipy import linalg

from ganstudy.core.seeding import derive_seed
from ganstudy.data.arrays import file_digest, load_split, to_uint8
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.classifier import load_classifier
from ganstudy.evaluate.extractor import classifier_extractor, scoring_device
from ganstudy.evaluate.scores import evaluate_generator, label_tvd, reference_statistics
from ganstudy.evaluate.settings import EvaluationSettings
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.artifact import sample_generator, sample_labelled, save_generator
from ganstudy.models.mixture import MixtureGenerator

SETTINGS = {
    "samples": 600,
    "batch_size": 128,
    "metrics": ["fid", "isc"],
    "fid_features": "logits",
    "isc_splits": 1,
    "reference_split": "train",
    "extractor": "classifier",
}


def test_classifier_is_accurate_on_digits(classifier_path):
    record = json.loads(classifier_path.with_suffix(".json").read_text())
    assert record["test_accuracy"] > 0.95
    assert len(record["weights_sha256"]) == 64


def test_low_accuracy_stops_the_classifier_job(digits_dir, tmp_path):
    from ganstudy.evaluate.classifier import train_classifier
    from ganstudy.evaluate.settings import ClassifierSettings

    settings = ClassifierSettings(epochs=1, batch_size=64, lr=1e-6, min_accuracy=0.99)
    with pytest.raises(GanstudyError, match="below classifier.min_accuracy=0.99"):
        train_classifier(
            digits_dir / "train.npz", digits_dir / "test.npz", settings, 1, tmp_path / "c.pt", tmp_path / "c.json", 1
        )
    assert not (tmp_path / "c.pt").exists()


def _independent_features(classifier_path, uint8_images, layer):
    with torch.no_grad():
        hidden, logits = load_classifier(classifier_path).features(uint8_images.float() / 127.5 - 1)
    return (logits if layer == "logits" else hidden).double().numpy()


def _independent_fid(a, b):
    mu_a, mu_b = a.mean(0), b.mean(0)
    cov_a, cov_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    # tr sqrt(A B) = tr sqrt(A^1/2 B A^1/2), a symmetric PSD matrix: eigh stays finite where dead ReLU units
    # make the covariances singular (scipy 1.18's sqrtm of the product gave NaN on the H100 machine's Xeon).
    w, v = linalg.eigh(cov_a)
    root_a = (v * np.sqrt(w.clip(min=0))) @ v.T
    tr_covmean = np.sqrt(linalg.eigvalsh(root_a @ cov_b @ root_a).clip(min=0)).sum()
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(cov_a) + np.trace(cov_b) - 2 * tr_covmean)


@pytest.fixture(scope="module")
def generator_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    spec = NetworkSpec((1, 8, 8), 16, 32)
    torch.manual_seed(0)
    generator, _ = build_pair("perceptron4", spec)
    generator = MixtureGenerator([generator], [1.0])
    save_generator(out / "generator.pt", generator, "perceptron4", spec)
    (out / "run.json").write_text(json.dumps({"setup_name": "tiny", "train_seconds": 1.5}))
    return out, generator, spec


@pytest.mark.parametrize("layer", ["logits", "penultimate"])
def test_fid_and_is_match_an_independent_numpy_scipy_computation(
    digits_dir, classifier_path, generator_run, tmp_path, layer
):
    out, generator, spec = generator_run
    settings = {**SETTINGS, "fid_features": layer}
    reference_statistics(
        digits_dir / "train.npz",
        classifier_extractor(classifier_path),
        settings["fid_features"],
        500,
        tmp_path / "ref.npz",
        1,
    )
    record = evaluate_generator(
        out / "generator.pt",
        out / "run.json",
        classifier_path,
        tmp_path / "ref.npz",
        EvaluationSettings.of(settings),
        2026,
        3,
        tmp_path / "scores.json",
        1,
    )
    real = torch.from_numpy(to_uint8(load_split(digits_dir / "train.npz").images))
    seed = derive_seed(2026, 3, "evaluate")
    fake = torch.from_numpy(to_uint8(sample_generator(generator, spec.latent_dim, 600, seed, 128).numpy()))
    expected_fid = _independent_fid(
        _independent_features(classifier_path, fake, layer), _independent_features(classifier_path, real, layer)
    )
    assert record["scores"]["fid"] == pytest.approx(expected_fid, rel=1e-4)
    # IS with one split: exp(mean KL(p(y|x) || p(y))).
    logits = _independent_features(classifier_path, fake, "logits")
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    expected_is = np.exp(np.mean(np.sum(p * (np.log(p) - np.log(p.mean(0))), axis=1)))
    assert record["scores"]["isc"] == pytest.approx(expected_is, rel=1e-6)
    saved = json.loads((tmp_path / "scores.json").read_text())
    assert saved["scores"] == record["scores"] and saved["train_seconds"] == 1.5 and saved["setup_name"] == "tiny"
    # The protocol: 600 generated against the 1437 train images, read by the classifier at 8x8 without resize.
    protocol = saved["protocol"]
    assert (protocol["generated"], protocol["real"], protocol["real_split"]) == (600, 1437, "train")
    assert protocol["extractors"]["quality"] == {
        "kind": "classifier",
        "sha256": file_digest(classifier_path),
        "layers": sorted({layer, "logits"}),
        "input": "8x8 uint8 as generated, no resize, scaled to [-1, 1]",
        "dtype": "float32",
    }


def test_real_test_split_scores_far_better_than_an_untrained_generator(
    digits_dir, classifier_path, generator_run, tmp_path
):
    reference_statistics(
        digits_dir / "train.npz",
        classifier_extractor(classifier_path),
        SETTINGS["fid_features"],
        500,
        tmp_path / "ref.npz",
        1,
    )
    with np.load(tmp_path / "ref.npz") as ref:
        real_test = _independent_features(
            classifier_path, torch.from_numpy(to_uint8(load_split(digits_dir / "test.npz").images)), "logits"
        )
        fid_test = _independent_fid(
            real_test,
            _independent_features(
                classifier_path, torch.from_numpy(to_uint8(load_split(digits_dir / "train.npz").images)), "logits"
            ),
        )
        assert int(ref["count"]) == 1437
    out, _, _ = generator_run
    record = evaluate_generator(
        out / "generator.pt",
        out / "run.json",
        classifier_path,
        tmp_path / "ref.npz",
        EvaluationSettings.of(SETTINGS),
        1,
        0,
        tmp_path / "s.json",
        1,
    )
    assert fid_test < 0.1 * record["scores"]["fid"]


def test_stale_reference_statistics_are_refused(digits_dir, classifier_path, generator_run, tmp_path):
    reference_statistics(
        digits_dir / "train.npz", classifier_extractor(classifier_path), "penultimate", 500, tmp_path / "ref.npz", 1
    )
    out, _, _ = generator_run
    with pytest.raises(GanstudyError, match="delete the file and rerun"):
        evaluate_generator(
            out / "generator.pt",
            out / "run.json",
            classifier_path,
            tmp_path / "ref.npz",
            EvaluationSettings.of(SETTINGS),
            1,
            0,
            tmp_path / "s.json",
            1,
        )
    assert not (tmp_path / "s.json").exists()


def test_in_training_fid_equals_the_independent_computation(digits_dir, classifier_path, generator_run, tmp_path):
    from ganstudy.evaluate.fid import FidScorer

    reference_statistics(
        digits_dir / "train.npz",
        classifier_extractor(classifier_path),
        SETTINGS["fid_features"],
        500,
        tmp_path / "ref.npz",
        1,
    )
    _, generator, spec = generator_run
    images = sample_generator(generator, spec.latent_dim, 500, 9, 500)
    scorer = FidScorer(classifier_path, tmp_path / "ref.npz", torch.device("cpu"))
    real = torch.from_numpy(to_uint8(load_split(digits_dir / "train.npz").images))
    fake = torch.from_numpy(to_uint8(images.numpy()))
    expected = _independent_fid(
        _independent_features(classifier_path, fake, "logits"), _independent_features(classifier_path, real, "logits")
    )
    assert scorer.fid(images) == pytest.approx(expected, rel=1e-4)
    with pytest.raises(GanstudyError, match="unreadable"):
        FidScorer(classifier_path, tmp_path / "missing.npz", torch.device("cpu"))


def test_label_tvd_matches_a_hand_computation():
    # Generated histogram (0.5, 0.5, 0) against real (0.25, 0.25, 0.5): TVD = (0.25 + 0.25 + 0.5) / 2.
    assert label_tvd(np.array([0, 0, 1, 1]), {0: 1, 1: 1, 2: 2}) == pytest.approx(0.5)
    # A label the real data lacks counts fully.
    assert label_tvd(np.array([3, 3]), {0: 5}) == pytest.approx(1.0)
    assert label_tvd(np.array([0, 1, 1, 0]), {0: 7, 1: 7}) == 0.0


def test_per_class_fid_and_label_tvd_of_a_labelled_generator_match_independent_computations(
    digits_dir, classifier_path, tmp_path
):
    spec = NetworkSpec((1, 8, 8), 16, 32)
    torch.manual_seed(1)
    train = load_split(digits_dir / "train.npz")
    labels, counts = np.unique(train.labels, return_counts=True)
    mixture = MixtureGenerator(
        [build_pair("perceptron4", spec)[0] for _ in labels], counts / counts.sum(), labels.tolist()
    )
    save_generator(tmp_path / "generator.pt", mixture, "perceptron4", spec)
    (tmp_path / "run.json").write_text(json.dumps({"setup_name": "labelled", "train_seconds": 2.0}))
    settings = {**SETTINGS, "samples": 1000, "metrics": ["fid", "class_fid", "label_tvd"]}
    reference_statistics(
        digits_dir / "train.npz",
        classifier_extractor(classifier_path),
        settings["fid_features"],
        500,
        tmp_path / "ref.npz",
        1,
    )
    record = evaluate_generator(
        tmp_path / "generator.pt",
        tmp_path / "run.json",
        classifier_path,
        tmp_path / "ref.npz",
        EvaluationSettings.of(settings),
        7,
        2,
        tmp_path / "scores.json",
        1,
    )
    images, sample_labels = sample_labelled(mixture, spec.latent_dim, 1000, derive_seed(7, 2, "evaluate"), 500)
    fake = _independent_features(classifier_path, torch.from_numpy(to_uint8(images.numpy())), "logits")
    real = _independent_features(classifier_path, torch.from_numpy(to_uint8(train.images)), "logits")
    expected = {
        str(c): _independent_fid(fake[sample_labels.numpy() == c], real[train.labels == c]) for c in labels.tolist()
    }
    assert record["class_fid"] == pytest.approx(expected, rel=1e-4)
    assert record["scores"]["class_fid"] == pytest.approx(np.mean(list(expected.values())), rel=1e-4)
    predicted = np.bincount(fake.argmax(1), minlength=10) / 1000
    assert record["scores"]["label_tvd"] == pytest.approx(0.5 * np.abs(predicted - counts / counts.sum()).sum())


def test_an_unlabelled_generator_gets_no_class_fid_and_a_note_why(digits_dir, classifier_path, generator_run, tmp_path):
    out, _, _ = generator_run
    settings = {**SETTINGS, "metrics": ["fid", "class_fid"]}
    reference_statistics(
        digits_dir / "train.npz",
        classifier_extractor(classifier_path),
        settings["fid_features"],
        500,
        tmp_path / "ref.npz",
        1,
    )
    record = evaluate_generator(
        out / "generator.pt",
        out / "run.json",
        classifier_path,
        tmp_path / "ref.npz",
        EvaluationSettings.of(settings),
        1,
        0,
        tmp_path / "s.json",
        1,
    )
    assert set(record["scores"]) == {"fid"}
    assert "does not label its samples" in record["notes"]["class_fid"]
    # 600 samples are plenty for the classifier's 10 logits: no FID warning.
    assert set(record["notes"]) == {"class_fid"}


def test_inception_fid_below_2049_samples_is_flagged_when_the_dag_is_built():
    from ganstudy.evaluate.weights import fid_sample_warning

    # 2048 samples still give a covariance of rank 2047 < 2048: the first full-rank count is 2049.
    assert "evaluation.samples is 2048, fewer than the 2049" in fid_sample_warning("inception", 2048)
    assert fid_sample_warning("inception", 2049) is None
    assert fid_sample_warning("inception", 10000, reference_count=10000) is None
    assert "reference statistics hold 1437 real images" in fid_sample_warning("inception", 10000, reference_count=1437)
    # The classifier's few logits need no such count.
    assert fid_sample_warning("classifier", 100) is None


def _independent_kid(generated, real):
    """Unbiased MMD^2 with the polynomial kernel (x.y / d + 1)^3 over all samples."""
    d = generated.shape[1]
    kernel = lambda a, b: (a @ b.T / d + 1) ** 3  # noqa: E731
    k_xx, k_yy, k_xy = kernel(generated, generated), kernel(real, real), kernel(generated, real)
    m, n = len(generated), len(real)
    return (
        (k_xx.sum() - np.trace(k_xx)) / (m * (m - 1)) + (k_yy.sum() - np.trace(k_yy)) / (n * (n - 1)) - 2 * k_xy.mean()
    )


def _independent_precision_recall(generated, real, k):
    def radii(points):
        distances = np.linalg.norm(points[:, None] - points[None], axis=2)
        return np.sort(distances, axis=1)[:, k]  # the k-th neighbour, the point itself being 0th

    cross = np.linalg.norm(generated[:, None] - real[None], axis=2)
    precision = (cross <= radii(real)[None, :]).any(axis=1).mean()
    recall = (cross.T <= radii(generated)[None, :]).any(axis=1).mean()
    return precision, recall


def test_kid_precision_and_recall_match_independent_computations(digits_dir, classifier_path, generator_run, tmp_path):
    out, generator, spec = generator_run
    settings = {
        **SETTINGS,
        "samples": 300,
        "metrics": ["kid", "precision", "recall"],
        "kid_subsets": 1,
        "kid_subset_size": 1000,
        "prc_neighborhood": 3,
    }
    # As many real images as samples: the one KID subset (capped at 300) holds every image of both, and
    # the MMD does not depend on their order.
    small = tmp_path / "small.npz"
    split = load_split(digits_dir / "test.npz")
    from ganstudy.data.arrays import Split, save_split

    save_split(small, Split(split.images[:300], split.labels[:300]))
    reference_statistics(
        small, classifier_extractor(classifier_path), settings["fid_features"], 500, tmp_path / "ref.npz", 1
    )
    record = evaluate_generator(
        out / "generator.pt",
        out / "run.json",
        classifier_path,
        tmp_path / "ref.npz",
        EvaluationSettings.of(settings),
        4,
        1,
        tmp_path / "s.json",
        1,
    )
    fake = _independent_features(
        classifier_path,
        torch.from_numpy(
            to_uint8(sample_generator(generator, spec.latent_dim, 300, derive_seed(4, 1, "evaluate"), 128).numpy())
        ),
        "logits",
    )
    real = _independent_features(classifier_path, torch.from_numpy(to_uint8(split.images[:300])), "logits")
    # torch-fidelity's kernel runs in float32.
    assert record["scores"]["kid"] == pytest.approx(_independent_kid(fake, real), rel=1e-3)
    precision, recall = _independent_precision_recall(fake, real, 3)
    assert record["scores"]["precision"] == pytest.approx(precision, abs=1e-9)
    assert record["scores"]["recall"] == pytest.approx(recall, abs=1e-9)


def test_the_inception_path_scores_with_local_weights_and_checks_their_hash(
    digits_dir, classifier_path, generator_run, stand_in_inception, tmp_path
):
    from ganstudy.data.arrays import Split, save_split
    from ganstudy.evaluate.extractor import inception_extractor

    weights, model = stand_in_inception
    digest = file_digest(weights)
    split = load_split(digits_dir / "test.npz")
    save_split(tmp_path / "real.npz", Split(split.images[:16], split.labels[:16]))
    settings = {
        **SETTINGS,
        "samples": 16,
        "batch_size": 16,
        "metrics": ["fid", "isc"],
        "extractor": "inception",
        "inception_weights": str(weights),
        "inception_sha256": digest[:12],
    }
    extractor = inception_extractor(weights, digest[:12])
    reference_statistics(tmp_path / "real.npz", extractor, "2048", 16, tmp_path / "inception.npz", 1)
    reference_statistics(
        tmp_path / "real.npz", classifier_extractor(classifier_path), "logits", 20, tmp_path / "ref.npz", 1
    )
    out, generator, spec = generator_run
    record = evaluate_generator(
        out / "generator.pt",
        out / "run.json",
        classifier_path,
        tmp_path / "ref.npz",
        EvaluationSettings.of(settings),
        2,
        0,
        tmp_path / "s.json",
        1,
        tmp_path / "inception.npz",
    )
    assert record["extractor"] == f"ganstudy-inception-{digest[:16]}" and record["extractor_sha256"] == digest
    quality = record["protocol"]["extractors"]["quality"]
    assert (
        quality["sha256"] == digest
        and quality["layers"] == ["2048", "logits_unbiased"]
        and "resized to 299x299" in quality["input"]
    )
    assert (record["protocol"]["generated"], record["protocol"]["real"]) == (16, 16)
    assert record["scored_on"] == "cpu"
    # 16 samples and 16 real images for 2048 features: the score record says FID is unreliable, and why.
    note = record["notes"]["fid"]
    assert "evaluation.samples is 16" in note and "reference statistics hold 16 real images" in note
    assert "2048 features" in note and "set evaluation.samples to 10000 or more" in note
    # Independent: the same network called directly on 3-channel uint8 images, FID in numpy/scipy.
    fake = to_uint8(sample_generator(generator, spec.latent_dim, 16, derive_seed(2, 0, "evaluate"), 16).numpy())
    with torch.no_grad():
        f_fake = model(torch.from_numpy(fake).repeat(1, 3, 1, 1))[0].double().numpy()
        f_real = model(torch.from_numpy(to_uint8(split.images[:16])).repeat(1, 3, 1, 1))[0].double().numpy()
    assert record["scores"]["fid"] == pytest.approx(_independent_fid(f_fake, f_real), rel=1e-3)
    with pytest.raises(GanstudyError, match=f"has sha256 {digest}, not evaluation.inception_sha256=00000000"):
        inception_extractor(weights, "00000000")
    with pytest.raises(
        GanstudyError,
        match=r"is not a file: evaluation.extractor inception reads torch-fidelity.s Inception-v3 weights; on a "
        r"machine with internet download https://github.com/toshas/torch-fidelity",
    ):
        inception_extractor(tmp_path / "missing.pth", None)


def test_a_scoring_job_told_to_use_a_gpu_it_does_not_have_names_what_the_scheduler_gave_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(GanstudyError) as refused:
        scoring_device("cuda")
    said = str(refused.value)
    assert said.startswith("a scoring job on host ") and "it was told --device cuda" in said
    assert "torch finds no CUDA device" in said and "CUDA_VISIBLE_DEVICES=" in said
    assert said.endswith("or set compute.device: cpu to score (and train) on the CPU")
    assert scoring_device("cpu") == "cpu"
