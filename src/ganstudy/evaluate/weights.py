"""The Inception weights file: local only, checked before use. Free of torch, so that the workflow can
check it while it builds the DAG, before any job."""

from __future__ import annotations

import os
from pathlib import Path

from ganstudy.data.arrays import file_digest
from ganstudy.errors import GanstudyError

INCEPTION_URL = "https://github.com/toshas/torch-fidelity/releases/download/v0.2.0/weights-inception-2015-12-05-6726825d.pth"


def check_inception_weights(path: str | os.PathLike[str] | None, expected_sha256: str | None) -> str:
    """The file's sha256. Never downloaded: compute nodes have no internet, and an unchecked file could be anything."""
    if not path or not Path(path).is_file():
        raise GanstudyError(
            f"evaluation.inception_weights {str(path) if path else None!r} is not a file: on a machine with internet "
            f"download\n  {INCEPTION_URL}\ncopy it to the cluster and set evaluation.inception_weights to its path"
        )
    digest = file_digest(path)
    if expected_sha256 and not digest.startswith(expected_sha256.lower()):
        raise GanstudyError(
            f"{path} has sha256 {digest}, not evaluation.inception_sha256={expected_sha256}: another or a damaged "
            "file; download it again"
        )
    return digest
