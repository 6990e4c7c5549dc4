"""The pretrained feature networks that evaluation.extractor may name (Inception-v3, DINOv2, CLIP): which
config keys give their weights, where to get them, and what each reads and returns. Plain data, imported by
the config (which keys a scoring job reads) and by the scoring stage."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

INCEPTION_URL = (
    "https://github.com/toshas/torch-fidelity/releases/download/v0.2.0/weights-inception-2015-12-05-6726825d.pth"
)


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
        "inception_weights",
        "inception_sha256",
        "torch-fidelity's Inception-v3 weights",
        f"download {INCEPTION_URL}",
        "2048",
        "logits_unbiased",
        2048,
        _RESIZED.format(size="299x299"),
    ),
    # Stein et al. (NeurIPS 2023) recommend the Fréchet distance in DINOv2 ViT-L/14 features.
    "dinov2": Pretrained(
        "extractor_weights",
        "extractor_sha256",
        "a DINOv2 backbone's weights (facebookresearch/dinov2)",
        "download https://dl.fbaipublicfiles.com/dinov2/dinov2_vitl14/dinov2_vitl14_pretrain.pth (ViT-L/14; "
        "vits14, vitb14 and vitg14 and the *_reg4_pretrain.pth files likewise)",
        "dinov2",
        None,
        None,
        _RESIZED.format(size="224x224") + ", ImageNet mean and deviation",
    ),
    "clip": Pretrained(
        "extractor_weights",
        "extractor_sha256",
        "an OpenAI CLIP model's TorchScript file (openai/CLIP)",
        "download https://openaipublic.azureedge.net/clip/models/5806e77cd80f8b59890b7e101eabd078d9fb84e6937f9e85e4ecb61988df416f"
        "/ViT-B-16.pt (ViT-B/16; the other models' files are listed in openai/CLIP's clip/clip.py, their sha256 in "
        "the address)",
        "clip",
        None,
        None,
        _RESIZED.format(size="the model's input size") + ", CLIP's mean and deviation",
    ),
}
# Keys only a pretrained extractor reads (config.evaluation_settings leaves them out for the others).
EXTRACTOR_KEYS: dict[str, tuple[str, ...]] = {
    key: tuple(name for name, model in PRETRAINED.items() if key in (model.weights_key, model.sha256_key))
    for key in ("extractor_weights", "extractor_sha256")
}


def pretrained_file(evaluation: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The weights file and expected sha256 of evaluation.extractor when it is a pretrained network; (None,
    None) for the data set's classifier."""
    model = PRETRAINED.get(evaluation["extractor"])
    return model.file(evaluation) if model else (None, None)
