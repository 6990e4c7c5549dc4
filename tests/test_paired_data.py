"""Paired images in pix2pix's aligned layout (paired_folder): halves, direction, the source's own split,
conditions in the saved splits, the errors that name the problem, and fetching an archive that has no
published checksum (facades) with a tar unpacked safely."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import numpy as np
import pytest
from PIL import Image

from conftest import SCHEMA, spec_file
from ganstudy.cli import main
from ganstudy.config.validate import ConfigError, validate_study_config
from ganstudy.data.arrays import file_digest, load_split
from ganstudy.data.fetch import extract_tar, fetch_dataset
from ganstudy.data.loaders import LoadOptions
from ganstudy.data.paired import load_paired_folder
from ganstudy.data.prepare import prepare_dataset
from ganstudy.data.settings import SmoteSettings
from ganstudy.errors import GanstudyError

# File name -> its row in sorted order; written in another order so that sorting is what is tested.
TRAIN = {"b.png": 1, "c.png": 2, "a.jpg": 0}
TEST = {"y.jpg": 4, "x.png": 3}


def colours(row: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The uniform RGB colours of a row's left half A and right half B, distinct in every channel."""
    return (20 * row + 10, 100, 200), (250, 30 * row + 5, 0)


def expected(row: int, half: str) -> np.ndarray:
    a, b = colours(row)
    return np.array(a if half == "A" else b, np.float32)[:, None, None] / 255


