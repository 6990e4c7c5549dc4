"""The scoring stage's settings, typed: ``evaluation`` (scoring the generators) and ``classifier`` (the data
set's classifier that scores them), as frozen dataclasses built once when a command starts from the
validated sections (workflow/schemas/config.schema.yaml describes every key and its default).
tests/test_settings.py checks that the fields are the schema's keys with its defaults. Free of torch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ganstudy.typed import build


@dataclass(frozen=True)
class EvaluationSettings:
    """``evaluation`` as the scoring jobs see it (config.evaluation_settings): ``energy_bins`` and the
    gan3d keys only for the data sets whose scores read them, ``extractor_weights`` and
    ``extractor_sha256`` only for the extractors that read them (None for the others)."""

    samples: int = 2000
    batch_size: int = 500
    metrics: tuple[str, ...] = ("fid", "isc")
    extractor: str = "classifier"
    inception_weights: str | None = None
    inception_sha256: str | None = None
    extractor_weights: str | None = None
    extractor_sha256: str | None = None
    kid_subsets: int = 100
    kid_subset_size: int = 1000
    prc_neighborhood: int = 3
    dc_neighborhood: int = 5
    fid_features: str = "logits"
    isc_splits: int = 10
    reference_split: str = "train"
    energy_bins: tuple[float, ...] | None = None
    gan3d_energies: tuple[float, ...] | None = None
    gan3d_half_width: float | None = None

    @classmethod
    def of(cls, section: Mapping[str, Any], where: str = "evaluation settings") -> EvaluationSettings:
        """From a scoring job's ``--settings`` (keys left out take the schema's defaults)."""
        return build(cls, section, where)


@dataclass(frozen=True)
class ClassifierSettings:
    """``classifier``: the CNN trained on the data set to score its generators, or the user's own (``weights``)."""

    epochs: int = 40
    batch_size: int = 64
    lr: float = 0.001
    min_accuracy: float = 0.9
    weights: str | None = None
    sha256: str | None = None

    @classmethod
    def of(cls, section: Mapping[str, Any], where: str = "classifier settings") -> ClassifierSettings:
        return build(cls, section, where)
