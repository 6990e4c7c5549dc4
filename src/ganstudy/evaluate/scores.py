"""reference_statistics and evaluate: FID and IS of a generator through torch-fidelity, and for
labelled generators (per-class and conditional training) the FID of each class against that class's
real images; the label histogram of any generator (via the classifier) against the real one."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from torch_fidelity.metric_fid import fid_features_to_statistics, fid_featuresdict_to_statistics
from torch_fidelity.metric_kid import KEY_METRIC_KID_MEAN, KEY_METRIC_KID_STD, kid_features_to_metric
from torch_fidelity.metric_prc import prc_features_to_metric
from torch_fidelity.metric_isc import KEY_METRIC_ISC_MEAN, KEY_METRIC_ISC_STD, isc_featuresdict_to_metric

from ganstudy.atomic import atomic_path, read_json, write_json
from ganstudy.data.arrays import load_split, to_uint8
from ganstudy.data.kinds import IMAGES
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.extractor import Extractor, classifier_extractor, inception_extractor
from ganstudy.evaluate.fid import Reference, frechet_distance, load_reference
from ganstudy.evaluate.metrics import LABELLED, QUALITY
from ganstudy.evaluate.weights import fid_sample_warning
from ganstudy.models.artifact import load_generator, sample_labelled
from ganstudy.parallel.world import set_cpu_threads
from ganstudy.provenance import provenance_record
from ganstudy.seeding import derive_seed


def reference_statistics(
    split_path: str | os.PathLike[str],
    extractor: Extractor,
    layer: str,
    batch_size: int,
    out_path: str | os.PathLike[str],
    threads: int,
) -> None:
    """Mean, covariance and features of the real images in one layer, overall and per class, computed
    once per data set and extractor and reused by every evaluation."""
    set_cpu_threads(threads)
    split = load_split(split_path)
    images = torch.from_numpy(to_uint8(split.images))
    features = extractor.features(images, [layer], batch_size)
    stats = fid_featuresdict_to_statistics(features, layer)
    labels, counts = np.unique(split.labels, return_counts=True)
    # Per-class statistics need a covariance, so classes of a single image are left out.
    covered = labels[counts >= 2]
    per_class = [fid_features_to_statistics(features[layer][torch.from_numpy(split.labels == c)]) for c in covered]
    with atomic_path(out_path) as tmp:
        np.savez(
            tmp, mu=stats["mu"], sigma=stats["sigma"], layer=np.array(layer),
            extractor=np.array(extractor.name), count=np.array(len(images)),
            class_labels=covered, class_mu=np.stack([c["mu"] for c in per_class]),
            class_sigma=np.stack([c["sigma"] for c in per_class]), label_counts=counts[counts >= 2],
            features=features[layer].numpy(),
        )


def label_tvd(predicted: np.ndarray, real_counts: dict[int, int]) -> float:
    """Total variation distance between the histogram of predicted labels and the real label histogram."""
    classes = sorted(set(real_counts) | set(np.unique(predicted).tolist()))
    real_total = sum(real_counts.values())
    generated = np.array([np.count_nonzero(predicted == c) for c in classes]) / len(predicted)
    real = np.array([real_counts.get(c, 0) for c in classes]) / real_total
    return float(0.5 * np.abs(generated - real).sum())




def quality_extractor(settings: dict[str, Any], classifier_path: str | os.PathLike[str] | None) -> tuple[Extractor, str, str]:
    """The extractor of FID, IS, KID, precision and recall, with its FID and IS layers (Inception needs
    no classifier)."""
    if settings["extractor"] == "inception":
        return inception_extractor(settings["inception_weights"], settings["inception_sha256"]), "2048", "logits_unbiased"
    return classifier_extractor(classifier_path), settings["fid_features"], "logits"


def _checked_reference(path: str | os.PathLike[str], extractor: Extractor, layer: str) -> Reference:
    reference = load_reference(path, extractor)
    if reference.layer != layer:
        raise GanstudyError(
            f"reference statistics {path} are of layer {reference.layer}, not {layer} (evaluation.fid_features); "
            "delete the file and rerun"
        )
    return reference


def evaluate_generator(
    generator_path: str | os.PathLike[str],
    run_record_path: str | os.PathLike[str],
    classifier_path: str | os.PathLike[str],
    reference_path: str | os.PathLike[str],
    settings: dict[str, Any],
    study_seed: int,
    trial: int,
    out_path: str | os.PathLike[str],
    threads: int,
    quality_reference_path: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Scores of one generator. FID, IS, KID, precision and recall use evaluation.extractor (the
    classifier, or Inception with ``quality_reference_path``); class_fid and label_tvd always use the
    data set's classifier, whose classes are the data's."""
    IMAGES.require_metrics(settings)
    set_cpu_threads(threads)
    generator, spec = load_generator(generator_path)
    if spec.condition_shape is not None:
        raise GanstudyError(
            f"{generator_path} maps inputs of shape {spec.condition_shape} (a paired or energy network), not noise: it is "
            "scored on the held-out test split (ganstudy evaluate --kind pairs or showers --held-out SPLIT; the workflow "
            "does so for data of those kinds)"
        )
    run = read_json(run_record_path)
    seed = derive_seed(study_seed, trial, "evaluate")
    samples, sample_labels = sample_labelled(generator, spec.latent_dim, settings["samples"], seed, settings["batch_size"])
    images = torch.from_numpy(to_uint8(samples.numpy()))
    metrics = set(settings["metrics"])
    batch = settings["batch_size"]
    classifier = classifier_extractor(classifier_path)
    extractor, fid_layer, isc_layer = quality_extractor(settings, classifier_path)
    layer = settings["fid_features"]
    # Each extractor runs once over the samples for every layer the metrics need: when the classifier is
    # evaluation.extractor, the quality scores and the per-class scores share its features.
    wanted: dict[str, tuple[Extractor, set[str]]] = {}
    if metrics & QUALITY:
        wanted.setdefault(extractor.name, (extractor, set()))[1].update({fid_layer, isc_layer})
    if metrics & LABELLED:
        wanted.setdefault(classifier.name, (classifier, set()))[1].update({layer, "logits"})
    features = {name: chosen.features(images, sorted(layers), batch) for name, (chosen, layers) in wanted.items()}
    scores: dict[str, float] = {}
    notes: dict[str, str] = {}
    if metrics & QUALITY:
        reference = _checked_reference(quality_reference_path or reference_path, extractor, fid_layer)
        scores.update(quality_scores(features[extractor.name], reference, fid_layer, isc_layer, metrics, settings, seed))
        warning = fid_sample_warning(settings, len(reference.features))
        if warning:
            notes["fid"] = warning
    per_class: dict[str, float] = {}
    if metrics & LABELLED:
        labelled = features[classifier.name]
        reference = _checked_reference(reference_path, classifier, layer)
        if "label_tvd" in metrics:
            scores["label_tvd"] = label_tvd(labelled["logits"].argmax(1).numpy(), reference.label_counts)
        if "class_fid" in metrics and sample_labels is None:
            notes["class_fid"] = "not reported: the generator does not label its samples (modes single and grid)"
        elif "class_fid" in metrics:
            for label, real in reference.classes.items():
                mine = sample_labels == label
                # A class with fewer than 2 samples has no covariance: its FID is undefined (NaN).
                per_class[str(label)] = (
                    frechet_distance(fid_features_to_statistics(labelled[layer][mine]), real) if int(mine.sum()) >= 2 else float("nan")
                )
            scores["class_fid"] = float(np.mean(list(per_class.values())))
    return write_scores(out_path, settings, run, trial, seed, scores, class_fid=per_class, notes=notes,
                        extractor=extractor.name, extractor_sha256=extractor.sha256)


