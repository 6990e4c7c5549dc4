"""Which metrics score which generators, by the data they learn. Free of torch, so that the workflow refuses a metric that
cannot be computed while it builds the DAG, before any job."""

from __future__ import annotations

from typing import Any

from ganstudy.errors import GanstudyError

# Of any generator's outputs, on evaluation.extractor's features.
QUALITY = {"fid", "isc", "kid", "precision", "recall"}
# Of labelled generators, always on the data set's classifier (its classes are the data's).
LABELLED = {"class_fid", "label_tvd"}
# Of paired generators (pix2pix) against their targets.
PAIRED = {"l1", "psnr", "ssim"}
# Of energy-conditioned shower generators (calo3d) against the real showers: 3DGAN's physics.
SHOWER = {"sf_mean", "sf_width", "longitudinal", "transverse_x", "transverse_y"}


def metric_problems(evaluation: dict[str, Any], data: str) -> list[str]:
    """Why evaluation.metrics cannot be computed for a study of ``data``: "images" (with classes),
    "pairs" (paired_folder) or "showers" (calorimeter)."""
    metrics = set(evaluation["metrics"])
    if data == "showers":
        wrong = metrics - SHOWER
        return [f"evaluation.metrics {sorted(wrong)} do not score calorimeter showers (they have no classes, and no "
                f"image features fit them): use {sorted(SHOWER)}"] if wrong else []
    problems = []
    if metrics & SHOWER:
        problems.append(f"evaluation.metrics {sorted(metrics & SHOWER)} score calorimeter showers: they need dataset.name "
                        "calorimeter; remove them")
    if data == "images":
        wrong = metrics & PAIRED
        if wrong:
            problems.append(f"evaluation.metrics {sorted(wrong)} compare a paired generator's outputs with targets: they need "
                            "paired data (dataset.name paired_folder); remove them")
        return problems
    if metrics & LABELLED:
        problems.append(f"evaluation.metrics {sorted(metrics & LABELLED)} need class labels, which paired data have not: "
                        f"use {sorted(PAIRED)} and, with Inception features, {sorted(QUALITY)}")
    if metrics & QUALITY and evaluation["extractor"] != "inception":
        problems.append(f"evaluation.metrics {sorted(metrics & QUALITY)} of paired data compare outputs with targets in "
                        "Inception features (paired data train no classifier): set evaluation.extractor to inception "
                        "with evaluation.inception_weights, or remove them")
    return problems


def require_metrics(evaluation: dict[str, Any], data: str) -> None:
    """Raise, naming every problem, when evaluation.metrics cannot be computed for ``data``."""
    problems = metric_problems(evaluation, data)
    if problems:
        raise GanstudyError("; ".join(problems))
