"""Sample grids: many small images tiled into one PNG."""

from __future__ import annotations

import math
import os

import numpy as np
from PIL import Image

from ganstudy.atomic import atomic_path
from ganstudy.data.arrays import to_uint8


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


def save_grid(path: str | os.PathLike[str], images: np.ndarray, scale: int = 4) -> None:
    """Write a tiled grid, enlarged ``scale`` times with nearest-neighbour so pixels stay visible."""
    mosaic = tile(images)
    picture = Image.fromarray(mosaic[..., 0] if mosaic.shape[2] == 1 else mosaic)
    picture = picture.resize((picture.width * scale, picture.height * scale), Image.NEAREST)
    with atomic_path(path) as tmp:
        picture.save(tmp, format="PNG")
