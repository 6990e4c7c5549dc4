"""Which metrics score which generators. Free of torch, so that the workflow refuses a metric that
cannot be computed while it builds the DAG, before any job."""

from __future__ import annotations

from typing import Any

# Of any generator's outputs, on evaluation.extractor's features.
QUALITY = {"fid", "isc", "kid", "precision", "recall"}
# Of labelled generators, always on the data set's classifier (its classes are the data's).
LABELLED = {"class_fid", "label_tvd"}
# Of paired generators (pix2pix) against their targets.
PAIRED = {"l1", "psnr", "ssim"}


def metric_problems(evaluation: dict[str, Any], paired: bool) -> list[str]:
    """Why evaluation.metrics cannot be computed for a study of paired data or of data with classes."""
    metrics = set(evaluation["metrics"])
    if not paired:
        wrong = metrics & PAIRED
        return [f"evaluation.metrics {sorted(wrong)} compare a paired generator's outputs with targets: they need paired "
                "data (dataset.name paired_folder); remove them"] if wrong else []
    problems = []
    if metrics & LABELLED:
        problems.append(f"evaluation.metrics {sorted(metrics & LABELLED)} need class labels, which paired data have not: "
                        f"use {sorted(PAIRED)} and, with Inception features, {sorted(QUALITY)}")
    if metrics & QUALITY and evaluation["extractor"] != "inception":
        problems.append(f"evaluation.metrics {sorted(metrics & QUALITY)} of paired data compare outputs with targets in "
                        "Inception features (paired data train no classifier): set evaluation.extractor to inception "
                        "with evaluation.inception_weights, or remove them")
    return problems
