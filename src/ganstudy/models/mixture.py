"""A mixture of generators: the result of every training mode (a single GAN is a mixture of one)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from ganstudy.data.subsets import class_prior


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


def _labels_of(labels: Sequence[int], counts: Sequence[int], device: torch.device) -> torch.Tensor:
    return torch.repeat_interleave(torch.as_tensor(list(labels), device=device), torch.as_tensor(counts, device=device))


class MixtureGenerator(nn.Module):
    """Components weighted by ``weights``; with ``labels`` (per-class training) component k draws
    images of class ``labels[k]``, and ``weights`` is the training split's class prior."""

    kind = "mixture"

    def __init__(
        self, components: Sequence[nn.Module], weights: Sequence[float], labels: Sequence[int] | None = None
    ) -> None:
        super().__init__()
        if len(components) != len(weights) or not components:
            raise ValueError(f"{len(components)} components but {len(weights)} weights")
        if labels is not None and len(labels) != len(components):
            raise ValueError(f"{len(components)} components but {len(labels)} labels")
        self.components = nn.ModuleList(components)
        self.weights = [float(w) for w in weights]
        self.labels = None if labels is None else [int(label) for label in labels]

    def forward(self, z: torch.Tensor, batch_size: int | None = None) -> torch.Tensor:
        return self.sample(z, batch_size)[0]

    def sample(self, z: torch.Tensor, batch_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Component k turns its proportional share of ``z`` into images, ``batch_size`` rows at a time;
        returns the images and, for a labelled mixture, their labels.

        The share depends on ``len(z)`` alone, so the images do not depend on the batch size.
        """
        step = batch_size or len(z)
        counts = proportional_counts(self.weights, len(z))
        parts, start = [], 0
        for component, count in zip(self.components, counts):
            for offset in range(start, start + count, step):
                parts.append(component(z[offset : min(offset + step, start + count)]))
            start += count
        labels = None if self.labels is None else _labels_of(self.labels, counts, z.device)
        return torch.cat(parts), labels


class ConditionalGenerator(nn.Module):
    """One conditional network (DC-CGAN) that draws each class in proportion to the class prior
    ``weights`` of the classes ``labels``: the labelled counterpart of a per-class mixture."""

    kind = "conditional"

    def __init__(self, network: nn.Module, weights: Sequence[float], labels: Sequence[int]) -> None:
        super().__init__()
        if len(weights) != len(labels) or not labels:
            raise ValueError(f"{len(weights)} class weights but {len(labels)} labels")
        self.components = nn.ModuleList([network])
        self.weights = [float(w) for w in weights]
        self.labels = [int(label) for label in labels]

    def forward(self, z: torch.Tensor, batch_size: int | None = None) -> torch.Tensor:
        return self.sample(z, batch_size)[0]

    def sample(self, z: torch.Tensor, batch_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        step = batch_size or len(z)
        labels = _labels_of(self.labels, proportional_counts(self.weights, len(z)), z.device)
        network = self.components[0]
        parts = [network(z[i : i + step], labels[i : i + step]) for i in range(0, len(z), step)]
        return torch.cat(parts), labels


Generator = MixtureGenerator | ConditionalGenerator


def pair_generator(generator: torch.nn.Module, labels: np.ndarray | None) -> Generator:
    """The study's generator made of one trained pair: a conditional pair (trained with ``labels``) draws
    each class by the training split's prior and labels its samples."""
    if labels is None:
        return MixtureGenerator([generator], [1.0])
    classes, prior, _ = class_prior(labels)
    return ConditionalGenerator(generator, prior, classes)
