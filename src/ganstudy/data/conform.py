"""Bring images to a configured square size and number of channels."""

from __future__ import annotations

import numpy as np

# ITU-R BT.601 luma, the weights of PIL's "L" conversion.
LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def conform(images: np.ndarray, image_size: int | None, channels: int | None) -> np.ndarray:
    """float32 (N, C, H, W) in [0, 1] -> (N, channels, image_size, image_size); None keeps that property.

    Resizing is bilinear with antialiasing (so shrinking an x-ray to 28x28 averages, not skips, pixels).
    """
    if channels is not None and images.shape[1] != channels:
        if channels == 3:
            images = np.repeat(images, 3, axis=1)
        else:
            images = np.tensordot(images, LUMA, axes=([1], [0]))[:, None].astype(np.float32)
    if image_size is not None and images.shape[2:] != (image_size, image_size):
        # Imported here: the data sets' loaders import this module, and the workflow reads their entries while
        # it plans, which must not import torch.
        import torch
        import torch.nn.functional as F

        resized = F.interpolate(
            torch.from_numpy(np.ascontiguousarray(images)),
            size=(image_size, image_size),
            mode="bilinear",
            antialias=True,
            align_corners=False,
        )
        images = resized.clamp(0, 1).numpy()
    return images
