"""What a metric's ``compute`` receives (ganstudy.evaluate.metrics): one generator's data, by data kind, with
the evaluation settings and the scoring seed. A metric reads what it needs; features and references are
computed on first use and shared by the metrics of one scoring (each extractor runs once over the
samples, for every layer any metric reads from it).

- ImageScoring (images with classes): ``samples`` (uint8 (N, C, H, W)), ``labels`` (the class each sample
  was drawn for, or None for generators that do not label them), ``quality_features()`` /
  ``quality_reference()`` of evaluation.extractor, ``classifier_features()`` / ``classifier_reference()``
  of the data set's classifier, and ``real_images()`` for a metric that declares it reads them.
- PairScoring (paired images): ``outputs`` and ``targets`` (float (N, C, H, W) in [-1, 1]), ``inputs``,
  and the quality features of the outputs against the targets' (Inception).
- ShowerScoring (calorimeter showers): ``fake`` and ``real`` showers (N, 1, X, Y, Z) and ``energy`` (N, 1)
  in the prepared units.

Every scoring has ``settings`` (EvaluationSettings), ``seed`` (derive from it for any randomness),
``notes`` (a metric that reports nothing says why under its name) and ``facts`` (extra findings for the
score file), and ``once(key, compute)`` for work several metrics share.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, TypeVar

import numpy as np
import torch

from ganstudy.config.pretrained import PRETRAINED
from ganstudy.data.arrays import load_split, to_uint8
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.extractor import Extractor, classifier_extractor, pretrained_extractor
from ganstudy.evaluate.fid import Reference, load_reference
from ganstudy.evaluate.frechet import feature_statistics
from ganstudy.evaluate.settings import EvaluationSettings

T = TypeVar("T")


class Scoring:
    def __init__(self, settings: EvaluationSettings, seed: int, device: str = "cpu") -> None:
        # device: where the feature extractors run (cpu, or cuda: the scoring job's GPU); the generated and
        # real data stay on the CPU, so the samples are the same bits wherever they are scored.
        self.settings, self.seed, self.device = settings, seed, device
        self.notes: dict[str, str] = {}
        self.facts: dict[str, Any] = {}
        self._once: dict[str, Any] = {}

    def once(self, key: str, compute: Callable[[], T]) -> T:
        """``compute()`` the first time ``key`` is asked for, its result after (e.g. precision and recall
        from one neighbourhood computation)."""
        if key not in self._once:
            self._once[key] = compute()
        return self._once[key]

    @property
    def sample_count(self) -> int:
        """How many generated samples the metrics read."""
        raise NotImplementedError

    def real_count(self) -> int | None:
        """How many real samples the metrics compared with (None where no metric read any)."""
        raise NotImplementedError

    def extractors_used(self) -> dict[str, dict[str, object]]:
        """Each feature extractor a metric used, by role ("quality", "classifier"), as it read the images."""
        return {}

    def protocol(self, real_split: str) -> dict[str, Any]:
        """What the scores were measured on, for the score file: two scores are comparable only where this
        agrees (the tables warn where it does not)."""
        return {
            "generated": self.sample_count,
            "real": self.real_count(),
            "real_split": real_split,
            "extractors": self.extractors_used(),
        }


def column_of(shared: Callable[[Any], dict[str, float]], column: str) -> Callable[[Any], dict[str, float]]:
    """The compute of a metric that reports one column of work several metrics share (``shared`` does it
    once per scoring, through ``Scoring.once``): precision and recall, the paired scores, the shower physics."""
    return lambda scoring: {column: shared(scoring)[column]}


def quality_extractor(
    settings: EvaluationSettings, classifier_path: str | os.PathLike[str] | None
) -> tuple[Extractor, str, str | None]:
    """The extractor of FID, IS, KID, precision and recall, with its FID layer and its IS layer (class
    logits; None for DINOv2 and CLIP, whose embeddings have no classes). A pretrained one needs no classifier."""
    if settings.extractor in PRETRAINED:
        model = PRETRAINED[settings.extractor]
        path, sha256 = model.file(asdict(settings))
        return pretrained_extractor(settings.extractor, path, sha256), model.fid_layer, model.isc_layer
    return (
        classifier_extractor(_classifier(classifier_path, "evaluation.extractor classifier")),
        settings.fid_features,
        "logits",
    )


def _classifier(path: str | os.PathLike[str] | None, needed_by: str) -> str | os.PathLike[str]:
    if path is None:
        raise GanstudyError(
            f"{needed_by} scores with the data set's classifier, and this scoring has none (data of one "
            "class train none): give the study classifier.weights, or pass --classifier and --reference"
        )
    return path


def checked_reference(path: str | os.PathLike[str], extractor: Extractor, layer: str) -> Reference:
    reference = load_reference(path, extractor)
    if reference.layer != layer:
        raise GanstudyError(
            f"reference statistics {path} are of layer {reference.layer}, not {layer} (evaluation.fid_features); "
            "delete the file and rerun"
        )
    return reference


class QualityScoring(Scoring):
    """A scoring whose generated images the quality metrics (fid, isc, kid, precision, recall) compare with
    real ones in ``extractor``'s features: layer ``fid_layer`` for FID, KID, precision and recall,
    ``isc_layer`` (class logits, where it has them) for IS. The extractor is made on first use (its weights are
    hashed when it is)."""

    def __init__(
        self,
        settings: EvaluationSettings,
        seed: int,
        classifier_path: str | os.PathLike[str] | None,
        device: str = "cpu",
    ) -> None:
        super().__init__(settings, seed, device)
        self._classifier_path = classifier_path

    def _quality(self) -> tuple[Extractor, str, str]:
        return self.once("quality extractor", lambda: quality_extractor(self.settings, self._classifier_path))

    @property
    def extractor(self) -> Extractor:
        return self._quality()[0]

    @property
    def fid_layer(self) -> str:
        return self._quality()[1]

    @property
    def isc_layer(self) -> str | None:
        return self._quality()[2]

    @property
    def quality_layers(self) -> list[str]:
        """The layers the quality metrics read: FID's, and IS's where the extractor has class logits."""
        return sorted({self.fid_layer, self.isc_layer} - {None})

    def extractor_used(self) -> Extractor | None:
        """The quality extractor if a metric used it."""
        return self._once["quality extractor"][0] if "quality extractor" in self._once else None

    def extractors_used(self) -> dict[str, dict[str, object]]:
        extractor = self.extractor_used()
        if extractor is None:
            return {}
        return {"quality": extractor.protocol(self.quality_layers, self.image_size)}

    @property
    def image_size(self) -> tuple[int, int]:
        """Height and width of the generated images."""
        raise NotImplementedError

    def quality_features(self) -> dict[str, torch.Tensor]:
        """The generated images' features, by layer (at least ``fid_layer`` and ``isc_layer``)."""
        raise NotImplementedError

    def quality_reference(self) -> Reference:
        """The real images' statistics and features of ``fid_layer``."""
        raise NotImplementedError


