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

from ganstudy.errors import GanstudyError

_MASK64 = (1 << 64) - 1
_MASK32 = (1 << 32) - 1


def _mix(value: int) -> int:
    """splitmix64's finaliser: nearby inputs give unrelated seeds."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def hash32(x: torch.Tensor) -> torch.Tensor:
    """C. Wellons' lowbias32 integer hash of an int64 tensor of values in [0, 2**32), in place.

    Tensors have no uint32 arithmetic on every device, and an int64 product past 2**63 is undefined in
    C++, so the values stay below 2**32 and the second multiplier, 0x846CA68B = 2**31 + 0x046CA68B, is
    applied as x * 0x046CA68B + (x << 31): no product exceeds 2**63, and the result is exact on any device.
    """
    x ^= x >> 16
    x.mul_(0x7FEB352D).bitwise_and_(_MASK32)
    x ^= x >> 15
    odd = (x & 1) << 31
    x.mul_(0x046CA68B).add_(odd).bitwise_and_(_MASK32)
    x ^= x >> 16
    return x


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
    low, high = call & _MASK32, call >> 32
    row_keys = hash32((torch.arange(first_row, first_row + rows, device=device) + low) & _MASK32)
    element_keys = hash32((torch.arange(per_row, device=device) + high) & _MASK32)
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
        call = _mix(self.seed ^ (self.layer << 48))
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
