"""Who am I in the MPI job, and how many CPU threads may I use."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ganstudy.core.provenance import scheduler_job
from ganstudy.errors import GanstudyError


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

    def node_rank(self) -> int:
        """This rank's index among the ranks of its node, as MPI groups them (shared memory), which picks
        its GPUs (collective: every rank must call it)."""
        from mpi4py import MPI

        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            return node.Get_rank()
        finally:
            node.Free()


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


# What the batch scheduler told this process about its GPUs: printed when a job that should have
# GPUs has none, so that the user sees at once whether the scheduler or torch is at fault.
GPU_ENVIRONMENT = (
    "CUDA_VISIBLE_DEVICES",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "SLURM_JOB_PARTITION",
    "SLURM_NODELIST",
    "SLURM_JOB_NODELIST",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_JOB_GPUS",
    "SLURM_STEP_GPUS",
    "SLURM_GPUS_ON_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE",
    "LSB_JOBID",
    "LSB_QUEUE",
    "JSM_NAMESPACE_LOCAL_RANK",
    "JSM_NAMESPACE_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
)
# Any other Slurm variable with one of these in its name describes GPUs or the job step too.
_SLURM_GPU_WORDS = ("GPU", "GRES", "TRES", "STEP")


def gpu_environment(environ: Mapping[str, str] | None = None) -> str:
    """The scheduler's GPU-related variables as ``NAME=value`` (or ``NAME unset``), one string."""
    environ = os.environ if environ is None else environ
    extra = sorted(
        name
        for name in environ
        if name.startswith("SLURM_") and name not in GPU_ENVIRONMENT and any(word in name for word in _SLURM_GPU_WORDS)
    )
    return ", ".join(
        f"{name}={environ[name]}" if name in environ else f"{name} unset" for name in (*GPU_ENVIRONMENT, *extra)
    )


def no_cuda_problem(who: str, what: str, problem: str) -> str:
    """Why a process told to use a GPU has none: what it was told, its torch build (a CPU-only wheel on a GPU
    node is the other common cause) and what the scheduler gave it."""
    build = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    return (
        f"{who} on host {socket.gethostname()}: {problem}, but torch finds no CUDA device (torch {torch.__version__}, "
        f"{build}). The scheduler gave this {what}: {gpu_environment()}."
    )


def _no_cuda_error(world: World, problem: str, remedy: str) -> GanstudyError:
    return GanstudyError(f"{no_cuda_problem(f'rank {world.rank} of {world.size}', 'rank', problem)} {remedy}")


def select_devices(
    world: World, choice: str, gpus_per_rank: int = 1, node_gpus: int = 0
) -> tuple[torch.device, torch.device]:
    """(generator's device, discriminator's device). ``auto``: this rank's node-local GPU(s) when CUDA
    is there, else the CPU. With 2 GPUs per rank the discriminator gets the second (seed 001).

    ``auto`` falls back to the CPU silently only where no GPU was promised: on a laptop, or in a
    scheduler job of a CPU cluster (``node_gpus`` 0). A job on GPU nodes whose rank sees no GPU would
    otherwise train for hours on the CPU and report CPU timings as GPU ones, so it stops instead."""
    if choice == "cpu":
        return torch.device("cpu"), torch.device("cpu")
    if not torch.cuda.is_available():
        job = scheduler_job()
        if choice == "auto" and (node_gpus == 0 or job is None):
            return torch.device("cpu"), torch.device("cpu")
        if choice == "auto":
            raise _no_cuda_error(
                world,
                f"compute.device is 'auto' and the site's node_gpus is {node_gpus} in {job}",
                "Ask the scheduler for GPUs (Slurm: --gpus-per-task or --gres=gpu:N on a GPU partition; LSF: "
                "jsrun -g / bsub -gpu) and check that the partition or queue has GPU nodes; or set "
                "compute.device: cpu to train on the CPU on purpose, or use a site with node_gpus: 0 for a CPU cluster "
                "(profiles/<name>/site.yaml).",
            )
        raise _no_cuda_error(
            world,
            "compute.device is 'cuda'",
            "Run on a node with a GPU (and in a scheduler job ask for GPUs: Slurm --gpus-per-task or --gres=gpu:N, "
            "LSF jsrun -g), install a CUDA build of torch, or set compute.device: cpu (or auto) to train on the CPU.",
        )
    indices = gpu_indices(world.node_rank(), gpus_per_rank, torch.cuda.device_count())
    return torch.device("cuda", indices[0]), torch.device("cuda", indices[-1])


def device_names(devices: tuple[torch.device, ...]) -> list[str]:
    """Names of a rank's distinct devices (``cpu``, or the GPU's model) for the provenance record."""
    return [torch.cuda.get_device_name(d) if d.type == "cuda" else "cpu" for d in dict.fromkeys(devices)]


def set_cpu_threads(threads: int) -> None:
    """Ranks sharing a node must not each grab every core; the rule's ``threads`` decides."""
    torch.set_num_threads(threads)
