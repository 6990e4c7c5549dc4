"""A mixture of generators: the result of every training mode (a single GAN is a mixture of one)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


def proportional_counts(weights: Sequence[float], total: int) -> list[int]:
    """Split ``total`` samples over the components in proportion to ``weights`` (largest remainder).

    Exact proportions rather than a random draw per sample: two weight vectors are then compared on
    the same noise with no sampling noise of their own (Lipizzaner's exact_proportion mode).
    """
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    raw = w * total
    counts = np.floor(raw).astype(int)
    # Ties go to the lower index: stable, so the result is the same on every platform.
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[: total - counts.sum()]] += 1
    return counts.tolist()


class MixtureGenerator(nn.Module):
    def __init__(self, components: Sequence[nn.Module], weights: Sequence[float]) -> None:
        super().__init__()
        if len(components) != len(weights) or not components:
            raise ValueError(f"{len(components)} components but {len(weights)} weights")
        self.components = nn.ModuleList(components)
        self.weights = [float(w) for w in weights]

    def forward(self, z: torch.Tensor, batch_size: int | None = None) -> torch.Tensor:
        """Component k turns its proportional share of ``z`` into images, ``batch_size`` rows at a time.

        The share depends on ``len(z)`` alone, so the images do not depend on the batch size.
        """
        step = batch_size or len(z)
        parts, start = [], 0
        for component, count in zip(self.components, proportional_counts(self.weights, len(z))):
            for offset in range(start, start + count, step):
                parts.append(component(z[offset : min(offset + step, start + count)]))
            start += count
        return torch.cat(parts)
