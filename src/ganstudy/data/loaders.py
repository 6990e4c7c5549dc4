"""Registered data-set loaders. Each returns images as float32 (N, C, H, W) in [0, 1] and int64 labels."""

from __future__ import annotations

import gzip
import io
import pickle
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ganstudy.errors import GanstudyError
from ganstudy.registry import Registry


@dataclass(frozen=True)
class RawDataset:
    images: np.ndarray  # float32 (N, C, H, W) in [0, 1]
    labels: np.ndarray  # int64 (N,), classes 0..K-1
    source: str


LOADERS: Registry = Registry("data-set loader")

# Classes of the standard data sets, for sizing per-class jobs before the data are read.
CLASS_COUNTS = {"digits": 10, "mnist": 10, "cifar10": 10, "cifar100": 100}


@LOADERS.register("digits")
def load_digits(path: str | None = None) -> RawDataset:
    """scikit-learn's embedded 8x8 digits: grey levels 0..16, so no download is ever needed."""
    if path is not None:
        raise GanstudyError("dataset 'digits' is embedded in scikit-learn; remove dataset.path from the config")
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    images = (bunch.images.astype(np.float32) / 16.0)[:, None, :, :]
    return RawDataset(images, bunch.target.astype(np.int64), "sklearn.datasets.load_digits")


@LOADERS.register("npz")
def load_npz(path: str | None) -> RawDataset:
    """A user's arrays: 'images' (N,H,W or N,C,H,W; uint8 0-255 or float 0-1) and 'labels' (N ints)."""
    if path is None:
        raise GanstudyError("dataset 'npz' needs dataset.path: the .npz file with arrays 'images' and 'labels'")
    file = Path(path)
    if not file.is_file():
        raise GanstudyError(f"dataset file {file} does not exist; set dataset.path to an existing .npz file")
    try:
        with np.load(file, allow_pickle=False) as arrays:
            missing = {"images", "labels"} - set(arrays.files)
            if missing:
                raise GanstudyError(f"{file} lacks array(s) {sorted(missing)}; it has {sorted(arrays.files)}")
            images, labels = arrays["images"], arrays["labels"]
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise GanstudyError(f"{file} is not a readable .npz file ({exc})") from None
    if images.ndim == 3:
        images = images[:, None]
    if images.ndim != 4 or images.shape[1] not in (1, 3):
        raise GanstudyError(f"{file}: 'images' must have shape (N,H,W) or (N,C,H,W) with C 1 or 3, got {images.shape}")
    if labels.shape != (images.shape[0],) or not np.issubdtype(labels.dtype, np.integer):
        raise GanstudyError(f"{file}: 'labels' must be {images.shape[0]} integers, got {labels.dtype} {labels.shape}")
    if labels.min() < 0:
        raise GanstudyError(f"{file}: labels must be 0 or more, found {labels.min()}")
    if images.dtype == np.uint8:
        images = images.astype(np.float32) / 255.0
    else:
        images = images.astype(np.float32)
        if images.min() < 0 or images.max() > 1:
            raise GanstudyError(f"{file}: float images must lie in [0, 1], found [{images.min()}, {images.max()}]")
    return RawDataset(images, labels.astype(np.int64), str(file))


