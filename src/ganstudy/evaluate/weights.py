"""The Inception weights file (local only, checked before use) and the sample count Inception's FID
needs. Free of torch, so that the workflow can check both while it builds the DAG, before any job."""

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
    return checked_digest(path, expected_sha256, "evaluation.inception_sha256", "download it again")


def checked_digest(path: str | os.PathLike[str], expected_sha256: str | None, key: str, remedy: str) -> str:
    """A user's weights file's sha256, refused when it does not start with ``expected_sha256`` (config key ``key``)."""
    digest = file_digest(path)
    if expected_sha256 and not digest.startswith(expected_sha256.lower()):
        raise GanstudyError(f"{path} has sha256 {digest}, not {key}={expected_sha256}: another or a damaged file; {remedy}")
    return digest


# Width of Inception-v3's pool features, which FID compares.
INCEPTION_FEATURES = 2048


def fid_sample_warning(extractor: str, samples: int, reference_count: int | None = None) -> str | None:
    """Why FID of ``samples`` generated images in ``extractor``'s features (evaluation.extractor) would be
    unreliable, or None.

    The covariance of n samples has rank at most n - 1: below 2049 samples that of 2048 features is
    singular, its matrix square root is ill-defined and FID is inflated by an amount that depends on n,
    so the scores are not comparable with FIDs computed from other sample counts. ``reference_count``
    (the real images of the reference statistics) is checked too when given."""
    if extractor != "inception":
        return None
    needed = INCEPTION_FEATURES + 1
    short, remedies = [], []
    if samples < needed:
        short.append(f"evaluation.samples is {samples}")
        remedies.append("set evaluation.samples to 10000 or more (50000 for FIDs comparable with the literature)")
    if reference_count is not None and reference_count < needed:
        short.append(f"the reference statistics hold {reference_count} real images")
        remedies.append("compare against a larger real set (evaluation.reference_split, or a larger data set)")
    if not short:
        return None
    return (
        f"{' and '.join(short)}, fewer than the {needed} that the covariance of Inception's {INCEPTION_FEATURES} "
        "pool features needs to be full rank: FID is biased upwards by an amount that depends on the sample "
        f"count and is not comparable with FIDs of other sample counts; {' and '.join(remedies)}"
    )
