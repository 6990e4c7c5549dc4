"""The calorimeter showers of 3DGAN (seed 003's system): HDF5 files as svalleco/3Dgan's loaders read
them (keras/EcalEnergyTrain.py, GetprocData), e.g. the EleEscan electron files of 10,000 events each.

Each file holds ``ECAL``, the energy deposited in every cell, (N, 25, 25, 25) in GeV, and the primary
energy in GeV as column 1 of ``target`` (N, 2), or in older files as ``energy`` ((N,), (N, 1), or
(N, 1, 2) with the energy in [:, 0, 1]). As 3DGAN trains on them, depositions below 1e-6 are zeroed and
the rest multiplied by 100 (its xscale), and the energy divided by 100 (its yscale, so that its 10-500 GeV
become 0.1-5). The showers stay in those units: they are neither resized nor brought to [-1, 1].
Files are read a block of events at a time, so a block, not a file, bounds the extra memory.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ganstudy.data.loaders import DataSet, LoadOptions, RawDataset
from ganstudy.errors import GanstudyError

DEPOSIT_SCALE = 100.0
ENERGY_SCALE = 100.0
THRESHOLD = 1e-6
BLOCK = 1000


def shower_files(path: str | None) -> list[Path]:
    """The .h5/.hdf5 file at ``path``, or every such file in the folder, in name order."""
    if path is None:
        raise GanstudyError("dataset 'calorimeter' needs dataset.path: an HDF5 file of showers, or a folder of them")
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise GanstudyError(
            f"dataset path {root} does not exist; set dataset.path to an HDF5 file of showers or a folder of them"
        )
    files = sorted(p for p in root.iterdir() if p.suffix.lower() in (".h5", ".hdf5"))
    if not files:
        raise GanstudyError(f"folder {root} holds no .h5 or .hdf5 file; put the shower files there")
    return files


def _primary_energy(file: Path, handle) -> np.ndarray:
    if "target" in handle:
        target = handle["target"]
        if target.ndim != 2 or target.shape[1] < 2:
            raise GanstudyError(
                f"{file}: dataset 'target' has shape {target.shape}; 3DGAN's files have (N, 2) with the "
                "primary energy in column 1"
            )
        return np.asarray(target[:, 1], np.float64)
    if "energy" in handle:
        energy = np.asarray(handle["energy"], np.float64)
        if energy.ndim == 3 and energy.shape[1:] == (1, 2):
            return energy[:, 0, 1]
        if energy.ndim == 1 or (energy.ndim == 2 and energy.shape[1] == 1):
            return energy.reshape(-1)
        raise GanstudyError(f"{file}: dataset 'energy' has shape {energy.shape}; expected (N,), (N, 1) or (N, 1, 2)")
    raise GanstudyError(
        f"{file} holds no primary energy: neither dataset 'target' nor 'energy' (it has {sorted(handle)})"
    )


def _open(file: Path):
    import h5py

    try:
        return h5py.File(file, "r")
    except OSError as exc:
        raise GanstudyError(f"{file} is not a readable HDF5 file ({exc}); replace it") from None


def _showers(file: Path, handle):
    if "ECAL" not in handle:
        raise GanstudyError(f"{file} has no dataset 'ECAL' (the showers' energy depositions); it has {sorted(handle)}")
    ecal = handle["ECAL"]
    if ecal.ndim != 4:
        raise GanstudyError(f"{file}: dataset 'ECAL' has shape {ecal.shape}; expected (N, X, Y, Z) showers")
    return ecal


def _read_energies(file: Path) -> tuple[np.ndarray, tuple[int, ...]]:
    """A file's primary energies and its showers' shape, checked before any shower is read."""
    with _open(file) as handle:
        ecal = _showers(file, handle)
        energy = _primary_energy(file, handle)
        if len(energy) != len(ecal):
            raise GanstudyError(f"{file}: {len(ecal)} showers but {len(energy)} primary energies")
        return energy, tuple(ecal.shape[1:])


def load_calorimeter(path: str | None, options: LoadOptions = LoadOptions()) -> RawDataset:
    if options.image_size is not None or options.channels is not None:
        raise GanstudyError(
            "dataset.image_size and dataset.channels do not apply to calorimeter showers (their cells are "
            "the detector's): remove them from the config"
        )
    files = shower_files(path)
    layouts = [_read_energies(file) for file in files]
    shapes = {shape for _, shape in layouts}
    if len(shapes) > 1:
        raise GanstudyError(
            f"the shower files in {path} differ in shape ({sorted(shapes)}); use files of one detector geometry"
        )
    energy = np.concatenate([e for e, _ in layouts])
    if not np.all(np.isfinite(energy)) or np.any(energy <= 0):
        raise GanstudyError(
            f"the primary energies in {path} must be positive numbers; {int(np.sum(~(energy > 0)))} are not"
        )
    # One array for all files, filled a block at a time: no second copy of the data set.
    showers = np.empty((len(energy), 1, *shapes.pop()), np.float32)
    offset = 0
    for file in files:
        with _open(file) as handle:
            ecal = _showers(file, handle)
            for start in range(0, len(ecal), BLOCK):
                block = np.asarray(ecal[start : start + BLOCK], np.float32)
                block[block < THRESHOLD] = 0.0
                showers[offset : offset + len(block), 0] = block * DEPOSIT_SCALE
                offset += len(block)
    conditions = (energy / ENERGY_SCALE).astype(np.float32)[:, None]
    return RawDataset(
        showers,
        np.zeros(len(showers), np.int64),
        f"3DGAN HDF5 showers: {', '.join(f.name for f in files)}",
        conditions=conditions,
        native_units=True,
    )


CALORIMETER = DataSet(
    load_calorimeter,
    kind="showers",
    classes=1,
    provide=(
        "3DGAN's HDF5 shower files (EleEscan_*.h5: dataset ECAL of (N, 25, 25, 25) cell energies and target of (N, "
        "2) or energy of (N,) primary energies in GeV), as CERN openlab's 3DGAN trained on (svalleco/3Dgan names the "
        "electron data it used); a single file or a folder of them"
    ),
)
