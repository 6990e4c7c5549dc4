"""The prepared-split file format shared by every later stage: images in [-1, 1] and labels."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ganstudy.core.atomic import atomic_path
from ganstudy.errors import GanstudyError


@dataclass(frozen=True)
class Split:
    images: np.ndarray  # float32 (N, C, H, W) in [-1, 1]; (N, 1, X, Y, Z) for calorimeter showers
    labels: np.ndarray  # int64 (N,)
    # True for images SMOTE made (training split only); None when none were made.
    synthetic: np.ndarray | None = None
    # float32, one row per image: what a paired or energy-conditioned generator maps from (pix2pix: the
    # input image, same layout as images; calorimeter: the primary energy). None for noise GANs.
    conditions: np.ndarray | None = None

    @property
    def image_shape(self) -> tuple[int, ...]:
        return tuple(self.images.shape[1:])

    @property
    def condition_shape(self) -> tuple[int, ...] | None:
        return None if self.conditions is None else tuple(self.conditions.shape[1:])


def save_split(path: str | os.PathLike[str], split: Split) -> None:
    extra = {
        name: array
        for name, array in (("synthetic", split.synthetic), ("conditions", split.conditions))
        if array is not None
    }
    with atomic_path(path) as tmp:
        np.savez(tmp, images=split.images, labels=split.labels, **extra)


def check_against_manifest(path: str | os.PathLike[str]) -> None:
    """A prepared split whose sha256 is not the one the manifest beside it records (truncated by a full
    disk, copied in part, changed by hand) names itself; a split without a manifest is not checked."""
    path = Path(path)
    try:
        files = json.loads((path.parent / "manifest.json").read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    recorded = next(
        (entry.get("sha256") for entry in files.values() if isinstance(entry, dict) and entry.get("path") == path.name),
        None,
    )
    if recorded and path.is_file() and file_digest(path) != recorded:
        raise GanstudyError(
            f"prepared split {path} is not the file its manifest ({path.parent / 'manifest.json'}) records: its "
            f"sha256 differs (truncated or changed since it was prepared). Delete {path.parent} and rerun: "
            "the workflow prepares the data again"
        )


def load_split(path: str | os.PathLike[str]) -> Split:
    check_against_manifest(path)
    try:
        with np.load(path, allow_pickle=False) as arrays:
            optional = {name: arrays[name] if name in arrays.files else None for name in ("synthetic", "conditions")}
            return Split(arrays["images"], arrays["labels"], **optional)
    except FileNotFoundError:
        raise GanstudyError(f"prepared split {path} does not exist; run the prepare_dataset rule first") from None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise GanstudyError(
            f"prepared split {path} is unreadable ({exc}); delete it and rerun prepare_dataset"
        ) from None


def file_digest(path: str | os.PathLike[str], algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in blocks (data sets publish MD5, we record sha256)."""
    digest = hashlib.new(algorithm)
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def to_uint8(images: np.ndarray) -> np.ndarray:
    """[-1, 1] floats to 0..255 bytes, the form in which images are stored and scored."""
    return np.clip(np.rint((images + 1.0) * 127.5), 0, 255).astype(np.uint8)
