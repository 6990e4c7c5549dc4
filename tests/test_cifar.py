"""CIFAR-10/100 loaders against tiny archives made here in the published layout (pickled batches in a tar.gz)."""

from __future__ import annotations

import io
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from ganstudy.data.loaders import load_cifar10, load_cifar100
from ganstudy.errors import GanstudyError

CIFAR10_MEMBERS = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]


class _Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def _archive(path: Path, folder: str, batches: dict[str, object]) -> None:
    with tarfile.open(path, "w:gz") as archive:
        for member, content in batches.items():
            data = pickle.dumps(content, protocol=2)
            info = tarfile.TarInfo(f"{folder}/{member}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def _batch(rng, rows: int, label_key: str, classes: int) -> dict:
    return {
        "data": rng.integers(0, 256, (rows, 3072), dtype=np.uint8),
        label_key: [int(v) for v in rng.integers(0, classes, rows)],
    }


@pytest.fixture()
def cifar10(tmp_path):
    rng = np.random.default_rng(0)
    batches = {member: _batch(rng, 4, "labels", 10) for member in CIFAR10_MEMBERS}
    _archive(tmp_path / "cifar-10-python.tar.gz", "cifar-10-batches-py", batches)
    return tmp_path, batches


def test_cifar10_reads_every_batch_in_order_as_chw_images(cifar10):
    folder, batches = cifar10
    raw = load_cifar10(str(folder))
    assert raw.images.shape == (24, 3, 32, 32) and raw.images.dtype == np.float32
    expected = np.concatenate([batches[m]["data"] for m in CIFAR10_MEMBERS]).reshape(-1, 3, 32, 32) / 255.0
    np.testing.assert_allclose(raw.images, expected, rtol=0, atol=1e-7)
    assert raw.labels.tolist() == [int(v) for m in CIFAR10_MEMBERS for v in batches[m]["labels"]]


def test_cifar100_uses_the_fine_labels(tmp_path):
    rng = np.random.default_rng(1)
    batches = {m: {**_batch(rng, 5, "fine_labels", 100), "coarse_labels": [0] * 5} for m in ("train", "test")}
    _archive(tmp_path / "cifar-100-python.tar.gz", "cifar-100-python", batches)
    raw = load_cifar100(str(tmp_path))
    assert raw.images.shape == (10, 3, 32, 32)
    assert raw.labels.tolist() == [int(v) for m in ("train", "test") for v in batches[m]["fine_labels"]]


@pytest.mark.parametrize(
    "member, content, message",
    [
        (
            "data_batch_3",
            {"data": np.zeros((4, 3000), np.uint8), "labels": [0] * 4},
            "data_batch_3: 'data' must be uint8 rows of 3072",
        ),
        (
            "test_batch",
            {"data": np.zeros((4, 3072), np.uint8), "labels": [0, 1, 2, 10]},
            "test_batch: expected 4 labels in 0..9",
        ),
        ("data_batch_1", {"data": np.zeros((4, 3072), np.uint8)}, "data_batch_1 is missing"),
        ("data_batch_2", _Exploit(), "data_batch_2 is not a CIFAR python batch .*refusing to load posix.system"),
    ],
)
def test_a_corrupt_batch_is_refused_naming_the_member(cifar10, member, content, message):
    folder, batches = cifar10
    _archive(folder / "cifar-10-python.tar.gz", "cifar-10-batches-py", {**batches, member: content})
    with pytest.raises(GanstudyError, match=message):
        load_cifar10(str(folder))


def test_a_missing_or_truncated_archive_names_the_file(cifar10):
    folder, _ = cifar10
    archive = folder / "cifar-10-python.tar.gz"
    archive.write_bytes(archive.read_bytes()[:100])
    with pytest.raises(GanstudyError, match="cifar-10-python.tar.gz"):
        load_cifar10(str(folder))
    with pytest.raises(GanstudyError, match="needs dataset.path"):
        load_cifar10(None)
