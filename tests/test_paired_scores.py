"""Paired scores (L1, PSNR, SSIM) against independent references: scipy's Gaussian filter for SSIM,
closed forms for constant images, and hand-computed L1 and PSNR."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.ndimage import gaussian_filter

from ganstudy.errors import GanstudyError
from ganstudy.evaluate.paired import paired_scores, ssim


def reference_ssim(x: np.ndarray, y: np.ndarray) -> float:
    """Wang et al.'s mean SSIM of one grey image pair in [0, 1], written as scikit-image computes it with
    gaussian_weights=True: scipy's Gaussian filter (sigma 1.5, truncate 3.5), borders of 5 cropped."""
    blur = lambda image: gaussian_filter(image, sigma=1.5, truncate=3.5, mode="reflect")  # noqa: E731
    mx, my = blur(x), blur(y)
    vx, vy, cxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
    c1, c2 = 0.01**2, 0.03**2
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return float(s[5:-5, 5:-5].mean())


def test_ssim_matches_an_independent_gaussian_filter_implementation() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (3, 24, 20))
    # A related image: a blurred, shifted, noisy copy, so SSIM lies well inside (0, 1).
    y = np.clip(0.7 * gaussian_filter(x, (0, 1, 1)) + 0.2 + rng.normal(0, 0.05, x.shape), 0, 1)
    got = ssim(torch.from_numpy(x)[:, None], torch.from_numpy(y)[:, None])
    want = [reference_ssim(a, b) for a, b in zip(x, y)]
    assert 0.05 < min(want) and max(want) < 0.95
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    # Colour images: the mean over channels.
    torch.testing.assert_close(ssim(torch.from_numpy(x)[None], torch.from_numpy(y)[None]), torch.tensor([np.mean(want)], dtype=torch.float64))


def test_ssim_of_constant_images_is_its_luminance_term() -> None:
    a, b = 0.2, 0.7
    got = ssim(torch.full((1, 1, 16, 16), a, dtype=torch.float64), torch.full((1, 1, 16, 16), b, dtype=torch.float64))
    c1 = 0.01**2
    # No variance: the contrast-structure term is c2 / c2 = 1.
    assert float(got) == pytest.approx((2 * a * b + c1) / (a * a + b * b + c1), rel=1e-12)
    assert float(ssim(torch.full((1, 1, 16, 16), a), torch.full((1, 1, 16, 16), a))) == pytest.approx(1.0)


def test_l1_and_psnr_by_hand() -> None:
    # Targets all -1 (0 in [0, 1]); outputs 0 (0.5) on half the pixels, -1 on the other half.
    targets = -torch.ones(2, 1, 16, 16)
    outputs = targets.clone()
    outputs[:, :, :, :8] = 0.0
    scores = paired_scores(outputs, targets)
    assert scores["l1"] == pytest.approx(0.25)
    # MSE = 0.5 * 0.25 = 0.125 per image: PSNR = 10 log10(1 / 0.125).
    assert scores["psnr"] == pytest.approx(10 * math.log10(8))
    assert 0 < scores["ssim"] < 1


def test_bad_shapes_are_named() -> None:
    with pytest.raises(GanstudyError, match="differ in shape"):
        paired_scores(torch.zeros(1, 3, 16, 16), torch.zeros(1, 1, 16, 16))
    with pytest.raises(GanstudyError, match="11x11 window"):
        ssim(torch.zeros(1, 1, 8, 8), torch.zeros(1, 1, 8, 8))
