"""How work splits over ranks. Per-class training: which rank trains which class, balanced by sample
count, any rank count from 1 to the number of classes (seed 001's code fixed rank r = label r and
needed 10 ranks). Data parallelism: the rows of a global batch per rank and micro-batch."""

from __future__ import annotations

from collections.abc import Mapping

from ganstudy.errors import GanstudyError


def assign_classes(counts: Mapping[int, int], ranks: int) -> list[list[int]]:
    """Classes per rank, each rank's list in label order.

    Greedy longest-processing-time: the largest class goes to the least-loaded rank (ties: the lower
    rank). Training time grows with a class's sample count, so this evens the ranks' wall time; the
    largest load is at most 4/3 of the optimum.
    """
    if ranks < 1:
        raise GanstudyError(f"per-class training needs at least 1 MPI rank, got {ranks}")
    if ranks > len(counts):
        raise GanstudyError(
            f"per-class training trains one GAN per class: {ranks} MPI ranks for {len(counts)} classes would leave "
            f"{ranks - len(counts)} rank(s) without a class; launch at most {len(counts)} ranks "
            "(the set-up's ranks, or compute.max_ranks)"
        )
    loads = [0] * ranks
    blocks: list[list[int]] = [[] for _ in range(ranks)]
    for label in sorted(counts, key=lambda label: (-counts[label], label)):
        rank = min(range(ranks), key=lambda r: (loads[r], r))
        blocks[rank].append(label)
        loads[rank] += counts[label]
    return [sorted(block) for block in blocks]


def shard_rows(batch_size: int, world_size: int, accumulation: int) -> int:
    """Rows of one micro-batch on one rank of a data-parallel step; the global batch must split evenly."""
    parts = world_size * accumulation
    if batch_size % parts:
        raise GanstudyError(
            f"the global batch_size {batch_size} does not split into {world_size} rank(s) x {accumulation} "
            f"micro-batch(es): choose a batch_size that is a multiple of {parts}, or another rank count or "
            "accumulation_steps"
        )
    return batch_size // parts