def write_pair(file, a, b, width: int = 32, height: int = 16) -> None:
    pixels = np.empty((height, width, 3), np.uint8)
    pixels[:, : width // 2] = a
    pixels[:, width // 2 :] = b
    # Full-quality JPEG without chroma subsampling keeps uniform 16x16 halves within a level or two.
    Image.fromarray(pixels).save(file, quality=100, subsampling=0)


def paired_root(root, folders=None):
    for folder, files in (folders or {"train": TRAIN, "test": TEST}).items():
        (root / folder).mkdir(parents=True)
        for name, row in files.items():
            write_pair(root / folder / name, *colours(row))
    (root / "train" / "notes.txt").write_text("not an image: ignored")
    return root


def assert_rows(array: np.ndarray, rows: list[int], half: str, prepared: bool = False) -> None:
    """Each row of ``array`` is the given half of its pair, in [0, 1] as loaded or [-1, 1] as prepared."""
    assert len(array) == len(rows)
    for got, row in zip(array, rows):
        want = expected(row, half) * 2 - 1 if prepared else expected(row, half)
        np.testing.assert_allclose(got, np.broadcast_to(want, got.shape), atol=(5 if prepared else 2.5) / 255)


def test_halves_follow_the_direction_in_sorted_order(tmp_path):
    root = paired_root(tmp_path / "pairs")
    atob = load_paired_folder(str(root))
    assert atob.images.shape == atob.conditions.shape == (5, 3, 16, 16) and atob.images.dtype == np.float32
    assert atob.split.tolist() == ["train"] * 3 + ["test"] * 2
    assert atob.labels.tolist() == [0] * 5
    rows = [0, 1, 2, 3, 4]  # a.jpg b.png c.png | x.png y.jpg
    assert_rows(atob.conditions, rows, "A")  # AtoB: the generator maps A to B
    assert_rows(atob.images, rows, "B")
    btoa = load_paired_folder(str(root), LoadOptions(direction="BtoA"))
    np.testing.assert_array_equal(btoa.conditions, atob.images)
    np.testing.assert_array_equal(btoa.images, atob.conditions)


def test_both_halves_get_the_configured_size_and_channels(tmp_path):
    raw = load_paired_folder(str(paired_root(tmp_path / "pairs")), LoadOptions(image_size=8, channels=1))
    assert raw.images.shape == raw.conditions.shape == (5, 1, 8, 8)
    luma = np.array([0.299, 0.587, 0.114], np.float32)
    for row in range(5):
        np.testing.assert_allclose(raw.conditions[row], (luma @ expected(row, "A")[:, 0, 0]), atol=2.5 / 255)


def test_prepare_keeps_the_source_split_and_saves_the_conditions(tmp_path):
    root = paired_root(tmp_path / "pairs")
    manifest = prepare_dataset("paired_folder", str(root), 0.5, 1, tmp_path / "out")
    assert manifest["source_split"] == {"train": "train", "test": "test", "folder_images": {"train": 3, "test": 2}}
    assert "test_fraction" not in manifest and "split_seed" not in manifest  # nothing random was split
    assert manifest["direction"] == "AtoB"
    assert manifest["condition_shape"] == manifest["image_shape"] == [3, 16, 16]
    assert manifest["num_classes"] == 1 and manifest["class_counts"]["train"] == {"0": 3}
    written = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert written == manifest
    for name, rows in (("train", [0, 1, 2]), ("test", [3, 4])):
        entry = manifest["files"][name]
        assert entry["images"] == len(rows) and entry["sha256"] == file_digest(tmp_path / "out" / entry["path"])
        split = load_split(tmp_path / "out" / f"{name}.npz")
        assert split.conditions.dtype == np.float32 and split.condition_shape == (3, 16, 16)
        assert split.synthetic is None
        assert_rows(split.conditions, rows, "A", prepared=True)
        assert_rows(split.images, rows, "B", prepared=True)


@pytest.mark.parametrize(
    "folders, test_from, test_rows",
    [
        ({"train": TRAIN, "val": TEST}, "val", [3, 4]),
        # val beside test is left out, as pix2pix trains on train/ and tests on test/.
        ({"train": TRAIN, "val": {"v.png": 5}, "test": TEST}, "test", [3, 4]),
    ],
)
def test_val_is_the_test_split_only_without_a_test_folder(tmp_path, folders, test_from, test_rows):
    root = paired_root(tmp_path / "pairs", folders)
    manifest = prepare_dataset("paired_folder", str(root), 0.2, 1, tmp_path / "out")
    assert manifest["source_split"]["test"] == test_from
    assert manifest["source_split"]["folder_images"] == {name: len(files) for name, files in folders.items()}
    assert manifest["files"]["train"]["images"] == 3 and manifest["files"]["test"]["images"] == len(test_rows)
    assert_rows(load_split(tmp_path / "out" / "test.npz").conditions, test_rows, "A", prepared=True)


def test_cli_prepare_takes_the_validated_dataset_section(tmp_path, capsys):
    root = paired_root(tmp_path / "pairs")
    config = validate_study_config({"dataset": {"name": "paired_folder", "path": str(root)}}, SCHEMA)
    assert config["dataset"]["direction"] == "AtoB"  # the schema's default
    settings = {**config["dataset"], "direction": "BtoA", "image_size": 8}
    spec = spec_file(tmp_path / "data.json", "dataset", settings, seed=5)
    assert main(["prepare", "--spec", spec, "--out-dir", str(tmp_path / "out")]) == 0
    assert json.loads(capsys.readouterr().out)["test"] == {"0": 2}
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["direction"] == "BtoA" and manifest["condition_shape"] == [3, 8, 8]
    train = load_split(tmp_path / "out" / "train.npz")
    assert_rows(train.images, [0, 1, 2], "A", prepared=True)  # BtoA: the generator makes A


def test_an_unknown_direction_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"'dataset.direction' must be one of \['AtoB', 'BtoA'\], got 'AtoC'"):
        validate_study_config({"dataset": {"name": "paired_folder", "direction": "AtoC"}}, SCHEMA)
    # A hand-written spec file skips the schema; the loader refuses it too.
    with pytest.raises(GanstudyError, match="dataset.direction must be one of AtoB, BtoA, got 'AtoC'"):
        load_paired_folder(str(paired_root(tmp_path / "pairs")), LoadOptions(direction="AtoC"))


def test_bad_folders_and_files_are_named(tmp_path):
    root = paired_root(tmp_path / "pairs")
    write_pair(root / "test" / "odd.png", (0, 0, 0), (9, 9, 9), width=31)
    with pytest.raises(GanstudyError, match=r"test/odd.png is 31x16: a pair needs an even width"):
        load_paired_folder(str(root))
    (root / "test" / "odd.png").unlink()
    write_pair(root / "test" / "big.png", (0, 0, 0), (9, 9, 9), width=64, height=32)
    with pytest.raises(
        GanstudyError, match=r"test/big.png is 64x32 but .*train/a.jpg is 32x16: set dataset.image_size"
    ):
        load_paired_folder(str(root))
    assert load_paired_folder(str(root), LoadOptions(image_size=16)).images.shape == (6, 3, 16, 16)
    (root / "test" / "big.png").unlink()
    (root / "train" / "broken.jpg").write_bytes(b"\xff\xd8 not really a JPEG")
    with pytest.raises(GanstudyError, match=r"train/broken.jpg is not a readable PNG/JPEG image"):
        load_paired_folder(str(root))
    (root / "train" / "broken.jpg").unlink()
    (root / "test").rename(root / "elsewhere")
    with pytest.raises(GanstudyError, match=r"has train/ but neither test/ nor val/"):
        load_paired_folder(str(root))
    (root / "train").rename(root / "training")
    with pytest.raises(GanstudyError, match=rf"{root} has no train/ folder"):
        prepare_dataset("paired_folder", str(root), 0.2, 1, tmp_path / "out")
    with pytest.raises(GanstudyError, match="needs dataset.path"):
        load_paired_folder(None)


def test_smote_would_invent_pairs_and_is_refused(tmp_path):
    root = paired_root(tmp_path / "pairs")
    smote = SmoteSettings("balance", 15, 5)
    with pytest.raises(GanstudyError, match="SMOTE cannot oversample a data set with conditions"):
        prepare_dataset("paired_folder", str(root), 0.2, 1, tmp_path / "out", smote=smote)
    assert not (tmp_path / "out").exists()


def tar_with(path, members: list[tuple[tarfile.TarInfo, bytes]]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            info.size = len(data) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)


def test_a_fetched_archive_without_checksum_is_recorded_and_unpacked(tmp_path, capfd):
    pairs = paired_root(tmp_path / "pairs")
    folder = tmp_path / "data"
    folder.mkdir()
    archive = folder / "facades.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for file in sorted(pairs.rglob("*.*")):
            tar.add(file, arcname=f"./facades/{file.relative_to(pairs)}")
    # Already in place, so the mirror (a closed local port) is never asked.
    placed = fetch_dataset("facades", folder, mirror="http://127.0.0.1:9/", timeout=2)
    assert placed == [archive, folder / "facades"]
    sha256 = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert (folder / "facades.tar.gz.sha256").read_text() == f"{sha256}  facades.tar.gz\n"
    err = capfd.readouterr().err
    assert "facades.tar.gz has no published checksum and is not verified" in err and sha256 in err
    np.testing.assert_array_equal(
        load_paired_folder(str(folder / "facades")).images, load_paired_folder(str(pairs)).images
    )
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no staging folder left
    # An entry already unpacked is kept, not written again.
    (folder / "facades" / "train" / "a.jpg").unlink()
    fetch_dataset("facades", folder, mirror="http://127.0.0.1:9/", timeout=2)
    assert not (folder / "facades" / "train" / "a.jpg").exists()


def test_without_the_archive_fetch_says_no_checksum_is_published(tmp_path):
    with pytest.raises(GanstudyError, match=r"facades.tar.gz  \(no published checksum\)"):
        fetch_dataset("facades", tmp_path, mirror="http://127.0.0.1:9/", timeout=2)


@pytest.mark.parametrize(
    "name, kind, problem",
    [
        ("../evil.txt", tarfile.REGTYPE, "would land outside"),
        ("facades/../../evil.txt", tarfile.REGTYPE, "would land outside"),
        ("/tmp/evil.txt", tarfile.REGTYPE, "would land outside"),
        ("facades/link", tarfile.SYMTYPE, "is a link or a special file"),
    ],
)
def test_an_unsafe_tar_member_refuses_the_whole_archive(tmp_path, name, kind, problem):
    archive = tmp_path / "bad.tar.gz"
    safe = tarfile.TarInfo("facades/train/a.txt")
    unsafe = tarfile.TarInfo(name)
    unsafe.type = kind
    unsafe.linkname = "/etc/passwd" if kind == tarfile.SYMTYPE else ""
    tar_with(archive, [(safe, b"fine"), (unsafe, b"evil")])
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(GanstudyError, match=rf"bad.tar.gz: member '{name}' {problem}"):
        extract_tar(archive, folder)
    assert list(folder.iterdir()) == [] and not (tmp_path / "evil.txt").exists()


def test_a_broken_archive_is_named(tmp_path):
    archive = tmp_path / "facades.tar.gz"
    archive.write_bytes(b"\x1f\x8b not a tar")
    with pytest.raises(GanstudyError, match=r"facades.tar.gz cannot be unpacked"):
        extract_tar(archive, tmp_path)
