"""Dropout whose mask depends on the row's place in the global batch, not on the rank that holds it.

nn.Dropout draws its masks from each process's own random stream, so a data-parallel run on two ranks
would drop other units than the same run on one rank. Here every element's keep bit is a hash of (the
call's seed, the layer, the row's global index, the element's index in its row): a rank computes only
its own rows, and any split into ranks and micro-batches gives the masks one process would have drawn
for the whole batch. The hash is integer arithmetic on the input's device in a few whole-tensor
operations, exact on every device, so a CPU and a CUDA run drop the same units; no mask is drawn on
the CPU or copied to the device.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from ganstudy.counter_random import MASK32, hash32, mix64
from ganstudy.errors import GanstudyError

# Elements hashed at a time on a CPU: the hash's dozen whole-tensor passes then stay in the core's cache
# (3x faster than one pass over calo3d's 847k-element rows); a GPU hashes a layer's mask in one go.
_CPU_BLOCK = 1 << 17


def scaled_mask(call: int, first_row: int, shape: torch.Size, keep: float, dtype: torch.dtype,
                device: torch.device) -> torch.Tensor:
    """Dropout's mask divided by ``keep`` for global rows first_row, first_row + 1, ...: an element is
    kept when the 32-bit hash of its row's and its own key, each a hash of (call, index), is below
    keep * 2**32. Blocks of columns (all rows at once) bound the work held in memory; the bits do not
    depend on the block."""
    rows, per_row = shape[0], shape[1:].numel()
    low, high = call & MASK32, call >> 32
    row_keys = hash32((torch.arange(first_row, first_row + rows, device=device) + low) & MASK32)
    element_keys = hash32((torch.arange(per_row, device=device) + high) & MASK32)
    mask = torch.empty(rows, per_row, dtype=dtype, device=device)
    threshold = round(keep * 2**32)
    columns = max(1, _CPU_BLOCK // max(rows, 1)) if device.type == "cpu" else max(per_row, 1)
    for start in range(0, per_row, columns):
        bits = hash32(row_keys[:, None] ^ element_keys[None, start:start + columns])
        mask[:, start:start + columns] = bits < threshold
    return mask.div_(keep).view(shape)


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
