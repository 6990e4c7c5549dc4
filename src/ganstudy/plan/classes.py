"""What a study asks of its data's classes, checked while the workflow plans, before any job.

Data of one class (a positives-only x-ray set, the thesis's COVID-19 layout) train GANs in modes single,
grid and data_parallel, but nothing that learns or compares classes: no GAN per class, no conditional
network, no per-class ANOVA, and no classifier of their own (it would have nothing to separate). What
scores with a classifier then needs the user's (classifier.weights), or is computed on Inception
(evaluation.extractor: inception), FID during training included. Free of torch.
"""

from __future__ import annotations

from typing import Any

from ganstudy.data.kinds import DataKind
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.metrics import Metric, get_metric
from ganstudy.models import get_network
from ganstudy.train.mode_needs import TRAINING_MODES


def _learns_classes(setup: dict[str, Any]) -> bool:
    try:
        return TRAINING_MODES.get(setup["mode"]).learns_classes
    except GanstudyError:
        return False  # named by part_problems


def _metrics(config: dict[str, Any]) -> dict[str, Metric]:
    metrics = {}
    for name in config["evaluation"]["metrics"]:
        try:
            metrics[name] = get_metric(name)
        except GanstudyError:
            continue  # named by part_problems
    return metrics


def _classifier_readers(config: dict[str, Any], metrics: dict[str, Metric]) -> list[tuple[str, str]]:
    """What in a validated study of images scores with the data set's classifier (its ``metrics`` among them),
    each as the config key that asks for it and the other way to have it (empty: none but classifier.weights)."""
    inception = " or set evaluation.extractor: inception (with evaluation.inception_weights)"
    extractor = config["evaluation"]["extractor"]
    readers = []
    quality = sorted(name for name, metric in metrics.items() if metric.features)
    if quality and extractor == "classifier":
        readers.append((f"evaluation.extractor: classifier (metrics {', '.join(quality)})", inception))
    own = sorted(name for name, metric in metrics.items() if metric.classifier and not metric.classes)
    if own:
        readers.append((f"evaluation.metrics {', '.join(own)}", ""))
    # Training scores on Inception where the study scores on it (ganstudy.train.score_curve.training_scorer);
    # on the classifier otherwise (DINOv2 and CLIP score the finished generators only).
    for name, setup in config["setups"].items() if extractor != "inception" else ():
        if _learns_classes(setup):
            continue  # refused for its mode
        if TRAINING_MODES.get(setup["mode"]).scores_in_training:
            readers.append((f"setups.{name} (mode {setup['mode']} scores by FID during training)", inception))
        elif setup["score_period"]:
            readers.append((f"setups.{name}.score_period (FID during training)", f"{inception}, or score_period: 0"))
    return readers


def class_problems(config: dict[str, Any], kind: DataKind, classes: int | None) -> list[str]:
    """Why a validated study cannot run on its data of ``classes`` classes (None: not known before they are
    read; the jobs check then), one line per problem naming the key and what to do."""
    if classes is None or kind.held_out is not None:
        return []
    dataset = config["dataset"]
    data = f"dataset '{dataset['name']}'" + (f" ({dataset['path']})" if dataset["path"] else "")
    problems = []
    for name, setup in config["setups"].items():
        for cell, wanted in enumerate((setup.get("grid") or {}).get("cell_classes") or []):
            missing = sorted(label for label in wanted if label >= classes)
            if missing:
                problems.append(
                    f"setups.{name}.grid.cell_classes: cell {cell} names class(es) {missing}, but {data} has "
                    f"classes 0..{classes - 1}: name classes the data have"
                )
    if classes > 1:
        return problems
    for name, setup in config["setups"].items():
        if _learns_classes(setup):
            others = [mode for mode in TRAINING_MODES.names() if not TRAINING_MODES.get(mode).learns_classes]
            problems.append(
                f"setups.{name}.mode: {setup['mode']} learns the classes, but {data} has one class: use mode "
                f"{', '.join(others[:-1])} or {others[-1]}"
            )
            continue
        try:
            conditional = get_network(setup["network"]).conditional
        except GanstudyError:
            continue  # named by part_problems
        if conditional:
            problems.append(
                f"setups.{name}.network: '{setup['network']}' is conditional (it learns the class labels), but "
                f"{data} has one class: choose an unconditional network"
            )
    metrics = _metrics(config)
    compared = sorted(name for name, metric in metrics.items() if metric.classes)
    if compared:
        problems.append(
            f"evaluation.metrics {', '.join(compared)}: compare the classes of samples and data, but {data} has "
            "one class: remove them"
        )
    if config["classifier"]["weights"] is None:
        for reader, otherwise in _classifier_readers(config, metrics):
            problems.append(
                f"{reader}: scores with a classifier, but {data} has one class, so none can be trained "
                f"(it would have nothing to separate): set classifier.weights to a classifier trained on "
                f"images of several classes (e.g. the same images with their other classes){otherwise}"
            )
    return problems
