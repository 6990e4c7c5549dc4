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
import os
import resource
import sys
from typing import Any

from ganstudy.core.procfs import status_field

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


# A scoring job (ganstudy evaluate, reference-stats) holds the process's libraries (RANK_BASE_MB), its
# extractor's network twice while it is made (the weights read, the module built from them), the images it
# scores with their features (generated and real: float32 as made, uint8 as read, float32 features), and on
# the CPU one batch's activations (on a GPU those are in the GPU's memory).
EXTRACTOR_WEIGHTS_MB = {"classifier": 1, "inception": 92, "dinov2": 1161, "clip": 335}  # ViT-L/14, ViT-B/16 files
EXTRACTOR_FEATURES = {"classifier": 256 + 100, "inception": 2048 + 1008, "dinov2": 1536, "clip": 768}
# Multiply-adds per image (G): Inception-v3 at 299x299; CLIP ViT-B/16 at 224; a ViT's is about its parameters
# times its tokens, 257 for DINOv2's 16x16 patches of 14 pixels and the class token (ViT-L/14: 78).
EXTRACTOR_GMAC = {"classifier": 0.001, "inception": 5.7, "dinov2": 78.0, "clip": 17.6}
VIT_TOKENS = 257
# Per image of a CPU batch: Inception's measured (benchmarks/scoring.py: 13.9 MB on an AMD EPYC Zen 4); the
# ViTs' estimated from their widest layer, tokens x width x (4 for the MLP + 3 for attention) float32 values
# and the attention's heads x tokens^2 (ViT-L/14: 257 x 1024 x 7 x 4 B + 16 x 257^2 x 4 B, about 12 MB).
ACTIVATION_MB = {"classifier": 0.1, "inception": 14.0, "dinov2": 12.0, "clip": 5.0}
# Multiply-adds per second: one CPU thread, half of the 19-21 G measured by benchmarks/scoring.py on an AMD EPYC
# Zen 4 (other CPUs are slower); one GPU, an assumption kept low until benchmarks/scoring.py runs on one (a
# V100-class card at a third of its float32 peak; docs/benchmarks.md's H200 multiplies at 50 TFLOP/s).
SCORING_GMAC_PER_SECOND = {"cpu": 10.0, "cuda": 2500.0}


def _file_mb(path: str | None) -> float | None:
    try:
        return os.path.getsize(path) / 2**20 if path else None
    except OSError:
        return None


def extractor_gmac(kind: str, weights: str | None) -> float:
    """Multiply-adds (G) per image of the extractor ``kind``; a DINOv2's from its weights file (float32
    parameters times its tokens) where it exists, since ViT-S to ViT-g differ fifty-fold."""
    size = _file_mb(weights) if kind == "dinov2" else None
    return size * 2**20 / 4 * VIT_TOKENS / 1e9 if size else EXTRACTOR_GMAC[kind]


def scoring_memory_mb(kind: str, weights: str | None, images: int, image_values: int, batch: int, device: str) -> int:
    """Estimated peak resident memory (MB) of a scoring job that holds ``images`` images of ``image_values``
    values each (generated and real) and extracts their features with ``kind`` in batches of ``batch``."""
    network = 2 * (_file_mb(weights) or EXTRACTOR_WEIGHTS_MB[kind])
    per_image = (image_values * 5 + EXTRACTOR_FEATURES[kind] * 4) / 2**20
    on_cpu = batch * ACTIVATION_MB[kind] if device == "cpu" else 0.0
    base = RANK_BASE_MB["cpu" if device == "cpu" else "cuda"]
    return math.ceil((base + network + images * per_image + on_cpu) * MARGIN)


def scoring_minutes(kind: str, weights: str | None, images: int, threads: int, device: str) -> int:
    """Wall-time minutes of a scoring job that extracts the features of ``images`` images with ``kind``."""
    rate = SCORING_GMAC_PER_SECOND[device] * (threads if device == "cpu" else 1)
    seconds = images * extractor_gmac(kind, weights) / rate
    return math.ceil(seconds / 60 * 2 * MARGIN)
