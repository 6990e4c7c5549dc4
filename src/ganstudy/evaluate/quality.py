"""The quality metrics of generated images against real ones, through torch-fidelity on a QualityScoring's
features (the classifier's or Inception's): fid, isc, kid, precision and recall (torch-fidelity's), density and
coverage. Randomised parts (IS
splits, KID subsets) are seeded from the scoring's seed."""

from __future__ import annotations

import torch
from torch_fidelity.metric_isc import KEY_METRIC_ISC_MEAN, KEY_METRIC_ISC_STD, isc_featuresdict_to_metric
from torch_fidelity.metric_kid import KEY_METRIC_KID_MEAN, KEY_METRIC_KID_STD, kid_features_to_metric
from torch_fidelity.metric_prc import prc_features_to_metric

from ganstudy.evaluate.frechet import feature_statistics, frechet_distance
from ganstudy.evaluate.scoring import QualityScoring, column_of
from ganstudy.evaluate.weights import fid_sample_warning


def fid(scoring: QualityScoring) -> dict[str, float]:
    reference = scoring.quality_reference()
    warning = fid_sample_warning(
        scoring.settings.extractor, scoring.sample_count, len(reference.features), reference.features.shape[1]
    )
    if warning:
        scoring.notes["fid"] = warning
    statistics = feature_statistics(scoring.quality_features()[scoring.fid_layer])
    return {"fid": frechet_distance(statistics, reference.statistics)}


def isc(scoring: QualityScoring) -> dict[str, float]:
    result = isc_featuresdict_to_metric(
        scoring.quality_features(),
        scoring.isc_layer,
        isc_splits=scoring.settings.isc_splits,
        samples_shuffle=True,
        rng_seed=scoring.seed % 2**32,
        verbose=False,
    )
    return {"isc": result[KEY_METRIC_ISC_MEAN], "isc_std": result[KEY_METRIC_ISC_STD]}


def _pair(scoring: QualityScoring) -> tuple[torch.Tensor, torch.Tensor]:
    return scoring.quality_features()[scoring.fid_layer], torch.from_numpy(scoring.quality_reference().features)


def kid(scoring: QualityScoring) -> dict[str, float]:
    generated, real = _pair(scoring)
    subset = min(scoring.settings.kid_subset_size, len(real), len(generated))
    result = kid_features_to_metric(
        generated,
        real,
        kid_subsets=scoring.settings.kid_subsets,
        kid_subset_size=subset,
        rng_seed=scoring.seed % 2**32,
        verbose=False,
    )
    return {"kid": result[KEY_METRIC_KID_MEAN], "kid_std": result[KEY_METRIC_KID_STD]}


def _precision_recall(scoring: QualityScoring) -> dict[str, float]:
    def compute() -> dict[str, float]:
        generated, real = _pair(scoring)
        # torch-fidelity's convention: generated first, real second.
        result = prc_features_to_metric(
            generated,
            real,
            prc_neighborhood=scoring.settings.prc_neighborhood,
            prc_batch_size=10000,
            save_cpu_ram=True,
            verbose=False,
        )
        return {name: float(result[name]) for name in ("precision", "recall")}

    return scoring.once("precision and recall", compute)


precision = column_of(_precision_recall, "precision")
recall = column_of(_precision_recall, "recall")


def density_coverage(real: torch.Tensor, fake: torch.Tensor, k: int) -> dict[str, float]:
    """Density and coverage (Naeem, Oh, Uh, Choi and Yoo, "Reliable Fidelity and Diversity Metrics for
    Generative Models", ICML 2020) of ``fake`` (M, D) against ``real`` (N, D) features, in float64: balls
    around each real point reaching its k-th nearest real neighbour. Density counts, per sample, the balls
    it lies in, over k, averaged over the samples (about 1 for samples distributed like the real points;
    unlike precision, real outliers do not inflate it); coverage is the share of balls that hold a sample
    (mode dropping lowers it; unlike recall, fake outliers do not inflate it)."""
    real, fake = real.double(), fake.double()
    # Column 0 of a row's sorted distances is the point itself (0): the k-th neighbour is column k.
    radii = torch.cdist(real, real).sort(dim=1).values[:, k]
    inside = torch.cdist(real, fake) < radii[:, None]  # (N, M): sample j lies in real i's ball
    return {"density": float(inside.sum()) / (k * fake.shape[0]), "coverage": float(inside.any(dim=1).double().mean())}


def _density_coverage(scoring: QualityScoring) -> dict[str, float]:
    def compute() -> dict[str, float]:
        generated, real = _pair(scoring)
        return density_coverage(real, generated, scoring.settings.dc_neighborhood)

    return scoring.once("density and coverage", compute)


density = column_of(_density_coverage, "density")
coverage = column_of(_density_coverage, "coverage")
