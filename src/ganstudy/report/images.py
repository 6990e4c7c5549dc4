"""Sample grids: many small images tiled into one PNG."""

from __future__ import annotations

import math
import os

import numpy as np
from PIL import Image

from ganstudy.core.atomic import atomic_path
from ganstudy.data.arrays import load_split, to_uint8
from ganstudy.data.conform import conform
from ganstudy.errors import GanstudyError


def tile(images: np.ndarray, columns: int | None = None, pad: int = 1) -> np.ndarray:
    """(N, C, H, W) images in [-1, 1] -> one (rows*(H+pad)+pad, cols*(W+pad)+pad, C) uint8 mosaic."""
    count, channels, height, width = images.shape
    columns = columns or math.ceil(math.sqrt(count))
    rows = math.ceil(count / columns)
    mosaic = np.zeros((rows * (height + pad) + pad, columns * (width + pad) + pad, channels), np.uint8)
    pixels = to_uint8(images).transpose(0, 2, 3, 1)
    for index in range(count):
        top = pad + (index // columns) * (height + pad)
        left = pad + (index % columns) * (width + pad)
        mosaic[top : top + height, left : left + width] = pixels[index]
    return mosaic


def save_grid(path: str | os.PathLike[str], images: np.ndarray, scale: int = 4, columns: int | None = None) -> None:
    """Write a tiled grid, enlarged ``scale`` times with nearest-neighbour so pixels stay visible."""
    mosaic = tile(images, columns)
    picture = Image.fromarray(mosaic[..., 0] if mosaic.shape[2] == 1 else mosaic)
    picture = picture.resize((picture.width * scale, picture.height * scale), Image.NEAREST)
    with atomic_path(path) as tmp:
        picture.save(tmp, format="PNG")


def save_triptychs(path: str | os.PathLike[str], inputs: np.ndarray, outputs: np.ndarray, targets: np.ndarray) -> None:
    """pix2pix's sample layout: one row per pair, input | output | target, the inputs shown with the
    targets' channels (a grey input beside colour outputs is repeated, a colour one turned to luma)."""
    inputs = conform((inputs + 1.0) / 2.0, None, targets.shape[1]) * 2.0 - 1.0
    rows = np.stack([inputs, outputs, targets], axis=1).reshape(-1, *targets.shape[1:])
    # Small images are enlarged so that pixels stay visible; 256x256 ones are shown as they are.
    save_grid(path, rows, scale=max(1, 64 // targets.shape[-1]), columns=3)


def save_shower_pairs(path: str | os.PathLike[str], real: np.ndarray, generated: np.ndarray) -> None:
    """Calorimeter showers (N, 1, X, Y, Z) seen along Z: one row per energy, the real shower | the generated
    one, both scaled by the larger of their two maxima so that their intensities compare."""
    real_xy, generated_xy = real.sum(axis=-1), generated.sum(axis=-1)
    scale = np.maximum(real_xy.max(axis=(1, 2, 3)), generated_xy.max(axis=(1, 2, 3))).clip(min=1e-12)[
        :, None, None, None
    ]
    rows = np.stack([real_xy / scale, generated_xy / scale], axis=1).reshape(-1, *real_xy.shape[1:])
    save_grid(path, rows * 2.0 - 1.0, scale=max(1, 64 // real_xy.shape[-1]), columns=2)


def real_vs_smote(
    train_path: str | os.PathLike[str], out_path: str | os.PathLike[str], per_class: int = 8, classes: int = 10
) -> None:
    """One row per class (the first ``classes``): ``per_class`` real training images, then as many
    SMOTE images; black where a class has fewer."""
    split = load_split(train_path)
    if split.synthetic is None:
        raise GanstudyError(f"{train_path} holds no SMOTE images; set dataset.smote.strategy to balance or factor")
    blank = np.full(split.images.shape[1:], -1.0, np.float32)
    rows = []
    for label in np.unique(split.labels)[:classes]:
        for made in (False, True):
            picked = split.images[(split.labels == label) & (split.synthetic == made)][:per_class]
            rows += list(picked) + [blank] * (per_class - len(picked))
    save_grid(out_path, np.stack(rows), columns=2 * per_class)
