"""3DGAN's HDF5 shower files (dataset calorimeter): the layout its loaders read, its scaling, a folder
of files, block-wise reading, the prepared split in the showers' own units, and every bad file named."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from ganstudy.data import calorimeter
from ganstudy.data.arrays import load_split
from ganstudy.data.calorimeter import load_calorimeter
from ganstudy.data.loaders import LoadOptions
from ganstudy.data.prepare import prepare_dataset
from ganstudy.data.settings import SmoteSettings
from ganstudy.errors import GanstudyError

SHAPE = (5, 5, 7)


def showers(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Depositions in GeV with some cells below 3DGAN's 1e-6 threshold, and primary energies 10-500 GeV."""
    rng = np.random.default_rng(seed)
    ecal = rng.exponential(0.01, (count, *SHAPE))
    ecal[rng.random(ecal.shape) < 0.3] = 5e-7
    return ecal, rng.uniform(10, 500, count)


def write_file(path, count: int = 6, seed: int = 0, **datasets) -> tuple[np.ndarray, np.ndarray]:
    ecal, energy = showers(count, seed)
    defaults = {"ECAL": ecal, "target": np.stack([np.full(count, 11.0), energy], axis=1)}
    with h5py.File(path, "w") as handle:
        for name, array in {**defaults, **datasets}.items():
            if array is not None:
                handle[name] = array
    return ecal, energy


def expected(ecal: np.ndarray) -> np.ndarray:
    return (np.where(ecal.astype(np.float32) < 1e-6, 0, ecal.astype(np.float32)) * 100)[:, None]


def test_a_file_loads_as_3dgan_trains_on_it(tmp_path):
    ecal, energy = write_file(tmp_path / "EleEscan_1_1.h5")
    raw = load_calorimeter(str(tmp_path / "EleEscan_1_1.h5"), LoadOptions())
    assert raw.images.shape == (6, 1, *SHAPE) and raw.images.dtype == np.float32 and raw.native_units
    np.testing.assert_array_equal(raw.images, expected(ecal))
    assert (raw.images == 0).mean() > 0.2 and raw.images.max() == pytest.approx(ecal.max() * 100, rel=1e-6)
    np.testing.assert_allclose(raw.conditions[:, 0], energy / 100, rtol=1e-6)
    assert raw.conditions.shape == (6, 1) and set(raw.labels) == {0}


def test_a_folder_of_files_is_read_in_name_order_a_block_at_a_time(tmp_path, monkeypatch):
    second = write_file(tmp_path / "b.h5", 4, seed=2)
    first = write_file(tmp_path / "a.hdf5", 5, seed=1)
    (tmp_path / "notes.txt").write_text("not a shower file: ignored")
    monkeypatch.setattr(calorimeter, "BLOCK", 2)
    raw = load_calorimeter(str(tmp_path), LoadOptions())
    np.testing.assert_array_equal(raw.images, np.concatenate([expected(first[0]), expected(second[0])]))
    np.testing.assert_allclose(raw.conditions[:, 0], np.concatenate([first[1], second[1]]) / 100, rtol=1e-6)
    assert raw.source.endswith("a.hdf5, b.h5")


@pytest.mark.parametrize("layout", ["flat", "column", "older"])
def test_files_with_an_energy_dataset_instead_of_target(tmp_path, layout):
    energy = np.array([20.0, 40.0, 80.0])
    stored = {"flat": energy, "column": energy[:, None], "older": np.stack([np.zeros(3), energy], axis=1)[:, None, :]}[
        layout
    ]
    write_file(tmp_path / "s.h5", 3, target=None, energy=stored)
    raw = load_calorimeter(str(tmp_path / "s.h5"), LoadOptions())
    np.testing.assert_allclose(raw.conditions[:, 0], energy / 100, rtol=1e-6)


def test_prepare_keeps_the_showers_units_and_the_energies_with_their_rows(tmp_path):
    ecal, energy = write_file(tmp_path / "s.h5", 10)
    manifest = prepare_dataset("calorimeter", str(tmp_path / "s.h5"), 0.2, 7, tmp_path / "out")
    train, test = load_split(tmp_path / "out" / "train.npz"), load_split(tmp_path / "out" / "test.npz")
    assert len(train.labels) == 8 and len(test.labels) == 2
    assert manifest["image_shape"] == [1, *SHAPE] and manifest["condition_shape"] == [1] and "direction" not in manifest
    assert manifest["value_range"] == [0.0, pytest.approx(float(expected(ecal).max()))]
    # Every prepared row is a shower of the file beside its own energy, unscaled to [-1, 1].
    for split in (train, test):
        for image, condition in zip(split.images, split.conditions):
            row = int(np.argmin(np.abs(energy / 100 - condition[0])))
            np.testing.assert_array_equal(image, expected(ecal)[row])
    with pytest.raises(GanstudyError, match="showers' primary energies"):
        prepare_dataset(
            "calorimeter", str(tmp_path / "s.h5"), 0.2, 7, tmp_path / "smote", smote=SmoteSettings("balance", 2, 1)
        )


def test_bad_files_and_settings_are_named(tmp_path):
    load = load_calorimeter
    with pytest.raises(GanstudyError, match="needs dataset.path"):
        load(None, LoadOptions())
    with pytest.raises(GanstudyError, match="does not exist"):
        load(str(tmp_path / "missing.h5"), LoadOptions())
    (tmp_path / "empty").mkdir()
    with pytest.raises(GanstudyError, match="holds no .h5 or .hdf5 file"):
        load(str(tmp_path / "empty"), LoadOptions())
    (tmp_path / "text.h5").write_text("not HDF5")
    with pytest.raises(GanstudyError, match=r"text.h5 is not a readable HDF5 file .*replace it"):
        load(str(tmp_path / "text.h5"), LoadOptions())
    cases = {
        "no_ecal.h5": (
            {"ECAL": None, "showers": np.zeros((2, 2))},
            r"has no dataset 'ECAL' .*it has \['showers', 'target'\]",
        ),
        "no_energy.h5": ({"target": None}, r"holds no primary energy: neither dataset 'target' nor 'energy'"),
        "flat_ecal.h5": ({"ECAL": np.zeros((6, 25))}, r"'ECAL' has shape \(6, 25\); expected \(N, X, Y, Z\)"),
        "short_target.h5": ({"target": np.ones((6, 1))}, r"'target' has shape \(6, 1\); 3DGAN's files have \(N, 2\)"),
        "fewer.h5": ({"target": np.ones((5, 2))}, "6 showers but 5 primary energies"),
        "zero.h5": ({"target": np.zeros((6, 2))}, "must be positive numbers; 6 are not"),
    }
    for name, (datasets, problem) in cases.items():
        write_file(tmp_path / name, **datasets)
        with pytest.raises(GanstudyError, match=problem):
            load(str(tmp_path / name), LoadOptions())
    write_file(tmp_path / "ok.h5")
    with pytest.raises(GanstudyError, match="image_size and dataset.channels do not apply to calorimeter showers"):
        load(str(tmp_path / "ok.h5"), LoadOptions(image_size=25))
    (tmp_path / "mixed").mkdir()
    write_file(tmp_path / "mixed" / "a.h5")
    write_file(tmp_path / "mixed" / "b.h5", ECAL=np.ones((6, 5, 5, 5)))
    with pytest.raises(GanstudyError, match="differ in shape"):
        load(str(tmp_path / "mixed"), LoadOptions())
