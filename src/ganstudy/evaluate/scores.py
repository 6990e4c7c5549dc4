"""reference_statistics and evaluate: FID and IS of a generator through torch-fidelity."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from torch_fidelity.metric_fid import KEY_METRIC_FID, fid_featuresdict_to_statistics, fid_statistics_to_metric
from torch_fidelity.metric_isc import KEY_METRIC_ISC_MEAN, KEY_METRIC_ISC_STD, isc_featuresdict_to_metric

from ganstudy.atomic import atomic_path, read_json, write_json
from ganstudy.data.arrays import load_split, to_uint8
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.extractor import classifier_features, extractor_name
from ganstudy.evaluate.fid import load_reference
from ganstudy.models.artifact import load_generator, sample_generator
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
    with atomic_path(out_path) as tmp:
        np.savez(
            tmp, mu=stats["mu"], sigma=stats["sigma"], layer=np.array(layer),
            extractor=np.array(extractor_name(classifier_path)), count=np.array(len(images)),
        )


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
    samples = sample_generator(generator, spec.latent_dim, settings["samples"], seed, settings["batch_size"])
    images = torch.from_numpy(to_uint8(samples.numpy()))
    fid_layer = settings["fid_features"]
    features = classifier_features(classifier_path, images, sorted({fid_layer, "logits"}), settings["batch_size"])
    scores: dict[str, float] = {}
    if "fid" in settings["metrics"]:
        reference, layer = load_reference(reference_path, classifier_path)
        if layer != fid_layer:
            raise GanstudyError(
                f"reference statistics {reference_path} are of the classifier's {layer} layer, not of "
                f"evaluation.fid_features={fid_layer}; delete the file and rerun"
            )
        generated = fid_featuresdict_to_statistics(features, fid_layer)
        scores["fid"] = fid_statistics_to_metric(generated, reference, verbose=False)[KEY_METRIC_FID]
    if "isc" in settings["metrics"]:
        isc = isc_featuresdict_to_metric(
            features, "logits", isc_splits=settings["isc_splits"], samples_shuffle=True, rng_seed=seed % 2**32,
            verbose=False,
        )
        scores["isc"] = isc[KEY_METRIC_ISC_MEAN]
        scores["isc_std"] = isc[KEY_METRIC_ISC_STD]
    record = provenance_record(
        "evaluate",
        settings,
        setup_name=run["setup_name"],
        trial=trial,
        seed=seed,
        scores=scores,
        train_seconds=run["train_seconds"],
        extractor=extractor_name(classifier_path),
    )
    write_json(out_path, record)
    return record