# What an image scoring computes once whatever its samples: the extractors (their weights hashed on loading),
# the reference statistics and the real images (``ImageScoring.reuse``).
_SAMPLE_FREE = ("quality extractor", "classifier", "reference:quality", "reference:classifier", "real images")


class ImageScoring(QualityScoring):
    def __init__(
        self,
        settings: EvaluationSettings,
        seed: int,
        samples: torch.Tensor,
        labels: np.ndarray | None,
        classifier_path: str | os.PathLike[str] | None,
        reference_path: str | os.PathLike[str] | None,
        quality_reference_path: str | os.PathLike[str] | None,
        real_path: str | os.PathLike[str] | None = None,
        device: str = "cpu",
    ) -> None:
        super().__init__(settings, seed, classifier_path, device)
        self.samples, self.labels = samples, labels
        self._reference_path, self._quality_reference_path = reference_path, quality_reference_path or reference_path
        self._real_path = real_path
        self.facts["class_fid"] = {}

    def reuse(self, other: ImageScoring) -> None:
        """Take over the work of ``other`` that does not depend on its samples (extractors, reference
        statistics, real images): a scoring of other samples with the same settings, files and device, whose
        scores are then those of a fresh one."""
        mine, theirs = (
            (s.settings, s._classifier_path, s._reference_path, s._quality_reference_path, s._real_path, s.device)
            for s in (self, other)
        )
        if mine != theirs:
            raise ValueError("a scoring reuses only the work of one with the same settings, files and device")
        self._once.update({key: other._once[key] for key in _SAMPLE_FREE if key in other._once})

    def real_images(self) -> tuple[torch.Tensor, np.ndarray]:
        """The real images of evaluation.reference_split, uint8 (N, C, H, W) as the samples are, and their
        labels: for a metric that compares pixels, not only features (Metric.real_images)."""
        if self._real_path is None:
            raise GanstudyError(
                "it reads the real images, and this scoring has none: declare real_images=True on the "
                "metric (in its package) so that the workflow gives the scoring job the reference split"
            )

        def load() -> tuple[torch.Tensor, np.ndarray]:
            split = load_split(self._real_path)
            return torch.from_numpy(to_uint8(split.images)), split.labels

        return self.once("real images", load)

    @property
    def classifier(self) -> Extractor:
        """The data set's classifier; a metric that reads it on data of one class without one is named."""
        return self.once("classifier", lambda: classifier_extractor(_classifier(self._classifier_path, "a metric")))

    @property
    def sample_count(self) -> int:
        return len(self.samples)

    @property
    def image_size(self) -> tuple[int, int]:
        return tuple(self.samples.shape[-2:])

    def real_count(self) -> int | None:
        loaded = [
            len(self._once[key].features) for key in ("reference:quality", "reference:classifier") if key in self._once
        ]
        if "real images" in self._once:
            loaded.append(len(self._once["real images"][1]))
        return loaded[0] if loaded else None

    def extractors_used(self) -> dict[str, dict[str, object]]:
        used = super().extractors_used()
        if "classifier" in self._once:
            used["classifier"] = self.classifier.protocol([self.settings.fid_features, "logits"], self.image_size)
        return used

    def _features(self, extractor: Extractor) -> dict[str, torch.Tensor]:
        def extract() -> dict[str, torch.Tensor]:
            # When the classifier is evaluation.extractor, one pass serves the quality and the class metrics.
            layers = set()
            if extractor.name == self.extractor.name:
                layers |= set(self.quality_layers)
            if self._classifier_path is not None and extractor.name == self.classifier.name:
                layers |= {self.settings.fid_features, "logits"}
            return extractor.features(self.samples, sorted(layers), self.settings.batch_size, self.device)

        return self.once(f"features:{extractor.name}", extract)

    def quality_features(self) -> dict[str, torch.Tensor]:
        return self._features(self.extractor)

    def quality_reference(self) -> Reference:
        return self.once(
            "reference:quality", lambda: checked_reference(self._quality_reference_path, self.extractor, self.fid_layer)
        )

    def classifier_features(self) -> dict[str, torch.Tensor]:
        """The data set's classifier's features of the samples: layers evaluation.fid_features and logits."""
        return self._features(self.classifier)

    def classifier_reference(self) -> Reference:
        """The real images' statistics in the classifier's evaluation.fid_features layer, per class too."""
        return self.once(
            "reference:classifier",
            lambda: checked_reference(self._reference_path, self.classifier, self.settings.fid_features),
        )