def _read_idx(path: Path, magic: int, dims: int) -> np.ndarray:
    """An IDX file (the MNIST format): big-endian magic and sizes, then unsigned bytes; gzip or plain."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            raw = handle.read()
    except (OSError, EOFError) as exc:
        raise GanstudyError(f"{path} is unreadable ({exc}); fetch it again") from None
    header = 4 + 4 * dims
    found = int.from_bytes(raw[:4], "big") if len(raw) >= 4 else None
    if found != magic:
        raise GanstudyError(f"{path} is not an IDX file of {dims} dimension(s): magic {found}, expected {magic}")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    if len(raw) != header + int(np.prod(shape)):
        raise GanstudyError(f"{path} holds {len(raw) - header} bytes of data, its header promises {int(np.prod(shape))}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


@LOADERS.register("mnist")
def load_mnist(path: str | None) -> RawDataset:
    """MNIST's four IDX files (as fetch_dataset places them), training and test sets together."""
    if path is None:
        raise GanstudyError("dataset 'mnist' needs dataset.path: the folder that holds (or will hold) its IDX files")
    folder = Path(path)
    images, labels = [], []
    for prefix in ("train", "t10k"):
        x = _read_idx(folder / f"{prefix}-images-idx3-ubyte.gz", 2051, 3)
        y = _read_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", 2049, 1)
        if len(x) != len(y):
            raise GanstudyError(f"{folder}: {len(x)} {prefix} images but {len(y)} labels")
        images.append(x)
        labels.append(y)
    pixels = np.concatenate(images).astype(np.float32)[:, None] / 255.0
    return RawDataset(pixels, np.concatenate(labels).astype(np.int64), str(folder))


class _BatchUnpickler(pickle.Unpickler):
    """CIFAR's python batches are pickles: allow the numpy array reconstruction they need and
    nothing else, so a tampered archive cannot run code."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        return super().find_class(module, name)


def _cifar_batch(archive: tarfile.TarFile, member: str, label_key: str, classes: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    name = f"{where}:{member}"
    try:
        handle = archive.extractfile(member)
        if handle is None:
            raise KeyError(member)
        batch = _BatchUnpickler(io.BytesIO(handle.read()), encoding="latin1").load()
        data, labels = np.asarray(batch["data"]), np.asarray(batch[label_key])
    except KeyError as exc:
        raise GanstudyError(f"{name} is missing ({exc}); the archive is not the published one — fetch it again") from None
    except (pickle.UnpicklingError, EOFError, TypeError, ValueError, tarfile.TarError, OSError) as exc:
        raise GanstudyError(f"{name} is not a CIFAR python batch ({exc}); fetch the archive again") from None
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise GanstudyError(f"{name}: 'data' must be uint8 rows of 3072 pixels, got {data.dtype} {data.shape}")
    if labels.shape != (len(data),) or labels.min(initial=0) < 0 or labels.max(initial=0) >= classes:
        raise GanstudyError(f"{name}: expected {len(data)} labels in 0..{classes - 1}, got shape {labels.shape}")
    return data.reshape(-1, 3, 32, 32), labels


def _load_cifar(path: str | None, name: str, folder: str, members: tuple[str, ...], label_key: str, classes: int) -> RawDataset:
    if path is None:
        raise GanstudyError(f"dataset '{name}' needs dataset.path: the folder that holds (or will hold) its archive")
    from ganstudy.data.sources import SOURCES

    (file,) = SOURCES[name].md5
    archive_path = Path(path) / file
    try:
        archive = tarfile.open(archive_path, "r:gz")
    except (OSError, EOFError, tarfile.TarError) as exc:
        raise GanstudyError(f"{archive_path} is unreadable ({exc}); fetch it again") from None
    with archive:
        parts = [_cifar_batch(archive, f"{folder}/{member}", label_key, classes, str(archive_path)) for member in members]
    images = np.concatenate([p[0] for p in parts]).astype(np.float32) / 255.0
    return RawDataset(images, np.concatenate([p[1] for p in parts]).astype(np.int64), str(archive_path))


@LOADERS.register("cifar10")
def load_cifar10(path: str | None) -> RawDataset:
    """CIFAR-10's python batches (five training batches and the test batch), read from the archive."""
    batches = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",)
    return _load_cifar(path, "cifar10", "cifar-10-batches-py", batches, "labels", 10)


@LOADERS.register("cifar100")
def load_cifar100(path: str | None) -> RawDataset:
    """CIFAR-100's python files with the 100 fine labels, read from the archive."""
    return _load_cifar(path, "cifar100", "cifar-100-python", ("train", "test"), "fine_labels", 100)
