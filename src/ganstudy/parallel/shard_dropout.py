"""Dropout whose mask depends on the row's place in the global batch, not on the rank that holds it.

nn.Dropout draws its masks from each process's own random stream, so a data-parallel run on two ranks
would drop other units than the same run on one rank. Here every element's keep bit is a hash of (the
call's seed, the layer, the row's global index, the element's index in its row): a rank computes only
its own rows, and any split into ranks and micro-batches gives the masks one process would have drawn
for the whole batch. The hash is integer arithmetic on the input's device in a few whole-tensor
operations (``counter_random.scaled_mask``), exact on every device, so a CPU and a CUDA run drop the
same units; no mask is drawn on the CPU or copied to the device.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from ganstudy.core.counter_random import mix64, scaled_mask
from ganstudy.errors import GanstudyError
from ganstudy.parallel.keyed_dropout import replace_dropout


class ShardDropout(nn.Module):
    """Element-wise dropout with probability ``p``; in training it must run inside ``row_masks``."""

    def __init__(self, p: float, layer: int) -> None:
        super().__init__()
        self.p, self.layer = p, layer
        self.seed: int | None = None
        self.offset = 0

    def extra_repr(self) -> str:
        return f"p={self.p}, layer={self.layer}"

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return input
        if self.seed is None:
            raise GanstudyError("ShardDropout ran in training outside row_masks(): its rows have no global place")
        keep = 1.0 - self.p
        call = mix64(self.seed ^ (self.layer << 48))
        return input * scaled_mask(call, self.offset, input.shape, keep, input.dtype, input.device)


def shard_dropout(module: nn.Module) -> nn.Module:
    """``module`` with every nn.Dropout replaced, in place, by a ShardDropout of the same p."""
    return replace_dropout(module, ShardDropout)


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
