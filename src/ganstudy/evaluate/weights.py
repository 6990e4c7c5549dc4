"""The pretrained feature networks' weights (local only, checked before use) and the sample count a
Fréchet distance in their features needs. Free of torch, so that the workflow can check both while it
builds the DAG, before any job."""

from __future__ import annotations

import os
from pathlib import Path

from ganstudy.config.pretrained import PRETRAINED
from ganstudy.data.arrays import file_digest
from ganstudy.errors import GanstudyError


def check_weights(extractor: str, path: str | os.PathLike[str] | None, expected_sha256: str | None) -> str:
    """The sha256 of pretrained ``extractor``'s weights file ``path``. Never downloaded."""
    model = PRETRAINED[extractor]
    if not path or not Path(path).is_file():
        raise GanstudyError(
            f"evaluation.{model.weights_key} {str(path) if path else None!r} is not a file: evaluation.extractor "
            f"{extractor} reads {model.what}; on a machine with internet {model.where}, copy it to the cluster and "
            f"set evaluation.{model.weights_key} to its path"
        )
    return checked_digest(path, expected_sha256, f"evaluation.{model.sha256_key}", "copy or download it again")


def checked_digest(path: str | os.PathLike[str], expected_sha256: str | None, key: str, remedy: str) -> str:
    """A user's weights file's sha256, refused when it does not start with ``expected_sha256`` (config key ``key``)."""
    digest = file_digest(path)
    if expected_sha256 and not digest.startswith(expected_sha256.lower()):
        raise GanstudyError(
            f"{path} has sha256 {digest}, not {key}={expected_sha256}: another or a damaged file; {remedy}"
        )
    return digest


def fid_sample_warning(
    extractor: str, samples: int, reference_count: int | None = None, features: int | None = None
) -> str | None:
    """Why FID of ``samples`` generated images in ``extractor``'s features (evaluation.extractor) would be
    unreliable, or None.

    The covariance of n samples has rank at most n - 1: below 2049 samples that of Inception's 2048
    features is singular, its matrix square root is ill-defined and FID is inflated by an amount that
    depends on n, so the scores are not comparable with FIDs computed from other sample counts.
    ``reference_count`` (the real images of the reference statistics) is checked too when given; the
    width is the pretrained model's, or ``features`` (a DINOv2 or CLIP file's, known once it is read)."""
    width = (features or PRETRAINED[extractor].features) if extractor in PRETRAINED else None
    if width is None:
        return None
    needed = width + 1
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
        f"{' and '.join(short)}, fewer than the {needed} that the covariance of {extractor}'s {width} "
        "features needs to be full rank: FID is biased upwards by an amount that depends on the sample "
        f"count and is not comparable with FIDs of other sample counts; {' and '.join(remedies)}"
    )
