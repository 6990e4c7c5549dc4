"""The tensor draws of grid cells in an iteration, counter-based (``ganstudy.counter_random``).

Every draw of cell c in iteration i is a function of (c's draw seed, i, what is drawn, update, row):
its fitness sample (real images and noise), the order of its images in the training pass, each
update's defender, its Mustangs loss, its attackers' learning-rate mutations and their noise, and its
mixture's noise. A rank draws for all of its cells in one call, and a cell's draws are the same bits
whether it is drawn alone (the per-cell loop) or with any other cells (the stacked engine, on any rank
count). A resumed run draws what an unbroken one did: no stream state to keep. The tournaments and
the mixture ES's weight mutations stay on each cell's numpy stream (``CellStreams.evolution``): host
work that launches nothing. ``GRID_ENGINE`` names this scheme in every grid run's record; engine 1 drew
every tensor from per-cell streams in the loop's call order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from ganstudy.counter_random import counter_key, integers, normal, randint, random_bits, uniform
from ganstudy.models import NetworkSpec
from ganstudy.train.grid.population import mutate_learning_rates
from ganstudy.train.losses import LOSSES, AdversarialLoss
from ganstudy.train.settings import TrainingSettings


class DrawingCell(Protocol):
    """What the draws read of a grid cell (``GridCell``)."""

    setup: TrainingSettings
    spec: NetworkSpec
    device: torch.device
    images: torch.Tensor  # the rank's training images, on the device
    subset: torch.Tensor  # the cell's image indices
    loss: AdversarialLoss
    streams: CellSeeds


class CellSeeds(Protocol):
    draw_seed: int


GRID_ENGINE = 2
MUSTANGS_LOSSES = ("bce", "mse", "heuristic")


@dataclass(frozen=True)
class UpdateDraws:
    """One update of one kind of player (generators or discriminators) in every cell of the pass."""

    defenders: list[int]  # per cell: the index of its defender among its opponents
    losses: list[AdversarialLoss]  # per cell
    lrs: np.ndarray  # [cells, attackers]: the attackers' learning rates after this update's mutation
    noise: torch.Tensor  # [cells * attackers, batch, latent], cell by cell, on the cells' device


class GridDraws:
    """The draws of ``cells`` (which share one set-up and device) in iteration ``iteration``."""

    def __init__(self, cells: Sequence[DrawingCell], iteration: int) -> None:
        first = cells[0]
        self.cells, self.setup, self.device = cells, first.setup, first.device
        self.latent = first.spec.latent_dim
        self.keys = [counter_key(cell.streams.draw_seed, iteration) for cell in cells]

    def fitness_samples(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Each cell's fitness sample: [cells, size, *image] real images drawn with replacement from the
        cell's subset, and [cells, size, latent] noise, on the cells' device."""
        size = self.setup.grid.fitness_sample_size
        picks = integers([counter_key(k, "fitness-images") for k in self.keys], size, [len(cell.subset) for cell in self.cells])
        real = self.cells[0].images[self._subsets().gather(1, picks).to(self.device)]
        return real, self._noise([counter_key(k, "fitness-noise") for k in self.keys], size)

    def mixture_noise(self) -> torch.Tensor:
        """[cells, score samples, latent]: the noise each cell's mixture makes its images from."""
        return self._noise([counter_key(k, "mixture") for k in self.keys], self.setup.grid.score_sample_size)

    def _noise(self, keys: list[int], samples: int) -> torch.Tensor:
        return normal(keys, samples * self.latent, self.device).view(len(keys), samples, self.latent)

    def _subsets(self) -> torch.Tensor:
        """[cells, longest subset] the cells' image indices, a shorter subset padded with zeros."""
        subsets = [cell.subset.numpy() for cell in self.cells]
        padded = np.zeros((len(subsets), max(len(s) for s in subsets)), dtype=np.int64)
        for row, subset in enumerate(subsets):
            padded[row, : len(subset)] = subset
        return torch.from_numpy(padded)

    def batch_orders(self, length: int) -> torch.Tensor:
        """[cells, length]: the first ``length`` images of each cell's shuffled subset, a permutation sorted
        by a hash of (cell, place in the subset); a cell's subset may be longer than ``length``."""
        subsets = [cell.subset for cell in self.cells]
        longest = max(len(s) for s in subsets)
        bits = random_bits([counter_key(k, "order") for k in self.keys], longest, torch.device("cpu"))
        # Past a shorter subset's end: sorted last, whatever the hash (which is below 2**32).
        beyond = torch.arange(longest) >= torch.tensor([len(s) for s in subsets])[:, None]
        places = torch.sort(bits.masked_fill_(beyond, 1 << 32), dim=1, stable=True).indices[:, :length]
        return self._subsets().gather(1, places).to(self.device)

    def update(self, step: int, player: str, lrs: np.ndarray, opponents: Sequence[int]) -> UpdateDraws:
        """Update ``step`` of the ``player`` ("g" or "d") rows, whose learning rates are ``lrs`` ([cells,
        attackers]), each cell's defender one of its ``opponents`` (a count per cell)."""
        keys = [counter_key(k, player, step) for k in self.keys]
        defenders = randint([counter_key(k, "defender") for k in keys], opponents)
        if self.setup.loss == "mustangs":
            picks = randint([counter_key(k, "loss") for k in keys], [len(MUSTANGS_LOSSES)] * len(keys))
            losses = [LOSSES.get(MUSTANGS_LOSSES[p]) for p in picks]
        else:
            losses = [cell.loss for cell in self.cells]
        attackers = lrs.shape[1]
        cpu = torch.device("cpu")
        grid = self.setup.grid
        mutated = mutate_learning_rates(
            lrs, self.setup.lr, grid.mutation_rate, grid.mutation_probability,
            normal([counter_key(k, "lr") for k in keys], attackers, cpu, torch.float64).numpy(),
            uniform([counter_key(k, "lr-applies") for k in keys], attackers, cpu).numpy(),
        )
        noise = self._noise([counter_key(k, "noise", a) for k in keys for a in range(attackers)], self.setup.batch_size)
        return UpdateDraws(defenders, losses, mutated, noise)
