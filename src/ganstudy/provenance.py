"""The provenance record every job writes beside its outputs: what ran, where, with which versions."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
from typing import Any

import ganstudy

_PACKAGES = ("torch", "torchvision", "torch-fidelity", "numpy", "scipy", "scikit-learn", "mpi4py", "snakemake")


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version(), "ganstudy": ganstudy.__version__}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_state(directory: str | None = None) -> dict[str, Any]:
    """Commit of the checkout the job runs from, and whether it had uncommitted changes."""
    cwd = directory or os.getcwd()
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd, capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(dirty)}


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def provenance_record(step: str, settings: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A JSON-ready record; ``extra`` carries the step's own facts (seeds, timings, hosts, ...)."""
    return {
        "step": step,
        "settings": settings,
        "argv": sys.argv,
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "versions": package_versions(),
        "git": git_state(),
        "finished_at": now(),
        **extra,
    }
