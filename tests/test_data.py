import json

import numpy as np
import pytest
from sklearn.datasets import load_digits

from ganstudy.data.arrays import file_digest, load_split, to_uint8
from ganstudy.data.prepare import prepare_dataset
from ganstudy.errors import GanstudyError


def test_digits_split_is_normalised_stratified_and_complete(digits_dir):
    train, test = load_split(digits_dir / "train.npz"), load_split(digits_dir / "test.npz")
    assert train.images.shape[1:] == (1, 8, 8) and train.images.dtype == np.float32
    assert train.images.min() == -1.0 and train.images.max() == 1.0
    assert len(train.labels) + len(test.labels) == 1797
    assert len(test.labels) == 360  # ceil(0.2 * 1797), scikit-learn's rounding
    # Every image lands in exactly one split: compare as multisets of rows.
    source = load_digits()
    expected = np.sort((source.images.reshape(1797, -1) / 8.0 - 1.0).astype(np.float32), axis=0)
    ours = np.sort(np.concatenate([train.images, test.images]).reshape(1797, -1), axis=0)
    np.testing.assert_array_equal(ours, expected)
    # Stratified: each class's share of the test split is within one image of its share overall.
    overall = np.bincount(source.target)
    assert np.all(np.abs(np.bincount(test.labels) - overall * 360 / 1797) <= 1)


def test_manifest_records_counts_and_checksums(digits_dir):
    manifest = json.loads((digits_dir / "manifest.json").read_text())
    assert manifest["num_classes"] == 10 and manifest["image_shape"] == [1, 8, 8]
    for split in ("train", "test"):
        entry = manifest["files"][split]
        assert entry["sha256"] == file_digest(digits_dir / entry["path"])
        assert sum(manifest["class_counts"][split].values()) == entry["images"]
    assert manifest["class_counts"]["all"]["0"] == 178


def test_prepare_is_deterministic_and_seed_dependent(tmp_path, digits_dir):
    prepare_dataset("digits", None, 0.2, 2026, tmp_path / "a")
    prepare_dataset("digits", None, 0.2, 2027, tmp_path / "b")
    assert file_digest(tmp_path / "a" / "train.npz") == file_digest(digits_dir / "train.npz")
    assert file_digest(tmp_path / "b" / "train.npz") != file_digest(digits_dir / "train.npz")


def _write_npz(path, images, labels):
    np.savez(path, images=images, labels=labels)
    return str(path)


def test_npz_loader_reads_uint8_images(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(40, 6, 6), dtype=np.uint8)
    labels = np.repeat([0, 1], 20)
    path = _write_npz(tmp_path / "mine.npz", images, labels)
    prepare_dataset("npz", path, 0.25, 1, tmp_path / "out")
    train, test = load_split(tmp_path / "out" / "train.npz"), load_split(tmp_path / "out" / "test.npz")
    assert train.images.shape == (30, 1, 6, 6) and len(test.labels) == 10
    # uint8 -> [-1, 1] -> uint8 is lossless.
    restored = np.sort(to_uint8(np.concatenate([train.images, test.images])).reshape(40, -1), axis=0)
    np.testing.assert_array_equal(restored, np.sort(images.reshape(40, -1), axis=0))


def test_missing_dataset_file_is_named(tmp_path):
    missing = tmp_path / "nowhere" / "data.npz"
    with pytest.raises(GanstudyError, match=f"dataset file {missing} does not exist"):
        prepare_dataset("npz", str(missing), 0.2, 1, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "images, labels, message",
    [
        (np.zeros((10, 2, 4, 4), np.uint8), np.zeros(10, int), "C 1 or 3"),
        (np.zeros((10, 4, 4), np.uint8), np.zeros(9, int), "'labels' must be 10 integers"),
        (np.full((10, 4, 4), 2.0), np.zeros(10, int), r"float images must lie in \[0, 1\]"),
        (np.zeros((10, 4, 4), np.uint8), -np.ones(10, int), "labels must be 0 or more"),
    ],
)
def test_npz_loader_rejects_bad_arrays_naming_the_file(tmp_path, images, labels, message):
    path = _write_npz(tmp_path / "bad.npz", images, labels)
    with pytest.raises(GanstudyError, match=message) as error:
        prepare_dataset("npz", path, 0.2, 1, tmp_path / "out")
    assert str(path) in str(error.value)


def test_npz_loader_rejects_a_file_that_is_not_npz(tmp_path):
    path = tmp_path / "fake.npz"
    path.write_bytes(b"not a zip archive")
    with pytest.raises(GanstudyError, match="not a readable .npz file"):
        prepare_dataset("npz", str(path), 0.2, 1, tmp_path / "out")


def test_a_single_image_class_cannot_be_split(tmp_path):
    labels = np.array([0] * 10 + [1])
    path = _write_npz(tmp_path / "tiny.npz", np.zeros((11, 4, 4), np.uint8), labels)
    with pytest.raises(GanstudyError, match=r"class\(es\) \['1'\].*fewer than 2 images"):
        prepare_dataset("npz", path, 0.2, 1, tmp_path / "out")


def test_unknown_data_set_lists_the_registered_ones(tmp_path):
    with pytest.raises(
        GanstudyError,
        match="unknown data set 'cifar7'; registered data sets: calorimeter, cifar10, cifar100, digits, "
        "fashion_mnist, image_folder, mnist, npz, paired_folder",
    ):
        prepare_dataset("cifar7", None, 0.2, 1, tmp_path)


def test_digits_refuses_a_path(tmp_path):
    with pytest.raises(GanstudyError, match="embedded"):
        prepare_dataset("digits", "x.npz", 0.2, 1, tmp_path)
