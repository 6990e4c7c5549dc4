"""FID of images in memory against a study's reference statistics, for scoring during training.

The numbers equal those of the evaluate step on the same images: the same uint8 quantisation,
the same classifier layer, the same statistics and distance (``frechet.py``, torch-fidelity's to the bit).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from ganstudy.errors import GanstudyError
from ganstudy.evaluate.classifier import load_classifier
from ganstudy.evaluate.extractor import Extractor, classifier_extractor
from ganstudy.evaluate.frechet import feature_statistics, frechet_distance


@dataclass(frozen=True)
class Reference:
    """Real-image statistics: FID's mean and covariance over all images and per class, the label counts,
    and the features themselves."""

    statistics: dict[str, np.ndarray]
    layer: str
    classes: dict[int, dict[str, np.ndarray]]
    label_counts: dict[int, int]
    features: np.ndarray  # the real images' features of that layer (KID, precision and recall need them)


def load_reference(reference_path: str | os.PathLike[str], expected: Extractor) -> Reference:
    """The real images' statistics of an extractor's layer; refuses those of another extractor."""
    try:
        with np.load(reference_path, allow_pickle=False) as arrays:
            layer, extractor = str(arrays["layer"]), str(arrays["extractor"])
            labels = arrays["class_labels"].tolist()
            reference = Reference(
                {"mu": arrays["mu"], "sigma": arrays["sigma"]},
                layer,
                {c: {"mu": arrays["class_mu"][i], "sigma": arrays["class_sigma"][i]} for i, c in enumerate(labels)},
                dict(zip(labels, arrays["label_counts"].tolist())),
                arrays["features"],
            )
    except (OSError, KeyError, ValueError) as exc:
        raise GanstudyError(
            f"reference statistics {reference_path} are unreadable ({exc}); delete the file and rerun"
        ) from None
    if extractor != expected.name:
        raise GanstudyError(
            f"reference statistics {reference_path} belong to {extractor}, not to {expected.name} "
            f"({expected.weights}); delete the file and rerun"
        )
    return reference


class FidScorer:
    """FID of generated images (in [-1, 1]) in an extractor's features: the data set's classifier (given
    by its path), or Inception-v3 on data of one class that have none."""

    def __init__(
        self,
        extractor: Extractor | str | os.PathLike[str],
        reference_path: str | os.PathLike[str],
        device: torch.device,
    ) -> None:
        extractor = extractor if isinstance(extractor, Extractor) else classifier_extractor(extractor)
        reference = load_reference(reference_path, extractor)
        self.reference, self.layer, self.classes = reference.statistics, reference.layer, reference.classes
        self.device = device
        if extractor.kind == "inception":
            from ganstudy.evaluate.fidelity_extractor import inception_network

            self.inception = inception_network(extractor.weights, [self.layer]).to(device)
        else:
            self.classifier = load_classifier(extractor.weights).to(device)
        self.kind = extractor.kind

    @torch.no_grad()
    def device_features(self, images: torch.Tensor) -> torch.Tensor:
        """The features of ``images``, left on the scorer's device."""
        return self.network_features(self.network_input(images))

    @torch.no_grad()
    def network_input(self, images: torch.Tensor) -> torch.Tensor:
        """``images`` as the feature network reads them: quantised to 8 bits, as the scoring job reads
        image files. Element by element, so that images of many sets in one call get their bits alone."""
        quantised = ((images.to(self.device) + 1.0) * 127.5).round().clamp(0, 255)
        if self.kind == "inception":
            # uint8, a grey image the same grey in each channel.
            return (
                quantised.to(torch.uint8).expand(-1, 3, -1, -1)
                if quantised.shape[1] == 1
                else quantised.to(torch.uint8)
            )
        return quantised / 127.5 - 1.0

    @torch.no_grad()
    def network_features(self, network_input: torch.Tensor) -> torch.Tensor:
        """The features of images that ``network_input`` prepared, left on the scorer's device."""
        if self.kind == "inception":
            return self.inception(network_input)[0]
        hidden, logits = self.classifier.features(network_input)
        return logits if self.layer == "logits" else hidden

    def features(self, images: torch.Tensor) -> torch.Tensor:
        """The features of ``images``, on the host (``distance`` reads them there)."""
        return self.device_features(images).cpu()

    def fid(self, images: torch.Tensor, label: int | None = None) -> float:
        """FID against all real images, or against those of class ``label``."""
        return self.distance(self.features(images), label)

    def distance(self, features: torch.Tensor | np.ndarray, label: int | None = None) -> float:
        """FID of images given by their ``features`` (as ``features`` makes them)."""
        statistics = feature_statistics(features)
        return frechet_distance(statistics, self.reference if label is None else self.classes[label])
