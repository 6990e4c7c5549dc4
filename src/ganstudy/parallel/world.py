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


def gpu_indices(local_rank: int, gpus_per_rank: int, gpu_count: int) -> list[int]:
    """This rank's GPUs: ranks of a node take consecutive groups of ``gpus_per_rank``, round-robin
    when the node has fewer GPUs than its ranks need."""
    return [(local_rank * gpus_per_rank + k) % gpu_count for k in range(gpus_per_rank)]


def select_devices(world: World, choice: str, gpus_per_rank: int = 1) -> tuple[torch.device, torch.device]:
    """(generator's device, discriminator's device). ``auto``: this rank's node-local GPU(s) when CUDA
    is there, else the CPU. With 2 GPUs per rank the discriminator gets the second (seed 001)."""
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu"), torch.device("cpu")
    if not torch.cuda.is_available():
        from ganstudy.errors import GanstudyError

        raise GanstudyError("compute.device is 'cuda' but torch finds no CUDA device on this node")
    from mpi4py import MPI

    node = world.comm.Split_type(MPI.COMM_TYPE_SHARED)
    local_rank = node.Get_rank()
    node.Free()
    indices = gpu_indices(local_rank, gpus_per_rank, torch.cuda.device_count())
    return torch.device("cuda", indices[0]), torch.device("cuda", indices[-1])


def set_cpu_threads(threads: int) -> None:
    """Ranks sharing a node must not each grab every core; the rule's ``threads`` decides."""
    torch.set_num_threads(threads)
