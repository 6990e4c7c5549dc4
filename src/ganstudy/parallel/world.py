"""Who am I in the MPI job, and how many CPU threads may I use."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class World:
    rank: int
    size: int
    comm: Any  # mpi4py communicator

    @property
    def is_root(self) -> bool:
        return self.rank == 0

    def hosts(self) -> list[str]:
        """Host name of every rank, in rank order (collective: every rank must call it)."""
        return self.comm.allgather(socket.gethostname())


def mpi_world() -> World:
    """The job's MPI_COMM_WORLD; a plain ``python`` start is a singleton world of one rank."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    return World(comm.Get_rank(), comm.Get_size(), comm)


def mpi_library_version() -> str:
    from mpi4py import MPI

    return MPI.Get_library_version().strip().splitlines()[0]


def set_cpu_threads(threads: int) -> None:
    """Ranks sharing a node must not each grab every core; the rule's ``threads`` decides."""
    torch.set_num_threads(threads)