def write_scores(
    out_path: str | os.PathLike[str], settings: dict[str, Any], run: dict[str, Any], trial: int, seed: int,
    scores: dict[str, float], **facts: Any,
) -> dict[str, Any]:
    """A generator's score file: its scores, what the scoring found (``facts``), and the training run's
    set-up and train seconds, with its provenance."""
    record = provenance_record(
        "evaluate",
        settings,
        setup_name=run["setup_name"],
        trial=trial,
        seed=seed,
        scores=scores,
        train_seconds=run["train_seconds"],
        # The run's ranks and grid shape go with its scores into scores.csv (the scores-by-grid-size figure).
        world_size=run.get("world_size", 1),
        grid_shape=run.get("grid_shape"),
        **facts,
    )
    write_json(out_path, record)
    return record


def quality_scores(
    features: dict[str, torch.Tensor], reference: Reference, fid_layer: str, isc_layer: str, metrics: set[str],
    settings: dict[str, Any], seed: int,
) -> dict[str, float]:
    scores: dict[str, float] = {}
    generated, real = features[fid_layer], torch.from_numpy(reference.features)
    if "fid" in metrics:
        scores["fid"] = frechet_distance(fid_featuresdict_to_statistics(features, fid_layer), reference.statistics)
    if "isc" in metrics:
        isc = isc_featuresdict_to_metric(
            features, isc_layer, isc_splits=settings["isc_splits"], samples_shuffle=True, rng_seed=seed % 2**32, verbose=False,
        )
        scores["isc"], scores["isc_std"] = isc[KEY_METRIC_ISC_MEAN], isc[KEY_METRIC_ISC_STD]
    if "kid" in metrics:
        subset = min(settings["kid_subset_size"], len(real), len(generated))
        kid = kid_features_to_metric(
            generated, real, kid_subsets=settings["kid_subsets"], kid_subset_size=subset, rng_seed=seed % 2**32, verbose=False,
        )
        scores["kid"], scores["kid_std"] = kid[KEY_METRIC_KID_MEAN], kid[KEY_METRIC_KID_STD]
    if metrics & {"precision", "recall"}:
        # torch-fidelity's convention: generated first, real second.
        prc = prc_features_to_metric(
            generated, real, prc_neighborhood=settings["prc_neighborhood"], prc_batch_size=10000, save_cpu_ram=True, verbose=False,
        )
        scores.update({m: float(prc[m]) for m in ("precision", "recall") if m in metrics})
    return scores
