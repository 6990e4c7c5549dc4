"""FID's statistics and distance (ganstudy.evaluate.frechet) are torch-fidelity's to the bit, and a grid
rank, which scores its cells in training, starts without importing torch-fidelity (and torchvision)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from torch_fidelity.metric_fid import KEY_METRIC_FID, fid_features_to_statistics, fid_statistics_to_metric

from ganstudy.evaluate.frechet import feature_statistics, frechet_distance


@pytest.mark.parametrize("samples, width", [(500, 10), (50, 128), (3, 5)])  # the last two: singular covariances
def test_statistics_and_distance_are_torch_fidelity_s_bit_for_bit(samples, width):
    generator = torch.Generator().manual_seed(samples * width)
    real = torch.randn(samples, width, generator=generator)
    fake = torch.randn(samples, width, generator=generator) * 1.5 + 0.3
    ours = [feature_statistics(features) for features in (fake, real)]
    theirs = [fid_features_to_statistics(features) for features in (fake, real)]
    for mine, other in zip(ours, theirs):
        assert mine.keys() == other.keys() and all(
            np.array_equal(mine[k], other[k]) and mine[k].dtype == other[k].dtype for k in mine
        )
    assert frechet_distance(*ours) == fid_statistics_to_metric(*theirs, verbose=False)[KEY_METRIC_FID]


def test_the_distance_of_known_gaussians():
    # Diagonal covariances: tr(s1 + s2 - 2 (s1 s2)^1/2) = sum (sqrt(a) - sqrt(b))^2.
    mu1, mu2 = np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 0.0])
    a, b = np.array([1.0, 4.0, 9.0]), np.array([4.0, 1.0, 1.0])
    expected = 1.0 + 4.0 + ((np.sqrt(a) - np.sqrt(b)) ** 2).sum()
    distance = frechet_distance({"mu": mu1, "sigma": np.diag(a)}, {"mu": mu2, "sigma": np.diag(b)})
    assert distance == pytest.approx(expected, rel=1e-12)


def test_a_grid_rank_imports_neither_torch_fidelity_nor_torchvision():
    code = (
        "import sys, ganstudy.train.run, ganstudy.train.grid.mode; "
        "print(sorted({'torch_fidelity', 'torchvision'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
