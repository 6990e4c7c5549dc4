"""FID of images in memory against a study's reference statistics, for scoring during training.

The numbers equal those of the evaluate step on the same images: the same uint8 quantisation,
the same classifier layer, torch-fidelity's statistics and distance.
"""

from __future__ import annotations

import os

import numpy as np
import torch
from torch_fidelity.metric_fid import KEY_METRIC_FID, fid_features_to_statistics, fid_statistics_to_metric

from ganstudy.errors import GanstudyError
from ganstudy.evaluate.classifier import load_classifier
from ganstudy.evaluate.extractor import extractor_name


def load_reference(
    reference_path: str | os.PathLike[str], classifier_path: str | os.PathLike[str]
) -> tuple[dict[str, np.ndarray], str]:
    """FID statistics of the real images and their classifier layer; refuses those of another classifier."""
    try:
        with np.load(reference_path, allow_pickle=False) as arrays:
            statistics = {"mu": arrays["mu"], "sigma": arrays["sigma"]}
            layer, extractor = str(arrays["layer"]), str(arrays["extractor"])
    except (OSError, KeyError, ValueError) as exc:
        raise GanstudyError(f"reference statistics {reference_path} are unreadable ({exc}); delete the file and rerun") from None
    if extractor != extractor_name(classifier_path):
        raise GanstudyError(
            f"reference statistics {reference_path} belong to {extractor}, not to the classifier "
            f"{classifier_path}; delete the file and rerun"
        )
    return statistics, layer


class FidScorer:
    def __init__(
        self, classifier_path: str | os.PathLike[str], reference_path: str | os.PathLike[str], device: torch.device
    ) -> None:
        self.reference, self.layer = load_reference(reference_path, classifier_path)
        self.classifier = load_classifier(classifier_path).to(device)
        self.device = device

    @torch.no_grad()
    def features(self, images: torch.Tensor) -> torch.Tensor:
        quantised = ((images.to(self.device) + 1.0) * 127.5).round().clamp(0, 255)
        hidden, logits = self.classifier.features(quantised / 127.5 - 1.0)
        return (logits if self.layer == "logits" else hidden).cpu()

    def fid(self, images: torch.Tensor) -> float:
        statistics = fid_features_to_statistics(self.features(images))
        return fid_statistics_to_metric(statistics, self.reference, verbose=False)[KEY_METRIC_FID]
