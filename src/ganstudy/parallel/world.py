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


def select_device(world: World, choice: str) -> torch.device:
    """``auto``: the node-local GPU of this rank when CUDA is there (ranks of a node share the GPUs
    round-robin by their rank on the node), else the CPU."""
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        from ganstudy.errors import GanstudyError

        raise GanstudyError("compute.device is 'cuda' but torch finds no CUDA device on this node")
    from mpi4py import MPI

    node = world.comm.Split_type(MPI.COMM_TYPE_SHARED)
    local_rank = node.Get_rank()
    node.Free()
    return torch.device("cuda", local_rank % torch.cuda.device_count())


def set_cpu_threads(threads: int) -> None:
    """Ranks sharing a node must not each grab every core; the rule's ``threads`` decides."""
    torch.set_num_threads(threads)
