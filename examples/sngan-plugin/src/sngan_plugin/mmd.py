"""Maximum mean discrepancy with a Gaussian kernel (Gretton, Borgwardt, Rasch, Schölkopf and Smola, "A
Kernel Two-Sample Test", JMLR 2012) between the samples' and the real images' features: the unbiased
estimate of MMD^2, 0 in expectation when both come from one distribution. The kernel's bandwidth is the
median distance between the real features (the median heuristic), written beside it as a second column,
mmd_bandwidth, so that two studies' values can be checked for the same scale.

ganstudy's built-in kid is the same statistic with a cubic polynomial kernel over subsets; a Gaussian
kernel is characteristic (every difference of distributions shows), the reason a lab may want both.
"""

from __future__ import annotations

import numpy as np
import torch

from ganstudy.evaluate.metrics import Metric


def mmd_rbf(real: torch.Tensor, fake: torch.Tensor) -> dict[str, float]:
    """Unbiased MMD^2 of ``fake`` (M, D) against ``real`` (N, D) features, in float64, and the bandwidth."""
    real, fake = real.double(), fake.double()
    within_real = torch.cdist(real, real)
    pairs = within_real[torch.triu_indices(len(real), len(real), offset=1).unbind()]
    bandwidth = torch.tensor(float(np.median(pairs.numpy())), dtype=torch.float64)
    kernel = lambda distances: torch.exp(-(distances**2) / (2 * bandwidth**2))  # noqa: E731
    k_rr, k_ff, k_rf = kernel(within_real), kernel(torch.cdist(fake, fake)), kernel(torch.cdist(real, fake))
    n, m = len(real), len(fake)
    # The unbiased estimate leaves out each point's kernel with itself (the diagonals).
    value = (
        (k_rr.sum() - k_rr.diagonal().sum()) / (n * (n - 1))
        + (k_ff.sum() - k_ff.diagonal().sum()) / (m * (m - 1))
        - 2 * k_rf.mean()
    )
    return {"mmd": float(value), "mmd_bandwidth": float(bandwidth)}


def mmd(scoring) -> dict[str, float]:
    features = scoring.quality_features()[scoring.fid_layer]
    real = torch.from_numpy(scoring.quality_reference().features)
    return mmd_rbf(real, features)


MMD = Metric(
    description="unbiased MMD^2 of the samples' and the real images' features, Gaussian kernel, median-distance "
    "bandwidth (and that bandwidth, mmd_bandwidth)",
    better="lower",
    kinds=frozenset({"images", "pairs"}),
    compute="sngan_plugin.mmd:mmd",
    features=True,
)
