"""Fashion-MNIST IDX files (plain or gzipped), image folders, SMOTE on the training split, partitions."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from PIL import Image

from ganstudy.data.arrays import load_split
from ganstudy.data.loaders import LoadOptions, load_fashion_mnist, load_image_folder
from ganstudy.data.prepare import prepare_dataset
from ganstudy.data.settings import SmoteSettings
from ganstudy.data.subsets import cell_subset, class_partitions
from ganstudy.errors import GanstudyError
from ganstudy.report.images import real_vs_smote
from test_mnist_fetch import idx_bytes

FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


@pytest.fixture()
def fashion(tmp_path):
    """Unpacked (not gzipped) IDX files, written byte by byte."""
    rng = np.random.default_rng(2)
    arrays = dict(
        zip(
            FILES,
            (rng.integers(0, 256, (12, 28, 28)), np.arange(12) % 10, rng.integers(0, 256, (5, 28, 28)), np.arange(5)),
        )
    )
    for name, array in arrays.items():
        (tmp_path / name).write_bytes(idx_bytes(array))
    return tmp_path, arrays


def test_fashion_mnist_reads_unpacked_idx_files(fashion):
    folder, arrays = fashion
    raw = load_fashion_mnist(str(folder))
    assert raw.images.shape == (17, 1, 28, 28)
    expected = np.concatenate([arrays[FILES[0]], arrays[FILES[2]]])
    np.testing.assert_array_equal(np.rint(raw.images[:, 0] * 255).astype(int), expected)
    assert raw.labels.tolist() == list(np.arange(12) % 10) + list(range(5))


def test_idx_labels_outside_the_classes_and_missing_files_are_named(fashion):
    folder, _ = fashion
    (folder / FILES[3]).write_bytes(idx_bytes(np.array([0, 1, 2, 3, 12])))
    with pytest.raises(GanstudyError, match=rf"{FILES[3]}: label 12 is outside 0..9"):
        load_fashion_mnist(str(folder))
    (folder / FILES[3]).unlink()
    with pytest.raises(GanstudyError, match=rf"{FILES[3]}.gz \(or the unpacked {FILES[3]}\) does not exist"):
        load_fashion_mnist(str(folder))


def _folder(root, counts: dict[str, int], size=(20, 16), mode="L", seed=0):
    rng = np.random.default_rng(seed)
    for name, count in counts.items():
        (root / name).mkdir(parents=True)
        for i in range(count):
            shape = (size[1], size[0]) if mode == "L" else (size[1], size[0], 3)
            Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode).save(root / name / f"{i:02d}.png")
    return root


def test_image_folder_labels_by_sorted_folder_and_resizes(tmp_path):
    root = _folder(tmp_path / "set", {"normal": 3, "covid": 2})
    Image.fromarray(np.zeros((30, 30, 3), np.uint8), "RGB").save(root / "covid" / "colour.jpg")
    raw = load_image_folder(str(root), LoadOptions(image_size=8, channels=1))
    assert raw.class_names == ("covid", "normal")
    assert raw.labels.tolist() == [0, 0, 0, 1, 1, 1]
    assert raw.images.shape == (6, 1, 8, 8) and 0 <= raw.images.min() and raw.images.max() <= 1
    # A uniform image stays uniform through antialiased resizing.
    np.testing.assert_allclose(raw.images[2], 0.0, atol=1e-6)
    assert load_image_folder(str(root), LoadOptions(image_size=8)).images.shape[1] == 3  # colour present: RGB


def test_image_folder_problems_name_the_file_or_folder(tmp_path):
    root = _folder(tmp_path / "set", {"a": 2, "b": 2})
    (root / "b" / "broken.png").write_bytes(b"\x89PNG not really")
    with pytest.raises(GanstudyError, match=r"b/broken.png is not a readable PNG/JPEG image"):
        load_image_folder(str(root))
    (root / "b" / "broken.png").unlink()
    Image.fromarray(np.zeros((5, 7), np.uint8)).save(root / "b" / "small.png")
    with pytest.raises(GanstudyError, match=r"b/small.png is 7x5 but .*a/00.png is 20x16: set dataset.image_size"):
        load_image_folder(str(root))
    (root / "c").mkdir()
    with pytest.raises(GanstudyError, match=r"class folder .*/c holds no PNG or JPEG images"):
        load_image_folder(str(root), LoadOptions(image_size=8))


SMOTE = SmoteSettings("balance", 15, 5)


def _prepare(root, out, smote=SmoteSettings(), size=8):
    return prepare_dataset("image_folder", str(root), 0.25, 3, out, LoadOptions(image_size=size, channels=1), smote)


def test_smote_balances_the_training_split_only(tmp_path, capfd):
    root = _folder(tmp_path / "set", {"many": 20, "few": 4})
    plain = _prepare(root, tmp_path / "plain")
    balanced = _prepare(root, tmp_path / "smote", SMOTE)
    assert balanced["class_counts"]["train"] == {"0": 3, "1": 15}  # few=0, many=1 (sorted names)
    assert balanced["class_counts"]["train_after_smote"] == {"0": 15, "1": 15}
    # Only 3 training images of 'few': k_neighbors drops from 5 to 2, and says so.
    assert balanced["smote"]["k_neighbors_used"] == 2 and "k_neighbors lowered from 5 to 2" in capfd.readouterr().err
    # The test split is the same file with or without SMOTE.
    assert (tmp_path / "plain" / "test.npz").read_bytes() == (tmp_path / "smote" / "test.npz").read_bytes()
    assert plain["files"]["test"]["sha256"] == balanced["files"]["test"]["sha256"]
    train = load_split(tmp_path / "smote" / "train.npz")
    original = load_split(tmp_path / "plain" / "train.npz")
    assert train.synthetic.sum() == 12 and not train.synthetic[:18].any()
    np.testing.assert_array_equal(train.images[:18], original.images)
    assert train.images.min() >= -1 and train.images.max() <= 1
    # Every synthetic image lies on a segment between two real training images of its class.
    few = original.images[original.labels == 0].reshape(3, -1).astype(np.float64)
    for image in train.images[train.synthetic].reshape(12, -1):
        residuals = []
        for a, b in itertools.permutations(few, 2):
            t = np.clip(np.dot(image - a, b - a) / np.dot(b - a, b - a), 0, 1)
            residuals.append(np.abs(a + t * (b - a) - image).max())
        assert min(residuals) < 1e-5
    real_vs_smote(tmp_path / "smote" / "train.npz", tmp_path / "grid.png", per_class=4)
    assert Image.open(tmp_path / "grid.png").size == ((2 * 4 * 9 + 1) * 4, (2 * 9 + 1) * 4)


def test_smote_factor_grows_every_class_even_a_single_one(tmp_path):
    root = _folder(tmp_path / "set", {"positive": 8})
    manifest = _prepare(root, tmp_path / "out", SmoteSettings("factor", 15, 5))
    assert manifest["class_counts"]["train_after_smote"] == {"0": 90}
    assert manifest["smote"]["synthetic_images"] == 84


def test_a_class_with_one_training_image_stops_smote_clearly(tmp_path):
    root = _folder(tmp_path / "set", {"many": 20, "two": 2})
    with pytest.raises(GanstudyError, match=r"class\(es\) \[1\] have fewer than 2 training images; SMOTE"):
        _prepare(root, tmp_path / "out", SMOTE)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_partitions_file_lists_each_class_of_the_training_split(tmp_path, digits_dir):
    manifest = prepare_dataset("digits", None, 0.2, 2026, tmp_path)
    train = load_split(tmp_path / "train.npz")
    with np.load(tmp_path / "partitions.npz") as partitions:
        assert sorted(partitions.files) == [f"class_{c}" for c in range(10)]
        for label in range(10):
            np.testing.assert_array_equal(partitions[f"class_{label}"], np.flatnonzero(train.labels == label))
    assert (
        json.loads((tmp_path / "manifest.json").read_text())["files"]["partitions"]["classes"]
        == 10
        == manifest["num_classes"]
    )


def test_cell_subsets_keep_their_classes_and_ratio():
    labels = np.repeat(np.arange(4), 25)
    subset = cell_subset(labels, 0.4, [1, 3], minimum=10, seed=5)
    assert len(subset) == 20 and set(labels[subset]) <= {1, 3}
    np.testing.assert_array_equal(subset, cell_subset(labels, 0.4, [1, 3], minimum=10, seed=5))
    assert not np.array_equal(subset, cell_subset(labels, 0.4, [1, 3], minimum=10, seed=6))
    assert len(cell_subset(labels, 0.01, None, minimum=30, seed=1)) == 30  # at least one batch
    assert len(cell_subset(labels, 1.0, None, minimum=1, seed=1)) == 100
    assert {k: len(v) for k, v in class_partitions(labels).items()} == {0: 25, 1: 25, 2: 25, 3: 25}
    with pytest.raises(GanstudyError, match=r"classes \[7\] have no training images"):
        cell_subset(labels, 1.0, [7], minimum=1, seed=1)
