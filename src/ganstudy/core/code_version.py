"""Which code is running: the checkout ganstudy runs from (its workflow, profiles and docs live beside the
package, ``pip install -e .`` of a clone) and the git commit that names its version."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import ganstudy

ROOT = Path(ganstudy.__file__).resolve().parents[2]


def git_state(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """Commit of the git checkout at ``directory``, and whether it had uncommitted changes."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=directory,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(dirty)}


def version_text() -> str:
    """``ganstudy <version> (git <commit>[, uncommitted changes])``, or without git where the checkout has none."""
    state = git_state(ROOT)
    if state["commit"] is None:
        return f"ganstudy {ganstudy.__version__} (no git checkout at {ROOT})"
    changes = ", uncommitted changes" if state["dirty"] else ""
    return f"ganstudy {ganstudy.__version__} (git {state['commit'][:12]}{changes})"


def files_sha256(files: Iterable[tuple[Path, Path]]) -> str:
    """sha256 over ``(root, file)`` pairs in the order given: each file's path relative to its root, then its
    bytes, so that a moved file changes the digest as an edited one does."""
    digest = hashlib.sha256()
    for root, file in files:
        digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()
