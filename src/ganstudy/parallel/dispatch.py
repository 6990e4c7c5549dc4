"""What torch asks a device to do, seen on any device: operators dispatched and values read back.

On a GPU every aten operator is a kernel launch (views and in-place updates reach the dispatcher too) and
every read of a value stops the host until the device is done: a step that dispatches thousands of small
operators, or reads a loss per cell, is bound by the host however fast the GPU. Both are counted here on
the CPU as well, so that the figures that decide GPU speed (benchmarks/grid_dispatch.py) and a CUDA
graph's preconditions (tests/test_stacked_cells.py) can be checked where no GPU is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Tensor methods that copy a value to the host: on a GPU each waits for the device to finish.
HOST_READS = ("item", "tolist", "cpu", "__float__", "__int__", "__bool__", "__index__")


class OperatorCounter(TorchDispatchMode):
    """Counts the aten operators dispatched while it is active, by name; with ``trace``, also lists each
    call as (name, shapes of its tensor arguments), the witness that a step dispatches the same work with
    the same shapes every time."""

    def __init__(self, trace: bool = False) -> None:
        super().__init__()
        self.operators: Counter[str] = Counter()
        self.calls: list[tuple[str, tuple]] | None = [] if trace else None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        self.operators[name] += 1
        if self.calls is not None:
            shapes = tuple(tuple(a.shape) for a in (*args, *(kwargs or {}).values()) if isinstance(a, torch.Tensor))
            self.calls.append((name, shapes))
        return func(*args, **(kwargs or {}))


@contextmanager
def counting_host_reads(counts: Counter[str]) -> Iterator[None]:
    """Counts, by method, the calls of HOST_READS on any tensor while active."""
    originals = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def counted(name: str, original):
        def read(self, *args, **kwargs):
            counts[name] += 1
            return original(self, *args, **kwargs)

        return read

    for name, original in originals.items():
        setattr(torch.Tensor, name, counted(name, original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
