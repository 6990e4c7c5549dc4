"""Neighbour exchange of cell states with MPI neighbourhood collectives.

With one cell per rank the ranks form a periodic Cartesian communicator (Create_cart), the
layout of seed 000 (a ring of radius 1: a periodic line). With fewer ranks than cells, or a ring whose
neighbourhoods reach further, each rank holds a block of cells and the ranks
that own neighbouring cells form a distributed-graph communicator, and each peer is sent only the
states of the cells in its cells' neighbourhoods (``neighbor_alltoall``): at 18x18 on 2 ranks, 36
of a rank's 162 cells. Either way one neighbourhood collective moves every state a rank's cells
need; there is no master relay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ganstudy.parallel.topology import Cell, GridShape


@dataclass(frozen=True)
class _Array:
    """A tensor on the wire as a numpy array: pickled (by mpi4py) at memory speed, where pickling the
    tensor itself runs at about a tenth of that (a 3x6 digits grid on 2 ranks spent 9% of each iteration
    in the exchange, mostly there)."""

    values: np.ndarray


def _map_leaves(state: Any, leaf: Callable[[Any], Any]) -> Any:
    """``state`` with ``leaf`` applied to everything that is not a dict, list or tuple."""
    if isinstance(state, dict):
        return {key: _map_leaves(value, leaf) for key, value in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_map_leaves(value, leaf) for value in state)
    return leaf(state)


def _to_array(value: Any) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    # A GPU tensor leaves its device here: pickled as it is, it would come back on the sender's device index.
    host = value.detach().cpu()
    return host if host.dtype == torch.bfloat16 else _Array(host.numpy())


def to_wire(state: Any) -> Any:
    """``state`` with every tensor on the host, as an ``_Array`` where numpy can hold it (not bfloat16)."""
    return _map_leaves(state, _to_array)


def from_wire(state: Any, device: torch.device) -> Any:
    """``to_wire``'s inverse, every tensor on ``device``: the same tensors, bit for bit."""
    return placed(
        _map_leaves(state, lambda value: torch.from_numpy(value.values) if isinstance(value, _Array) else value), device
    )


def placed(state: Any, device: torch.device) -> Any:
    """``state`` with every tensor in it on ``device`` (those already there as they are)."""
    return _map_leaves(state, lambda value: value.to(device) if isinstance(value, torch.Tensor) else value)


class NeighbourExchange:
    def __init__(self, comm: Any, shape: GridShape, blocks: list[list[Cell]], device: torch.device) -> None:
        """``comm`` holds exactly the active ranks; ``blocks[r]`` are rank r's cells; the states received
        are placed on ``device``, where this rank keeps its own."""
        self.shape, self.device = shape, device
        self.rank = comm.Get_rank()
        self.cells = blocks[self.rank]
        owner = {cell: rank for rank, block in enumerate(blocks) for cell in block}
        if all(len(block) == 1 for block in blocks) and (shape.topology == "torus" or shape.radius == 1):
            self.kind = "cartesian"
            # A ring of radius 1 is a periodic line: its neighbours are the cells before and after.
            dims = [shape.rows, shape.cols] if shape.topology == "torus" else [shape.cols]
            self.comm = comm.Create_cart(dims, periods=[True] * len(dims), reorder=False)
            assert tuple(self.comm.Get_coords(self.rank)) == self.cells[0][-len(dims) :]
        else:
            self.kind = "graph"
            peers = sorted({owner[n] for cell in self.cells for n in shape.neighbourhood(cell)} - {self.rank})
            self.comm = comm.Create_dist_graph_adjacent(peers, peers, reorder=False)
            # For each peer, in the communicator's order of destinations: the cells its cells need.
            needs = [{n for c in blocks[peer] for n in shape.neighbourhood(c)} for peer in peers]
            self._wanted = [[cell for cell in self.cells if cell in needed] for needed in needs]

    @property
    def rank_is_its_only_neighbour(self) -> bool:
        return all(rank == self.rank for rank in self.neighbour_ranks())

    def neighbour_ranks(self) -> list[int]:
        """Ranks this rank receives from (Cartesian: N, S, W, E order; may repeat on small grids)."""
        if self.kind == "cartesian":
            ranks = []
            for dim in range(self.comm.Get_dim()):
                before, after = self.comm.Shift(dim, 1)
                ranks += [before, after]
            return ranks
        sources, _, _ = self.comm.Get_dist_neighbors()
        return list(sources)

    def exchange(self, states: dict[Cell, Any]) -> dict[Cell, Any]:
        """Send this rank's cell states to its neighbours; return them together with theirs."""
        merged = dict(states)
        if self.rank_is_its_only_neighbour:
            # A 1x1 grid: the collective would pickle every state to this rank four times (a fifth of
            # a 1x1 run's time on digits) and bring back what is already here.
            return merged
        wire = {cell: to_wire(state) for cell, state in states.items()}
        if self.kind == "cartesian":
            received = self.comm.neighbor_allgather(wire)
        else:
            received = self.comm.neighbor_alltoall([{cell: wire[cell] for cell in cells} for cells in self._wanted])
        for theirs in received:
            merged.update({cell: from_wire(state, self.device) for cell, state in theirs.items() if cell not in states})
        return merged

    def free(self) -> None:
        self.comm.Free()
