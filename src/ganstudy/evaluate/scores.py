"""reference_statistics and evaluate: FID and IS of a generator through torch-fidelity, and for
labelled generators (per-class and conditional training) the FID of each class against that class's
real images; the label histogram of any generator (via the classifier) against the real one."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from torch_fidelity.metric_fid import fid_features_to_statistics, fid_featuresdict_to_statistics
from torch_fidelity.metric_isc import KEY_METRIC_ISC_MEAN, KEY_METRIC_ISC_STD, isc_featuresdict_to_metric

from ganstudy.atomic import atomic_path, read_json, write_json
from ganstudy.data.arrays import load_split, to_uint8
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.extractor import classifier_features, extractor_name
from ganstudy.evaluate.fid import frechet_distance, load_reference
from ganstudy.models.artifact import load_generator, sample_labelled
from ganstudy.parallel.world import set_cpu_threads
from ganstudy.provenance import provenance_record
from ganstudy.seeding import derive_seed


def reference_statistics(
    split_path: str | os.PathLike[str],
    classifier_path: str | os.PathLike[str],
    settings: dict[str, Any],
    out_path: str | os.PathLike[str],
    threads: int,
) -> None:
    """Mean and covariance of the real images' features, computed once per dataset and reused."""
    set_cpu_threads(threads)
    split = load_split(split_path)
    layer = settings["fid_features"]
    images = torch.from_numpy(to_uint8(split.images))
    features = classifier_features(classifier_path, images, [layer], settings["batch_size"])
    stats = fid_featuresdict_to_statistics(features, layer)
    labels, counts = np.unique(split.labels, return_counts=True)
    # Per-class statistics need a covariance, so classes of a single image are left out.
    covered = labels[counts >= 2]
    per_class = [fid_features_to_statistics(features[layer][torch.from_numpy(split.labels == c)]) for c in covered]
    with atomic_path(out_path) as tmp:
        np.savez(
            tmp, mu=stats["mu"], sigma=stats["sigma"], layer=np.array(layer),
            extractor=np.array(extractor_name(classifier_path)), count=np.array(len(images)),
            class_labels=covered, class_mu=np.stack([c["mu"] for c in per_class]),
            class_sigma=np.stack([c["sigma"] for c in per_class]), label_counts=counts[counts >= 2],
        )


def label_tvd(predicted: np.ndarray, real_counts: dict[int, int]) -> float:
    """Total variation distance between the histogram of predicted labels and the real label histogram."""
    classes = sorted(set(real_counts) | set(np.unique(predicted).tolist()))
    real_total = sum(real_counts.values())
    generated = np.array([np.count_nonzero(predicted == c) for c in classes]) / len(predicted)
    real = np.array([real_counts.get(c, 0) for c in classes]) / real_total
    return float(0.5 * np.abs(generated - real).sum())


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
) -> dict[str, Any]:
    set_cpu_threads(threads)
    generator, spec = load_generator(generator_path)
    run = read_json(run_record_path)
    seed = derive_seed(study_seed, trial, "evaluate")
    samples, sample_labels = sample_labelled(generator, spec.latent_dim, settings["samples"], seed, settings["batch_size"])
    images = torch.from_numpy(to_uint8(samples.numpy()))
    fid_layer = settings["fid_features"]
    metrics = settings["metrics"]
    features = classifier_features(classifier_path, images, sorted({fid_layer, "logits"}), settings["batch_size"])
    scores: dict[str, float] = {}
    notes: dict[str, str] = {}
    if {"fid", "class_fid", "label_tvd"} & set(metrics):
        reference = load_reference(reference_path, classifier_path)
        if reference.layer != fid_layer:
            raise GanstudyError(
                f"reference statistics {reference_path} are of the classifier's {reference.layer} layer, not of "
                f"evaluation.fid_features={fid_layer}; delete the file and rerun"
            )
    if "fid" in metrics:
        generated = fid_featuresdict_to_statistics(features, fid_layer)
        scores["fid"] = frechet_distance(generated, reference.statistics)
    if "isc" in metrics:
        isc = isc_featuresdict_to_metric(
            features, "logits", isc_splits=settings["isc_splits"], samples_shuffle=True, rng_seed=seed % 2**32,
            verbose=False,
        )
        scores["isc"] = isc[KEY_METRIC_ISC_MEAN]
        scores["isc_std"] = isc[KEY_METRIC_ISC_STD]
    if "label_tvd" in metrics:
        scores["label_tvd"] = label_tvd(features["logits"].argmax(1).numpy(), reference.label_counts)
    per_class: dict[str, float] = {}
    if "class_fid" in metrics:
        if sample_labels is None:
            notes["class_fid"] = "not reported: the generator does not label its samples (modes single and grid)"
        else:
            for label, real in reference.classes.items():
                mine = sample_labels == label
                # A class with fewer than 2 samples has no covariance: its FID is undefined (NaN).
                per_class[str(label)] = (
                    frechet_distance(fid_features_to_statistics(features[fid_layer][mine]), real) if int(mine.sum()) >= 2 else float("nan")
                )
            scores["class_fid"] = float(np.mean(list(per_class.values())))
    record = provenance_record(
        "evaluate",
        settings,
        setup_name=run["setup_name"],
        trial=trial,
        seed=seed,
        scores=scores,
        class_fid=per_class,
        notes=notes,
        train_seconds=run["train_seconds"],
        extractor=extractor_name(classifier_path),
    )
    write_json(out_path, record)
    return record
