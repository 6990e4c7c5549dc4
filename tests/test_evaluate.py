import json

import numpy as np
import pytest
import torch
from scipy import linalg

from ganstudy.data.arrays import load_split, to_uint8
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.classifier import load_classifier
from ganstudy.evaluate.scores import evaluate_generator, label_tvd, reference_statistics
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.artifact import sample_generator, sample_labelled, save_generator
from ganstudy.models.mixture import MixtureGenerator
from ganstudy.seeding import derive_seed

SETTINGS = {
    "samples": 600, "batch_size": 128, "metrics": ["fid", "isc"], "fid_features": "logits",
    "isc_splits": 1, "reference_split": "train",
}


def test_classifier_is_accurate_on_digits(classifier_path):
    record = json.loads(classifier_path.with_suffix(".json").read_text())
    assert record["test_accuracy"] > 0.95
    assert len(record["weights_sha256"]) == 64


def test_low_accuracy_stops_the_classifier_job(digits_dir, tmp_path):
    from ganstudy.evaluate.classifier import train_classifier

    settings = {"epochs": 1, "batch_size": 64, "lr": 1e-6, "min_accuracy": 0.99}
    with pytest.raises(GanstudyError, match="below classifier.min_accuracy=0.99"):
        train_classifier(digits_dir / "train.npz", digits_dir / "test.npz", settings, 1, tmp_path / "c.pt", tmp_path / "c.json", 1)
    assert not (tmp_path / "c.pt").exists()


def _independent_features(classifier_path, uint8_images, layer):
    with torch.no_grad():
        hidden, logits = load_classifier(classifier_path).features(uint8_images.float() / 127.5 - 1)
    return (logits if layer == "logits" else hidden).double().numpy()


def _independent_fid(a, b):
    mu_a, mu_b = a.mean(0), b.mean(0)
    cov_a, cov_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    covmean = linalg.sqrtm(cov_a @ cov_b).real
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(cov_a) + np.trace(cov_b) - 2 * np.trace(covmean))


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


@pytest.mark.filterwarnings("ignore:Matrix is singular")  # dead ReLU units in the penultimate layer
@pytest.mark.parametrize("layer", ["logits", "penultimate"])
def test_fid_and_is_match_an_independent_numpy_scipy_computation(digits_dir, classifier_path, generator_run, tmp_path, layer):
    out, generator, spec = generator_run
    settings = {**SETTINGS, "fid_features": layer}
    reference_statistics(digits_dir / "train.npz", classifier_path, settings, tmp_path / "ref.npz", 1)
    record = evaluate_generator(
        out / "generator.pt", out / "run.json", classifier_path, tmp_path / "ref.npz", settings, 2026, 3,
        tmp_path / "scores.json", 1,
    )
    real = torch.from_numpy(to_uint8(load_split(digits_dir / "train.npz").images))
    seed = derive_seed(2026, 3, "evaluate")
    fake = torch.from_numpy(to_uint8(sample_generator(generator, spec.latent_dim, 600, seed, 128).numpy()))
    expected_fid = _independent_fid(_independent_features(classifier_path, fake, layer), _independent_features(classifier_path, real, layer))
    assert record["scores"]["fid"] == pytest.approx(expected_fid, rel=1e-4)
    # IS with one split: exp(mean KL(p(y|x) || p(y))).
    logits = _independent_features(classifier_path, fake, "logits")
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    expected_is = np.exp(np.mean(np.sum(p * (np.log(p) - np.log(p.mean(0))), axis=1)))
    assert record["scores"]["isc"] == pytest.approx(expected_is, rel=1e-6)
    saved = json.loads((tmp_path / "scores.json").read_text())
    assert saved["scores"] == record["scores"] and saved["train_seconds"] == 1.5 and saved["setup_name"] == "tiny"


def test_real_test_split_scores_far_better_than_an_untrained_generator(digits_dir, classifier_path, generator_run, tmp_path):
    reference_statistics(digits_dir / "train.npz", classifier_path, SETTINGS, tmp_path / "ref.npz", 1)
    with np.load(tmp_path / "ref.npz") as ref:
        real_test = _independent_features(classifier_path, torch.from_numpy(to_uint8(load_split(digits_dir / "test.npz").images)), "logits")
        fid_test = _independent_fid(real_test, _independent_features(classifier_path, torch.from_numpy(to_uint8(load_split(digits_dir / "train.npz").images)), "logits"))
        assert int(ref["count"]) == 1437
    out, _, _ = generator_run
    record = evaluate_generator(out / "generator.pt", out / "run.json", classifier_path, tmp_path / "ref.npz", SETTINGS, 1, 0, tmp_path / "s.json", 1)
    assert fid_test < 0.1 * record["scores"]["fid"]


