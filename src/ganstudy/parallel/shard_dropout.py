"""Dropout whose mask depends on the row's place in the global batch, not on the rank that holds it.

nn.Dropout draws its masks from each process's own random stream, so a data-parallel run on two ranks
would drop other units than the same run on one rank. Here every row of a logical forward call gets
its mask from a generator seeded by (the call's seed, the layer, the row's global index): a rank
draws only its own rows, and any split into ranks and micro-batches gives the masks one process would
have drawn for the whole batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from ganstudy.errors import GanstudyError

_MASK64 = (1 << 64) - 1


def _mix(value: int) -> int:
    """splitmix64's finaliser: nearby inputs give unrelated seeds."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


class ShardDropout(nn.Module):
    """Element-wise dropout with probability ``p``; in training it must run inside ``row_masks``."""

    def __init__(self, p: float, layer: int) -> None:
        super().__init__()
        self.p, self.layer = p, layer
        self.seed: int | None = None
        self.offset = 0
        self._generator = torch.Generator()

    def extra_repr(self) -> str:
        return f"p={self.p}, layer={self.layer}"

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return input
        if self.seed is None:
            raise GanstudyError("ShardDropout ran in training outside row_masks(): its rows have no global place")
        keep = 1.0 - self.p
        mask = torch.empty(input.shape, dtype=torch.float32)
        call = _mix(self.seed ^ (self.layer << 48))
        for row in range(input.shape[0]):
            self._generator.manual_seed(_mix(call + self.offset + row))
            mask[row].bernoulli_(keep, generator=self._generator)
        return input * mask.to(input.device, input.dtype) / keep


def shard_dropout(module: nn.Module) -> nn.Module:
    """``module`` with every nn.Dropout replaced, in place, by a ShardDropout of the same p; the layers
    are numbered in module order so that each draws its own masks."""
    found = [(parent, name, child) for parent in module.modules() for name, child in parent.named_children() if type(child) is nn.Dropout]
    for layer, (parent, name, child) in enumerate(found):
        setattr(parent, name, ShardDropout(child.p, layer))
    return module


@contextmanager
def row_masks(module: nn.Module, seed: int, offset: int) -> Iterator[None]:
    """One logical forward call: ``seed`` names the call (the same on every rank), ``offset`` is the
    global index of the first row the module is about to see."""
    layers = [m for m in module.modules() if isinstance(m, ShardDropout)]
    for layer in layers:
        layer.seed, layer.offset = seed, offset
    try:
        yield
    finally:
        for layer in layers:
            layer.seed = None
