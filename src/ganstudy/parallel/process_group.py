"""torch.distributed inside an MPI job: rank and world size come from the MPI launcher (mpiexec, srun,
jsrun), so the rule that launches every other mode launches data parallelism too. Rank 0 opens a
TCPStore on a free port and tells the others where it is over MPI: no MASTER_ADDR/MASTER_PORT to set
and no port to collide with another job's."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist

from ganstudy.errors import GanstudyError
from ganstudy.parallel.world import World

TIMEOUT = timedelta(minutes=10)


def backend_for(device: torch.device) -> str:
    """gloo for CPU tensors, nccl for CUDA ones."""
    return "nccl" if device.type == "cuda" else "gloo"


def _store_address(world: World) -> str:
    """Where rank 0's store listens: loopback when the whole job is on one node, else rank 0's host
    name; GANSTUDY_STORE_HOST overrides it (e.g. the address of a high-speed interface)."""
    hosts = world.hosts()
    if os.environ.get("GANSTUDY_STORE_HOST"):
        return os.environ["GANSTUDY_STORE_HOST"]
    return "127.0.0.1" if len(set(hosts)) == 1 else hosts[0]


def check_one_gpu_per_rank(placements: list[tuple[str, int]]) -> None:
    """nccl refuses two ranks on one GPU ("Duplicate GPU detected"), and only at its first collective,
    deep in training: say so before, naming the ranks and what to change. ``placements``: every rank's
    (host, GPU index), in rank order."""
    first: dict[tuple[str, int], int] = {}
    for rank, placement in enumerate(placements):
        if placement in first:
            host, gpu = placement
            gpus = len({index for name, index in placements if name == host})
            ranks = sum(name == host for name, _ in placements)
            raise GanstudyError(
                f"data parallelism over nccl needs a GPU of its own per rank, but ranks {first[placement]} and {rank} "
                f"both train on cuda:{gpu} of host {host} ({ranks} ranks there, {gpus} GPU(s) among them). Launch at "
                "most one rank per GPU (Slurm --gpus-per-task=1, LSF jsrun -g 1; locally fewer ranks: "
                "compute.max_ranks or the set-up's ranks), or set compute.device: cpu to train over gloo."
            )
        first[placement] = rank


@contextmanager
def torch_process_group(world: World, device: torch.device) -> Iterator[None]:
    """The default torch.distributed group over the MPI world, for the duration of the block."""
    if dist.is_initialized():
        raise GanstudyError("a torch.distributed process group is already open in this process")
    if device.type == "cuda":
        # nccl binds a process to one GPU: the one this rank trains on.
        check_one_gpu_per_rank(world.comm.allgather((socket.gethostname(), device.index)))
        torch.cuda.set_device(device)
    host = _store_address(world)
    store = None
    if world.is_root:
        store = dist.TCPStore(host, 0, world.size, is_master=True, timeout=TIMEOUT, wait_for_workers=False)
    port = world.comm.bcast(store.port if store is not None else None, root=0)
    if store is None:
        try:
            store = dist.TCPStore(host, port, world.size, is_master=False, timeout=TIMEOUT)
        except (RuntimeError, OSError) as exc:
            raise GanstudyError(
                f"rank {world.rank} on {socket.gethostname()} cannot reach rank 0's store at {host}:{port} ({exc}); "
                "set GANSTUDY_STORE_HOST to an address of rank 0's node that the other nodes can reach"
            ) from None
    dist.init_process_group(backend_for(device), store=store, rank=world.rank, world_size=world.size, timeout=TIMEOUT)
    try:
        yield
    finally:
        dist.destroy_process_group()