class PairScoring(QualityScoring):
    def __init__(
        self,
        settings: EvaluationSettings,
        seed: int,
        inputs: torch.Tensor,
        outputs: torch.Tensor,
        targets: torch.Tensor,
        device: str = "cpu",
    ) -> None:
        # The paired data train no classifier: their quality metrics are on Inception (metric_problems).
        super().__init__(settings, seed, None, device)
        self.inputs, self.outputs, self.targets = inputs, outputs, targets

    @property
    def sample_count(self) -> int:
        return len(self.outputs)

    @property
    def image_size(self) -> tuple[int, int]:
        return tuple(self.outputs.shape[-2:])

    def real_count(self) -> int:
        return len(self.targets)

    def quality_features(self) -> dict[str, torch.Tensor]:
        layers = self.quality_layers
        return self.once(
            "features:outputs",
            lambda: self.extractor.features(
                torch.from_numpy(to_uint8(self.outputs.numpy())), layers, self.settings.batch_size, self.device
            ),
        )

    def quality_reference(self) -> Reference:
        def targets() -> Reference:
            real = self.extractor.features(
                torch.from_numpy(to_uint8(self.targets.numpy())),
                [self.fid_layer],
                self.settings.batch_size,
                self.device,
            )
            return Reference(
                feature_statistics(real[self.fid_layer]), self.fid_layer, {}, {}, real[self.fid_layer].numpy()
            )

        return self.once("reference:targets", targets)


class ShowerScoring(Scoring):
    def __init__(
        self, settings: EvaluationSettings, seed: int, real: np.ndarray, fake: np.ndarray, energy: np.ndarray
    ) -> None:
        super().__init__(settings, seed)
        self.real, self.fake, self.energy = real, fake, energy

    @property
    def sample_count(self) -> int:
        return len(self.fake)

    def real_count(self) -> int:
        return len(self.real)