def test_stale_reference_statistics_are_refused(digits_dir, classifier_path, generator_run, tmp_path):
    reference_statistics(digits_dir / "train.npz", classifier_path, {**SETTINGS, "fid_features": "penultimate"}, tmp_path / "ref.npz", 1)
    out, _, _ = generator_run
    with pytest.raises(GanstudyError, match="delete the file and rerun"):
        evaluate_generator(out / "generator.pt", out / "run.json", classifier_path, tmp_path / "ref.npz", SETTINGS, 1, 0, tmp_path / "s.json", 1)
    assert not (tmp_path / "s.json").exists()


def test_in_training_fid_equals_the_independent_computation(digits_dir, classifier_path, generator_run, tmp_path):
    from ganstudy.evaluate.fid import FidScorer

    reference_statistics(digits_dir / "train.npz", classifier_path, SETTINGS, tmp_path / "ref.npz", 1)
    _, generator, spec = generator_run
    images = sample_generator(generator, spec.latent_dim, 500, 9, 500)
    scorer = FidScorer(classifier_path, tmp_path / "ref.npz", torch.device("cpu"))
    real = torch.from_numpy(to_uint8(load_split(digits_dir / "train.npz").images))
    fake = torch.from_numpy(to_uint8(images.numpy()))
    expected = _independent_fid(_independent_features(classifier_path, fake, "logits"), _independent_features(classifier_path, real, "logits"))
    assert scorer.fid(images) == pytest.approx(expected, rel=1e-4)
    with pytest.raises(GanstudyError, match="unreadable"):
        FidScorer(classifier_path, tmp_path / "missing.npz", torch.device("cpu"))


def test_label_tvd_matches_a_hand_computation():
    # Generated histogram (0.5, 0.5, 0) against real (0.25, 0.25, 0.5): TVD = (0.25 + 0.25 + 0.5) / 2.
    assert label_tvd(np.array([0, 0, 1, 1]), {0: 1, 1: 1, 2: 2}) == pytest.approx(0.5)
    # A label the real data lacks counts fully.
    assert label_tvd(np.array([3, 3]), {0: 5}) == pytest.approx(1.0)
    assert label_tvd(np.array([0, 1, 1, 0]), {0: 7, 1: 7}) == 0.0


@pytest.mark.filterwarnings("ignore:Matrix is singular")
def test_per_class_fid_and_label_tvd_of_a_labelled_generator_match_independent_computations(digits_dir, classifier_path, tmp_path):
    spec = NetworkSpec((1, 8, 8), 16, 32)
    torch.manual_seed(1)
    train = load_split(digits_dir / "train.npz")
    labels, counts = np.unique(train.labels, return_counts=True)
    mixture = MixtureGenerator([build_pair("perceptron4", spec)[0] for _ in labels], counts / counts.sum(), labels.tolist())
    save_generator(tmp_path / "generator.pt", mixture, "perceptron4", spec)
    (tmp_path / "run.json").write_text(json.dumps({"setup_name": "labelled", "train_seconds": 2.0}))
    settings = {**SETTINGS, "samples": 1000, "metrics": ["fid", "class_fid", "label_tvd"]}
    reference_statistics(digits_dir / "train.npz", classifier_path, settings, tmp_path / "ref.npz", 1)
    record = evaluate_generator(
        tmp_path / "generator.pt", tmp_path / "run.json", classifier_path, tmp_path / "ref.npz", settings, 7, 2,
        tmp_path / "scores.json", 1,
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
    reference_statistics(digits_dir / "train.npz", classifier_path, settings, tmp_path / "ref.npz", 1)
    record = evaluate_generator(out / "generator.pt", out / "run.json", classifier_path, tmp_path / "ref.npz", settings, 1, 0, tmp_path / "s.json", 1)
    assert set(record["scores"]) == {"fid"}
    assert "does not label its samples" in record["notes"]["class_fid"]
