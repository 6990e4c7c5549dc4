"""nn.Dropout whose masks are keyed, not drawn from a stream: a grid cell's dropout, the same on any rank layout.

A cell's network draws the same masks whether it runs alone (the per-cell loop) or folded with other
cells' rows into one stacked call (``StackedNetwork``), and whatever rank holds it: the caller names
each call's masks with a 64-bit key per block of rows (``keyed_masks``: a grid cell's key of the update,
one per cell in a stack), and a layer's mask for block b is a hash of (keys[b], the layer's place in its
network, its calls since the keys were set, sample, element) (``counter_random.scaled_mask``). A stack
hashes all its rows' masks in one set of whole-tensor operations, where a stream per row would cost a
generator call per row and layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from ganstudy.core.counter_random import Keys, counter_keys, scaled_mask
from ganstudy.errors import GanstudyError


class KeyedDropout(nn.Module):
    """Element-wise dropout with probability ``p``; in training it must run inside ``keyed_masks``, whose
    keys split the batch into as many equal blocks of rows."""

    def __init__(self, p: float, layer: int) -> None:
        super().__init__()
        self.p, self.layer = p, layer
        self.keys: np.ndarray | None = None
        self.calls = 0  # forward calls in training since the keys were set
        self.whole: bool | None = None  # scaled_mask's: a mask in one pass of operators (None: off the CPU)

    def extra_repr(self) -> str:
        return f"p={self.p}, layer={self.layer}"

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return input
        if self.keys is None:
            raise GanstudyError("KeyedDropout ran in training outside keyed_masks(): its masks have no key")
        calls = counter_keys(self.keys, self.layer, self.calls)
        self.calls += 1
        if self.p == 1:
            return input * 0
        return input * scaled_mask(calls, 0, input.shape, 1.0 - self.p, input.dtype, input.device, self.whole)


def replace_dropout(module: nn.Module, make: Callable[[float, int], nn.Module]) -> nn.Module:
    """``module`` with every nn.Dropout replaced, in place, by ``make(p, layer)``, the layers numbered in
    module order so that each draws its own masks."""
    found = [
        (parent, name, child)
        for parent in module.modules()
        for name, child in parent.named_children()
        if type(child) is nn.Dropout
    ]
    for layer, (parent, name, child) in enumerate(found):
        setattr(parent, name, make(child.p, layer))
    return module


def keyed_dropout(module: nn.Module) -> nn.Module:
    """``module`` with every nn.Dropout replaced, in place, by a KeyedDropout of the same p."""
    return replace_dropout(module, KeyedDropout)


def dropout_layers(module: nn.Module) -> list[KeyedDropout]:
    return [m for m in module.modules() if isinstance(m, KeyedDropout)]


@contextmanager
def keyed_masks(module: nn.Module, keys: Keys, whole: bool | None = None) -> Iterator[None]:
    """The masks of ``module``'s forward calls in training while active: ``keys``, one per block of rows
    (a lone network's call: one key), name them, and the layers count their calls from 0. ``whole``: each
    mask in one pass of operators (the grid's whole layout, a GPU's, also where it runs on a CPU)."""
    keys = np.atleast_1d(np.asarray(keys, dtype=np.uint64))
    layers = dropout_layers(module)
    for layer in layers:
        layer.keys, layer.calls, layer.whole = keys, 0, whole
    try:
        yield
    finally:
        for layer in layers:
            layer.keys = None
