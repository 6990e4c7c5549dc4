"""Feature extractors through torch-fidelity: the data set's classifier (registered as an extractor) or
the standard Inception-v3 from a local weights file.

torch-fidelity keys cached statistics by extractor name only, so the name carries the weights'
hash: a retrained classifier is a different extractor and never meets stale statistics.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.data import Dataset
from torch_fidelity import FeatureExtractorBase, register_feature_extractor
from torch_fidelity.registry import FEATURE_EXTRACTORS_REGISTRY
from torch_fidelity.utils import create_feature_extractor, extract_featuresdict_from_input_id

from ganstudy.data.arrays import file_digest
from ganstudy.evaluate.classifier import load_classifier
from ganstudy.evaluate.weights import check_inception_weights

FEATURES = ("penultimate", "logits")


class ClassifierFeatureExtractor(FeatureExtractorBase):
    """Reads uint8 images (N, C, H, W) as torch-fidelity passes them; returns the requested layers."""

    def __init__(self, name: str, features_list: list[str], feature_extractor_weights_path: str, **_: object):
        super().__init__(name, features_list)
        self.classifier = load_classifier(feature_extractor_weights_path)

    @staticmethod
    def get_provided_features_list() -> tuple[str, ...]:
        return FEATURES

    @staticmethod
    def get_default_feature_layer_for_metric(metric: str) -> str:
        return "logits"

    @staticmethod
    def can_be_compiled() -> bool:
        return False

    @staticmethod
    def get_dummy_input_for_compile() -> torch.Tensor:
        raise NotImplementedError("the classifier extractor is not compiled")

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
        hidden, logits = self.classifier.features(images.float() / 127.5 - 1.0)
        layers = {"penultimate": hidden, "logits": logits}
        return tuple(layers[name] for name in self.features_list)


class UInt8Images(Dataset):
    """A tensor of uint8 images as the Dataset torch-fidelity consumes."""

    def __init__(self, images: torch.Tensor) -> None:
        if images.dtype != torch.uint8 or images.dim() != 4:
            raise ValueError(f"expected uint8 (N, C, H, W) images, got {images.dtype} {tuple(images.shape)}")
        self.images = images

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.images[index]


@dataclass(frozen=True)
class Extractor:
    """A feature extractor and its weights file: the data set's classifier (layers penultimate,
    logits) or torch-fidelity's Inception-v3 (layers 2048, logits_unbiased)."""

    kind: str
    weights: Path
    # Hashed once when the extractor is made: the Inception file is 95 MB, and the name and every
    # score record need the digest.
    sha256: str

    @property
    def name(self) -> str:
        return f"ganstudy-{self.kind}-{self.sha256[:16]}"

    def features(self, images: torch.Tensor, layers: list[str], batch_size: int) -> dict[str, torch.Tensor]:
        """The requested layers' features of uint8 ``images``, extracted by torch-fidelity on the CPU."""
        if self.kind == "inception":
            name = "inception-v3-compat"
            # Inception reads colour images; a grey image is the same grey in each channel.
            images = images.expand(-1, 3, -1, -1) if images.shape[1] == 1 else images
        else:
            name = self.name
            if name not in FEATURE_EXTRACTORS_REGISTRY:
                register_feature_extractor(name, ClassifierFeatureExtractor)
        options = dict(cuda=False, verbose=False, feature_extractor_weights_path=str(self.weights))
        extractor = create_feature_extractor(name, layers, **options)
        return extract_featuresdict_from_input_id(
            1, extractor, input1=UInt8Images(images.contiguous()), batch_size=batch_size, save_cpu_ram=True, **options
        )


def classifier_extractor(path: str | os.PathLike[str]) -> Extractor:
    return Extractor("classifier", Path(path), file_digest(path))


def inception_extractor(path: str | os.PathLike[str] | None, expected_sha256: str | None) -> Extractor:
    return Extractor("inception", Path(path), check_inception_weights(path, expected_sha256))
