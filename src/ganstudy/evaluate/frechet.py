"""FID's statistics and distance: the Fréchet distance between Gaussians fitted to two sets of features
(Heusel et al., "GANs trained by a two time-scale update rule converge to a local Nash equilibrium",
2017), computed operation for operation as torch-fidelity 0.4 computes it, so that every FID is
torch-fidelity's to the bit (tests/test_frechet.py compares them).

Kept apart from torch-fidelity itself: importing it imports torchvision and, through torchvision's
operators, torch._dynamo, about 3 s of every process's start on a CPU of this project's machines. Every
rank of a grid run scores its cells in training, and would pay that for two small functions.
"""

from __future__ import annotations

import numpy as np
import torch

Statistics = dict[str, np.ndarray]  # "mu": the features' mean, "sigma": their covariance


def feature_statistics(features: torch.Tensor | np.ndarray) -> Statistics:
    """Mean and covariance of [samples, features] ``features`` (a host tensor or an array), as numpy arrays."""
    values = features.numpy() if isinstance(features, torch.Tensor) else features
    return {"mu": np.mean(values, axis=0), "sigma": np.cov(values, rowvar=False)}


def frechet_distance(generated: Statistics, real: Statistics) -> float:
    """|mu1 - mu2|^2 + tr(sigma1 + sigma2 - 2 (sigma1 sigma2)^1/2)."""
    mu1, sigma1, mu2, sigma2 = generated["mu"], generated["sigma"], real["mu"], real["sigma"]
    diff = mu1 - mu2
    # tr (sigma1 sigma2)^1/2 is the sum of the square roots of the product's eigenvalues: real and
    # non-negative in exact arithmetic; rounding leaves small imaginary or negative parts, dropped here.
    root_trace = np.sum(np.sqrt(np.linalg.eigvals(sigma1.dot(sigma2)).astype("complex128")).real)
    return float(diff.dot(diff) + np.trace(sigma1) + np.trace(sigma2) - 2 * root_trace)
