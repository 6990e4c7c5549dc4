"""The provenance record every job writes beside its outputs: what ran, where, with which versions."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import ganstudy
from ganstudy.core.code_version import ROOT, git_state
from ganstudy.core.procfs import cpu_description

_PACKAGES = ("torch", "torchvision", "torch-fidelity", "numpy", "scipy", "scikit-learn", "mpi4py", "snakemake")


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version(), "ganstudy": ganstudy.__version__}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def nvidia_driver_version() -> str | None:
    """The node's NVIDIA driver version from nvidia-smi; None where there is no NVIDIA driver."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    # One line per GPU; a node runs one driver.
    versions = sorted({line.strip() for line in done.stdout.splitlines() if line.strip()})
    return ", ".join(versions) or None


def cuda_versions() -> dict[str, Any]:
    """torch's CUDA and cuDNN versions (None in a CPU-only build of torch) and the node's driver version:
    the three decide which GPU kernels ran, so bit-identical reruns need them recorded."""
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"torch_cuda": torch.version.cuda, "cudnn": cudnn, "nvidia_driver": nvidia_driver_version()}


def float_path(devices: Sequence[str]) -> str:
    """The hardware a rank computed on (``devices``: its device names, "cpu" or a GPU's model), as one label
    that tells float paths apart: the GPU model where it trained on a GPU; else the CPU (model, vendor,
    family and model number), the instruction set ATen's kernels dispatch to and MKL's reproducibility
    branch (MKL_CBWR; auto: MKL picks its kernels by CPU). Trials under other labels compute other bits, and
    a trial's float path picks its outcome as its seed does (docs/results.md)."""
    gpus = [name for name in dict.fromkeys(devices) if name != "cpu"]
    if gpus:
        return " + ".join(gpus)
    import torch

    cpu = cpu_description()
    return (
        f"{cpu['model']} ({cpu['vendor']} family {cpu['family']} model {cpu['model_number']}), "
        f"ATen {torch.backends.cpu.get_cpu_capability()}, MKL_CBWR {os.environ.get('MKL_CBWR') or 'auto'}"
    )


def scheduler_job(environ: Mapping[str, str] | None = None) -> str | None:
    """'Slurm job 123' or 'LSF job 456' when this process runs inside a batch-scheduler job, else None."""
    environ = os.environ if environ is None else environ
    if environ.get("SLURM_JOB_ID"):
        return f"Slurm job {environ['SLURM_JOB_ID']}"
    if environ.get("LSB_JOBID"):
        return f"LSF job {environ['LSB_JOBID']}"
    return None


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def provenance_record(step: str, settings: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A JSON-ready record; ``extra`` carries the step's own facts (seeds, timings, hosts, ...)."""
    return {
        "step": step,
        "settings": settings,
        "argv": sys.argv,
        "host": socket.gethostname(),
        "scheduler_job": scheduler_job(),
        "platform": platform.platform(),
        "cpu": cpu_description(),
        "versions": package_versions(),
        # The code's checkout, not the job's working directory: a study run with -d elsewhere (a
        # scratch folder, a lab's own repository) would record none or another project's commit.
        "git": git_state(ROOT),
        "finished_at": now(),
        **extra,
    }
