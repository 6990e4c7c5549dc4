"""Scores of an image-to-image generator against its targets (pix2pix on a test split): L1, PSNR and
SSIM, on images in [0, 1] (data range 1), each the mean over images.

SSIM is Wang et al. (2004) as scikit-image's ``structural_similarity(gaussian_weights=True,
sigma=1.5, use_sample_covariance=False, data_range=1)`` computes it: an 11x11 Gaussian window
(sigma 1.5, truncated at 3.5 sigma), K1 0.01, K2 0.03, the mean over the positions where the window
fits inside the image and over the channels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ganstudy.errors import GanstudyError

SIGMA = 1.5
RADIUS = int(3.5 * SIGMA + 0.5)
K1, K2 = 0.01, 0.03


def _window(channels: int) -> torch.Tensor:
    offsets = torch.arange(-RADIUS, RADIUS + 1, dtype=torch.float64)
    line = torch.exp(-(offsets**2) / (2 * SIGMA**2))
    line /= line.sum()
    # One separable 2D window per channel (a depthwise convolution).
    return torch.outer(line, line).expand(channels, 1, -1, -1).contiguous()


def ssim(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per image SSIM of (N, C, H, W) images in [0, 1]; computed in float64."""
    size = 2 * RADIUS + 1
    if min(outputs.shape[-2:]) < size:
        raise GanstudyError(f"SSIM's {size}x{size} window does not fit images of {tuple(outputs.shape[-2:])}: use images of at least {size}x{size}")
    x, y = outputs.double(), targets.double()
    window = _window(x.shape[1])

    def local_mean(image: torch.Tensor) -> torch.Tensor:
        # No padding: only positions where the window fits, the region scikit-image averages over.
        return F.conv2d(image, window, groups=image.shape[1])

    mu_x, mu_y = local_mean(x), local_mean(y)
    var_x = local_mean(x * x) - mu_x**2
    var_y = local_mean(y * y) - mu_y**2
    cov = local_mean(x * y) - mu_x * mu_y
    c1, c2 = K1**2, K2**2
    index = ((2 * mu_x * mu_y + c1) * (2 * cov + c2)) / ((mu_x**2 + mu_y**2 + c1) * (var_x + var_y + c2))
    return index.mean(dim=(1, 2, 3))


def paired_scores(outputs: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """L1, PSNR (dB) and SSIM of outputs against targets, (N, C, H, W) in [-1, 1], means over images.
    An output equal to its target has infinite PSNR, which the mean then is too."""
    if outputs.shape != targets.shape:
        raise GanstudyError(f"outputs {tuple(outputs.shape)} and targets {tuple(targets.shape)} differ in shape")
    x, y = (outputs.double() + 1) / 2, (targets.double() + 1) / 2
    l1 = (x - y).abs().mean(dim=(1, 2, 3))
    mse = ((x - y) ** 2).mean(dim=(1, 2, 3))
    psnr = 10 * torch.log10(1.0 / mse)
    return {"l1": float(l1.mean()), "psnr": float(psnr.mean()), "ssim": float(ssim(x, y).mean())}
