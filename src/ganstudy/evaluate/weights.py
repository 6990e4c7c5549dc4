"""The pretrained feature networks' weights (local only, checked before use) and the sample count a
Fréchet distance in their features needs. Free of torch, so that the workflow can check both while it
builds the DAG, before any job."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ganstudy.data.arrays import file_digest
from ganstudy.errors import GanstudyError

INCEPTION_URL = "https://github.com/toshas/torch-fidelity/releases/download/v0.2.0/weights-inception-2015-12-05-6726825d.pth"


@dataclass(frozen=True)
class Pretrained:
    """A published feature network that evaluation.extractor names, read from a file the user places
    (compute nodes have no internet, and an unchecked download could be anything)."""

    weights_key: str  # the evaluation key of its file, and of that file's expected sha256
    sha256_key: str
    what: str
    where: str  # how to get the file
    fid_layer: str  # the features that FID, KID, precision, recall, density and coverage compare
    isc_layer: str | None  # class logits for IS; None for an embedding, which has no classes
    features: int | None  # the FID layer's width where every file of it has the same, else None
    reads: str  # how it reads an image, for the scores' protocol

    def file(self, evaluation: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """Its weights file and expected sha256 in an evaluation section."""
        return evaluation[self.weights_key], evaluation[self.sha256_key]


_RESIZED = "uint8 resized to {size} (torch-fidelity's TensorFlow-1 bilinear), grey repeated in 3 channels"
PRETRAINED: dict[str, Pretrained] = {
    "inception": Pretrained(
        "inception_weights", "inception_sha256", "torch-fidelity's Inception-v3 weights", f"download {INCEPTION_URL}",
        "2048", "logits_unbiased", 2048, _RESIZED.format(size="299x299")),
    # Stein et al. (NeurIPS 2023) recommend the Fréchet distance in DINOv2 ViT-L/14 features.
    "dinov2": Pretrained(
        "extractor_weights", "extractor_sha256", "a DINOv2 backbone's weights (facebookresearch/dinov2)",
        "download https://dl.fbaipublicfiles.com/dinov2/dinov2_vitl14/dinov2_vitl14_pretrain.pth (ViT-L/14; "
        "vits14, vitb14 and vitg14 and the *_reg4_pretrain.pth files likewise)",
        "dinov2", None, None, _RESIZED.format(size="224x224") + ", ImageNet mean and deviation"),
    "clip": Pretrained(
        "extractor_weights", "extractor_sha256", "an OpenAI CLIP model's TorchScript file (openai/CLIP)",
        "download https://openaipublic.azureedge.net/clip/models/5806e77cd80f8b59890b7e101eabd078d9fb84e6937f9e85e4ecb61988df416f"
        "/ViT-B-16.pt (ViT-B/16; the other models' files are listed in openai/CLIP's clip/clip.py, their sha256 in "
        "the address)",
        "clip", None, None, _RESIZED.format(size="the model's input size") + ", CLIP's mean and deviation"),
}
# Keys only a pretrained extractor reads (config.evaluation_settings leaves them out for the others).
EXTRACTOR_KEYS: dict[str, tuple[str, ...]] = {
    key: tuple(name for name, model in PRETRAINED.items() if key in (model.weights_key, model.sha256_key))
    for key in ("extractor_weights", "extractor_sha256")}


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
        raise GanstudyError(f"{path} has sha256 {digest}, not {key}={expected_sha256}: another or a damaged file; {remedy}")
    return digest


def fid_sample_warning(extractor: str, samples: int, reference_count: int | None = None,
                       features: int | None = None) -> str | None:
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
