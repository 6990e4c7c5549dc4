"""The tensor draws of grid cells in an iteration, counter-based (``ganstudy.core.counter_random``).

Every draw of cell c in iteration i is a function of (c's draw seed, i, what is drawn, update, row): its
fitness sample (real images and noise), the order of its images in the training pass, each update's
defender, its Mustangs loss, its attackers' learning-rate mutations and their noise, the keys of the
update's dropout masks (``KeyedDropout``), and its mixture's noise. A rank draws for all of its cells in
one call, and a cell's draws are the same bits whether it is drawn alone (the per-cell loop) or with any
other cells (the stacked engine, on any rank count). A pass's updates are drawn in blocks of steps, all
cells at once: a key's numbers do not depend on the other keys of its call. A resumed run draws what an
unbroken one did: no stream state to keep. The tournaments and the mixture ES's weight mutations stay on
each cell's numpy stream (``CellStreams.evolution``): host work that launches nothing. ``GRID_ENGINE``
names this scheme in every grid run's record; engine 1 drew every tensor from per-cell streams in the
loop's call order, and engine 2 drew nn.Dropout's masks from each cell's stream (a generator call per
cell, layer and update; in a stack, per row). Engines 2 and 3 draw the same for networks without
nn.Dropout (``draws_engine``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.core.counter_random import bounded, counter_keys, integers, normal, random_bits, uniform
from ganstudy.core.device_copy import to_device
from ganstudy.models import NetworkSpec
from ganstudy.train.grid.population import mutate_learning_rates
from ganstudy.train.losses import LOSSES, AdversarialLoss


class DrawingCell(Protocol):
    """What the draws read of a grid cell (``GridCell``)."""

    setup: TrainingSettings
    spec: NetworkSpec
    device: torch.device
    images: torch.Tensor  # the rank's training images, on the device
    subset: np.ndarray  # the cell's image indices
    loss: AdversarialLoss
    streams: CellSeeds


class CellSeeds(Protocol):
    draw_seed: int


GRID_ENGINE = 3
# The networks of an update whose dropout masks are keyed: the generator's (0) and the discriminator's (1).
NETWORKS = np.arange(2)
MUSTANGS_LOSSES = ("bce", "mse", "heuristic")
# Floats of update noise drawn in one call. Each call costs a few dozen operators whatever its size, so a
# small grid's whole pass is one call (one call per update made the default study's 1x1 pass 2.6x
# slower than engine 1's), and a large grid's block stays a few MB in the CPU's cache layout. In the whole
# layout (compute.stack_layout) a block is 256 MB of noise, 1.4 GB at its peak while it is hashed (measured on
# a CPU): on an H100 each call took about 11 ms of the host's time, 1.7 s of the thesis's 18x18 iteration at
# 8 steps a block.
BLOCK_FLOATS = {"cache": 1 << 21, "whole": 1 << 26}


def draws_engine(drops: bool) -> int:
    """The engine whose draws a grid run makes: engine 3 changed only nn.Dropout's masks, so a run of
    networks without it continues an engine-2 checkpoint with the bits an unbroken run would have."""
    return GRID_ENGINE if drops else 2


@dataclass(frozen=True)
class UpdateDraws:
    """One update of one kind of player (generators or discriminators) in every cell of the pass."""

    defenders: list[int]  # per cell: the index of its defender among its opponents
    losses: list[AdversarialLoss]  # per cell
    lrs: np.ndarray  # [cells, attackers]: the attackers' learning rates after this update's mutation
    noise: torch.Tensor  # [cells * attackers, batch, latent], cell by cell, on the cells' device
    # [cells * attackers, 2], cell by cell: the keys of each attacker's update's dropout masks in the
    # generator and in the discriminator (``keyed_masks``), the attacker's and its defender's.
    dropout: np.ndarray
    loss_picks: list[int] | None = None  # per cell under Mustangs: its loss's place in MUSTANGS_LOSSES


@dataclass(frozen=True)
class _UpdateBlock:
    """The draws of updates ``first`` to ``first + count - 1`` of one kind of player, rows step by step
    and, within a step, cell by cell."""

    first: int
    count: int
    defender_bits: torch.Tensor  # [count * cells, 1] 32-bit values
    loss_bits: torch.Tensor | None  # the same, for Mustangs's loss
    lr_normals: np.ndarray  # [count * cells, attackers]
    lr_uniforms: np.ndarray  # [count * cells, attackers]
    noise: torch.Tensor  # [count, cells * attackers, batch, latent]
    dropout: np.ndarray  # [count, cells * attackers, 2]


class GridDraws:
    """The draws of ``cells`` (which share one set-up and device) in iteration ``iteration``, in the whole
    layout or the cache one, whose training pass (if any) makes ``steps`` updates of each kind of player."""

    def __init__(self, cells: Sequence[DrawingCell], iteration: int, whole: bool, steps: int = 1) -> None:
        first = cells[0]
        self.cells, self.setup, self.device, self.steps = cells, first.setup, first.device, steps
        # The engine's layout (compute.stack_layout): how much is drawn per call. The values do not depend on it.
        self.whole = whole
        self.latent = first.spec.latent_dim
        self.keys = counter_keys([cell.streams.draw_seed for cell in cells], iteration)
        self._blocks: dict[str, _UpdateBlock] = {}
        # Per player: (the block's first update and the opponents' counts; its defenders; its loss picks).
        self._picked: dict[str, tuple] = {}

    def fitness_samples(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Each cell's fitness sample: [cells, size, *image] real images drawn with replacement from the
        cell's subset, and [cells, size, latent] noise, on the cells' device."""
        size = self.setup.grid.fitness_sample_size
        picks = integers(counter_keys(self.keys, "fitness-images"), size, [len(cell.subset) for cell in self.cells])
        real = self.cells[0].images[self._subsets().gather(1, picks).to(self.device)]
        return real, self._noise(counter_keys(self.keys, "fitness-noise"), size)

    def mixture_noise(self) -> torch.Tensor:
        """[cells, score samples, latent]: the noise each cell's mixture makes its images from."""
        return self._noise(counter_keys(self.keys, "mixture"), self.setup.grid.score_sample_size)

    def _noise(self, keys: np.ndarray, samples: int) -> torch.Tensor:
        return normal(keys, samples * self.latent, self.device, whole=self.whole).view(len(keys), samples, self.latent)

    def _subsets(self) -> torch.Tensor:
        """[cells, longest subset] the cells' image indices, a shorter subset padded with zeros."""
        subsets = [cell.subset for cell in self.cells]
        padded = np.zeros((len(subsets), max(len(s) for s in subsets)), dtype=np.int64)
        for row, subset in enumerate(subsets):
            padded[row, : len(subset)] = subset
        return torch.from_numpy(padded)

    def batch_orders(self, length: int) -> torch.Tensor:
        """[cells, length]: the first ``length`` images of each cell's shuffled subset, a permutation sorted
        by a hash of (cell, place in the subset); a cell's subset may be longer than ``length``."""
        subsets = [cell.subset for cell in self.cells]
        longest = max(len(s) for s in subsets)
        # Hashed and sorted on the cells' device: integers, exact anywhere, and a stable sort's order is
        # the same on any device. On the host, an 18x18 grid of 60,000 images each took 2.8 s of an H100's
        # 19.7 s iteration.
        bits = random_bits(counter_keys(self.keys, "order"), longest, self.device)
        # Past a shorter subset's end: sorted last, whatever the hash (which is below 2**32).
        lengths = to_device(torch.tensor([len(s) for s in subsets]), self.device)
        beyond = torch.arange(longest, device=self.device) >= lengths[:, None]
        places = torch.sort(bits.masked_fill_(beyond, 1 << 32), dim=1, stable=True).indices[:, :length]
        return to_device(self._subsets(), self.device).gather(1, places)

    def update(self, step: int, player: str, lrs: np.ndarray, opponents: Sequence[int]) -> UpdateDraws:
        """Update ``step`` of the ``player`` ("g" or "d") rows, whose learning rates are ``lrs`` ([cells,
        attackers]), each cell's defender one of its ``opponents`` (a count per cell)."""
        block = self._blocks.get(player)
        if block is None or not block.first <= step < block.first + block.count:
            block = self._blocks[player] = self._update_block(step, player, lrs.shape[1])
        cells = len(self.cells)
        rows = slice((step - block.first) * cells, (step - block.first + 1) * cells)
        # The block's defenders and losses bounded at its first update, for all of its updates at once: a
        # few host operators per block instead of per update, the same integers.
        key = (block.first, tuple(opponents))
        if self._picked.get(player, (None,))[0] != key:
            block_defenders = bounded(block.defender_bits, list(opponents) * block.count)[:, 0].tolist()
            block_picks = None
            if block.loss_bits is not None:
                block_picks = bounded(block.loss_bits, [len(MUSTANGS_LOSSES)] * len(block.loss_bits))[:, 0].tolist()
            self._picked[player] = key, block_defenders, block_picks
        _, block_defenders, block_picks = self._picked[player]
        defenders = block_defenders[rows]
        picks = None if block_picks is None else block_picks[rows]
        if picks is not None:
            losses = [LOSSES.get(MUSTANGS_LOSSES[p]) for p in picks]
        else:
            losses = [cell.loss for cell in self.cells]
        grid = self.setup.grid
        mutated = mutate_learning_rates(
            lrs,
            self.setup.lr,
            grid.mutation_rate,
            grid.mutation_probability,
            block.lr_normals[rows],
            block.lr_uniforms[rows],
        )
        return UpdateDraws(
            defenders, losses, mutated, block.noise[step - block.first], block.dropout[step - block.first], picks
        )

    def _update_block(self, first: int, player: str, attackers: int) -> _UpdateBlock:
        """The draws of updates from ``first`` on, as many as ``BLOCK_FLOATS`` of noise hold (at least one,
        at most the rest of the pass), for every cell in one call per kind of draw."""
        per_step = len(self.cells) * attackers * self.setup.batch_size * self.latent
        budget = BLOCK_FLOATS["whole" if self.whole else "cache"]
        count = max(1, min(self.steps - first, budget // per_step))
        # Step by step, cell by cell within a step.
        keys = counter_keys(self.keys[None, :], player, np.arange(first, first + count)[:, None]).ravel()
        cpu = torch.device("cpu")
        mustangs = self.setup.loss == "mustangs"
        noise_keys = counter_keys(keys[:, None], "noise", np.arange(attackers)[None, :]).ravel()
        noise = normal(noise_keys, self.setup.batch_size * self.latent, self.device, whole=self.whole)
        return _UpdateBlock(
            first,
            count,
            defender_bits=random_bits(counter_keys(keys, "defender"), 1, cpu),
            loss_bits=random_bits(counter_keys(keys, "loss"), 1, cpu) if mustangs else None,
            lr_normals=normal(counter_keys(keys, "lr"), attackers, cpu, torch.float64).numpy(),
            lr_uniforms=uniform(counter_keys(keys, "lr-applies"), attackers, cpu).numpy(),
            noise=noise.view(count, len(self.cells) * attackers, self.setup.batch_size, self.latent),
            dropout=counter_keys(
                keys[:, None, None], "dropout", np.arange(attackers)[None, :, None], NETWORKS[None, None, :]
            ).reshape(count, len(self.cells) * attackers, len(NETWORKS)),
        )
