"""Density and coverage (Naeem, Oh, Uh, Choi and Yoo, "Reliable Fidelity and Diversity Metrics for
Generative Models", ICML 2020): k-nearest-neighbour balls around the real images' features, as
precision and recall use, but counted so that outliers among the real images do not inflate them.

- density: how many real balls contain each generated sample, over k, averaged over the samples
  (about 1 when the samples are distributed like the real images; above 1 when they crowd into dense
  real regions);
- coverage: the share of real balls that contain at least one generated sample (1 = every real
  neighbourhood is reached; mode dropping lowers it).

Computed on the scoring's quality features (the data set's classifier, or Inception), so the metric
serves images and paired images alike.
"""

from __future__ import annotations

import torch

from ganstudy.evaluate.metrics import Metric

# The paper's default neighbourhood size.
NEAREST_K = 5


def density_coverage(real: torch.Tensor, fake: torch.Tensor, k: int = NEAREST_K) -> dict[str, float]:
    """Density and coverage of ``fake`` (M, D) against ``real`` (N, D) features, in float64."""
    real, fake = real.double(), fake.double()
    # Column 0 of a row's sorted distances is the point itself (0): the k-th neighbour is column k.
    radii = torch.cdist(real, real).sort(dim=1).values[:, k]
    inside = torch.cdist(real, fake) < radii[:, None]  # (N, M): sample j lies in real i's ball
    return {"density": float(inside.sum()) / (k * fake.shape[0]), "coverage": float(inside.any(dim=1).double().mean())}


def coverage(scoring) -> dict[str, float]:
    features = scoring.quality_features()[scoring.fid_layer]
    real = torch.from_numpy(scoring.quality_reference().features)
    return density_coverage(real, features)


COVERAGE = Metric(
    description="share of the real images' 5-nearest-neighbour balls that hold a sample (and density, the mean "
                "number of balls a sample lies in, over 5)",
    better="higher",
    kinds=frozenset({"images", "pairs"}),
    compute="sngan_plugin.coverage:coverage",
    features=True,
)
