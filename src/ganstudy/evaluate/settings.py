"""The scoring stage's settings, typed: ``evaluation`` (scoring the generators) and ``classifier`` (the data
set's classifier that scores them), as frozen dataclasses built once when a command starts from the
validated sections (workflow/schemas/config.schema.yaml describes every key), with the schema's defaults
(ganstudy.config.schema). tests/test_settings.py checks that the fields are the schema's keys. Free of torch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ganstudy.config.schema import schema_defaults
from ganstudy.config.typed import build

# The schema's defaults (ganstudy.config.schema): the one place they are written.
_EVALUATION = schema_defaults("evaluation")
_CLASSIFIER = schema_defaults("classifier")


@dataclass(frozen=True)
class EvaluationSettings:
    """``evaluation`` as the scoring jobs see it (config.evaluation_settings): ``energy_bins`` and the
    gan3d keys only for the data sets whose scores read them, ``extractor_weights`` and
    ``extractor_sha256`` only for the extractors that read them (None for the others)."""

    samples: int = _EVALUATION["samples"]
    batch_size: int = _EVALUATION["batch_size"]
    metrics: tuple[str, ...] = _EVALUATION["metrics"]
    extractor: str = _EVALUATION["extractor"]
    inception_weights: str | None = _EVALUATION["inception_weights"]
    inception_sha256: str | None = _EVALUATION["inception_sha256"]
    extractor_weights: str | None = None
    extractor_sha256: str | None = None
    kid_subsets: int = _EVALUATION["kid_subsets"]
    kid_subset_size: int = _EVALUATION["kid_subset_size"]
    prc_neighborhood: int = _EVALUATION["prc_neighborhood"]
    dc_neighborhood: int = _EVALUATION["dc_neighborhood"]
    fid_features: str = _EVALUATION["fid_features"]
    isc_splits: int = _EVALUATION["isc_splits"]
    reference_split: str = _EVALUATION["reference_split"]
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

    epochs: int = _CLASSIFIER["epochs"]
    batch_size: int = _CLASSIFIER["batch_size"]
    lr: float = _CLASSIFIER["lr"]
    min_accuracy: float = _CLASSIFIER["min_accuracy"]
    weights: str | None = _CLASSIFIER["weights"]
    sha256: str | None = _CLASSIFIER["sha256"]

    @classmethod
    def of(cls, section: Mapping[str, Any], where: str = "classifier settings") -> ClassifierSettings:
        return build(cls, section, where)
