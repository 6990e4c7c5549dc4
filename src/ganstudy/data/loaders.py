"""Registered data-set loaders. Each returns images as float32 (N, C, H, W) in [0, 1] and int64 labels."""

from __future__ import annotations

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
