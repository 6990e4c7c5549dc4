"""A procedural data set that needs no download: grey squares, discs and crosses (three classes) of
random size, position and brightness on a dark background, drawn from a fixed seed at the side that
dataset.image_size asks for (8 by default), so every machine reads the same images."""

from __future__ import annotations

import numpy as np

from ganstudy.data.loaders import DataSet, LoadOptions, RawDataset
from ganstudy.errors import GanstudyError

PER_CLASS = 400
SEED = 20181
CLASS_NAMES = ("square", "disc", "cross")


def _shape(kind: int, side: int, rng: np.random.Generator) -> np.ndarray:
    radius = rng.uniform(0.25, 0.42) * side
    centre = rng.uniform(radius, side - radius, size=2)
    y, x = np.mgrid[0:side, 0:side] + 0.5
    dy, dx = np.abs(y - centre[0]), np.abs(x - centre[1])
    if kind == 0:
        inside = np.maximum(dy, dx) <= radius
    elif kind == 1:
        inside = np.hypot(dy, dx) <= radius
    else:
        arm = max(radius / 3, 0.6)
        inside = ((dy <= arm) & (dx <= radius)) | ((dx <= arm) & (dy <= radius))
    return np.where(inside, rng.uniform(0.6, 1.0), 0.0).astype(np.float32)


def load_shapes(path: str | None, options: LoadOptions = LoadOptions()) -> RawDataset:
    if path is not None:
        raise GanstudyError("dataset 'shapes' is drawn, not read: remove dataset.path from the config")
    side = options.image_size or 8
    rng = np.random.default_rng(SEED)
    labels = np.repeat(np.arange(len(CLASS_NAMES), dtype=np.int64), PER_CLASS)
    images = np.stack([_shape(int(label), side, rng) for label in labels])[:, None]
    return RawDataset(images, labels, f"sngan_plugin.shapes (seed {SEED})", class_names=CLASS_NAMES)


# One channel, 8x8 unless dataset.image_size says otherwise: the workflow checks each set-up's network
# against that shape while it plans.
SHAPES = DataSet(load_shapes, kind="images", classes=len(CLASS_NAMES), image_shape=(1, 8, 8))
