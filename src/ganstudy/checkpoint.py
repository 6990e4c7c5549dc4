"""Atomic, safe torch files: written via temp + rename, read with ``weights_only=True``."""

from __future__ import annotations

import os
import pickle
import zipfile
from typing import Any

import torch

from ganstudy.atomic import atomic_path
from ganstudy.errors import GanstudyError


def save_state(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """Write tensors and plain values (dict, list, str, numbers) so that a restricted load can read them."""
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_state(path: str | os.PathLike[str], remedy: str) -> dict[str, Any]:
    """Read a file written by ``save_state``; ``remedy`` tells the user what to do if it is damaged."""
    if not os.path.exists(path):
        raise GanstudyError(f"{path} does not exist; {remedy}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, pickle.UnpicklingError) as exc:
        raise GanstudyError(f"{path} is corrupt or not a ganstudy file ({exc.__class__.__name__}); {remedy}") from None
    if not isinstance(state, dict):
        raise GanstudyError(f"{path} does not hold a ganstudy state (found {type(state).__name__}); {remedy}")
    return state
