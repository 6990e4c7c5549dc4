"""What a training job needs from the scheduler (memory, wall time) and what its ranks really used.

The estimate sizes Slurm's ``--mem`` (per node) before the job runs; the peaks every run records in
run.json let users check it and size their own jobs. Figures measured on this project's CPU machines
(torch 2.13, MPICH 4; see docs/guide.md, Clusters): a rank that has imported torch, mpi4py and the data loaders and
trained a small GAN peaks at about 600-700 MB of resident memory, of which the training split is a
small part for the embedded digits; the split is held once as a NumPy array and viewed by torch, plus
one transient copy while it is read.
"""

from __future__ import annotations

import math
import resource
import sys
from typing import Any

from ganstudy.procfs import status_field

# Resident memory of a rank besides its data: Python, torch, MPI, the networks and a batch's working set.
RANK_BASE_MB = {"cpu": 1024, "cuda": 3072}  # CUDA: the driver's and cuDNN's host-side state
# The split once as an array, once transiently while it is read.
DATA_COPIES = 2
MARGIN = 1.25
# Below this a rank cannot even import its libraries: an override under it is a mistake.
MIN_RANK_MB = 512


def rank_memory_mb(train_bytes: int, device: str) -> int:
    """Estimated peak resident memory (MB) of one training rank that holds a split of ``train_bytes``."""
    kind = "cpu" if device == "cpu" else "cuda"
    return math.ceil((RANK_BASE_MB[kind] + DATA_COPIES * train_bytes / 2**20) * MARGIN)


def node_memory_mb(ranks_on_node: int, per_rank_mb: int) -> int:
    """Memory to ask for per node (Slurm's --mem): what its ranks hold together."""
    return ranks_on_node * per_rank_mb


def retry_minutes(train_minutes: int, attempt: int, cap: int) -> int:
    """Wall time of a training job's attempt: a retry resumes a job stopped at its limit, and asks for
    more time so that a run too long for one allocation still ends, up to what the queue allows (cap)."""
    return min(train_minutes * attempt, cap)


def _peak_rss_mb() -> float:
    """Peak resident memory of this process image. Linux's VmHWM belongs to the image; ru_maxrss survives
    exec, so a rank started from a large process (a test runner) would report its parent's peak."""
    reported = status_field("VmHWM")  # "123456 kB"
    if reported is not None:
        return int(reported.split()[0]) / 2**10
    # ru_maxrss is in kilobytes on Linux, in bytes on macOS.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (2**20 if sys.platform == "darwin" else 2**10)


def peak_memory() -> dict[str, Any]:
    """This process's peak resident memory (MB) and, on CUDA, the peak memory torch allocated per GPU."""
    rss = _peak_rss_mb()
    gpus = {}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        gpus = {f"cuda:{i}": torch.cuda.max_memory_allocated(i) / 2**20 for i in range(torch.cuda.device_count())}
    return {"rss_mb": round(rss, 1), "gpu_mb": {name: round(mb, 1) for name, mb in gpus.items()}}
