"""reference_statistics and evaluate_generator: the scores of a generator of images with classes, by
evaluation.metrics (ganstudy.evaluate.metrics; the quality metrics are in evaluate/quality.py), and the
two that need the data set's classifier: class_fid (the FID of each class of a labelled generator's
samples against that class's real images) and label_tvd (the samples' label histogram against the real
one)."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import torch

from ganstudy.config.typed import as_dict
from ganstudy.core.atomic import atomic_path, read_json, write_json
from ganstudy.core.provenance import provenance_record
from ganstudy.core.seeding import derive_seed
from ganstudy.data.arrays import load_split, to_uint8
from ganstudy.data.kinds import IMAGES
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.extractor import Extractor
from ganstudy.evaluate.frechet import feature_statistics, frechet_distance
from ganstudy.evaluate.metrics import METRICS, require_metrics, score_all
from ganstudy.evaluate.scoring import ImageScoring
from ganstudy.evaluate.settings import EvaluationSettings
from ganstudy.models import NetworkSpec
from ganstudy.models.artifact import load_generator, sample_labelled
from ganstudy.models.mixture import Generator
from ganstudy.parallel.world import set_cpu_threads
from ganstudy.study.outcomes import DIVERGED


def reference_statistics(
    split_path: str | os.PathLike[str],
    extractor: Extractor,
    layer: str,
    batch_size: int,
    out_path: str | os.PathLike[str],
    threads: int,
    device: str = "cpu",
) -> None:
    """Mean, covariance and features of the real images in one layer, overall and per class, computed
    once per data set and extractor (on ``device``: cpu, or cuda) and reused by every evaluation."""
    set_cpu_threads(threads)
    split = load_split(split_path)
    images = torch.from_numpy(to_uint8(split.images))
    features = extractor.features(images, [layer], batch_size, device)
    stats = feature_statistics(features[layer])
    labels, counts = np.unique(split.labels, return_counts=True)
    # Per-class statistics need a covariance, so classes of a single image are left out.
    covered = labels[counts >= 2]
    per_class = [feature_statistics(features[layer][torch.from_numpy(split.labels == c)]) for c in covered]
    with atomic_path(out_path) as tmp:
        np.savez(
            tmp,
            mu=stats["mu"],
            sigma=stats["sigma"],
            layer=np.array(layer),
            extractor=np.array(extractor.name),
            count=np.array(len(images)),
            class_labels=covered,
            class_mu=np.stack([c["mu"] for c in per_class]),
            class_sigma=np.stack([c["sigma"] for c in per_class]),
            label_counts=counts[counts >= 2],
            features=features[layer].numpy(),
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
    classifier_path: str | os.PathLike[str] | None,
    reference_path: str | os.PathLike[str] | None,
    settings: EvaluationSettings,
    study_seed: int,
    trial: int,
    out_path: str | os.PathLike[str],
    threads: int,
    quality_reference_path: str | os.PathLike[str] | None = None,
    real_path: str | os.PathLike[str] | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Scores of one generator by evaluation.metrics (ganstudy.evaluate.metrics). The quality metrics use
    evaluation.extractor (the classifier, or Inception with ``quality_reference_path``); class_fid and
    label_tvd always use the data set's classifier, whose classes are the data's. Data of one class have
    no classifier unless the study gives one (``classifier_path`` and ``reference_path`` None).
    ``real_path``: the reference split, for metrics that read the real images themselves. The samples are
    drawn on the CPU, their features extracted on ``device`` (cpu, or cuda: the job's GPU)."""
    require_metrics(IMAGES, settings)
    set_cpu_threads(threads)
    generator, spec = noise_generator(generator_path)
    run = read_json(run_record_path)
    seed = draw_seed(study_seed, trial, 0)
    try:
        scoring = image_scoring(
            generator,
            spec.latent_dim,
            settings,
            seed,
            classifier_path,
            reference_path,
            quality_reference_path,
            real_path,
            device,
        )
    except NonFiniteSamples as error:
        return write_scores(out_path, settings, run, trial, seed, **diverged_scores(settings, str(error)))
    scores = score_all(settings.metrics, scoring)
    return write_scores(
        out_path,
        settings,
        run,
        trial,
        seed,
        scores,
        notes=scoring.notes,
        **scoring.facts,
        extractor=scoring.extractor.name,
        extractor_sha256=scoring.extractor.sha256,
        protocol=scoring.protocol(settings.reference_split),
        scored_on=scored_on(device),
    )


def noise_generator(path: str | os.PathLike[str]) -> tuple[Generator, NetworkSpec]:
    """A saved generator of images from noise; one of a held-out kind (it maps inputs) is refused."""
    generator, spec = load_generator(path)
    if spec.condition_shape is not None:
        raise GanstudyError(
            f"{path} maps inputs of shape {spec.condition_shape} (a paired or energy network), not noise: "
            "it is scored on the held-out test split (ganstudy evaluate --kind pairs or showers --held-out SPLIT; "
            "the workflow does so for data of those kinds)"
        )
    return generator, spec


def draw_seed(study_seed: int, trial: int, draw: int) -> int:
    """The noise seed of a trial's scoring samples: draw 0 is the evaluate step's, draws 1, 2, ... are fresh
    sample sets of the same generator (``ganstudy scoring-noise``)."""
    return derive_seed(study_seed, trial, "evaluate", *((draw,) if draw else ()))


def image_scoring(
    generator: Generator,
    latent_dim: int,
    settings: EvaluationSettings,
    seed: int,
    classifier_path: str | os.PathLike[str] | None,
    reference_path: str | os.PathLike[str] | None,
    quality_reference_path: str | os.PathLike[str] | None = None,
    real_path: str | os.PathLike[str] | None = None,
    device: str = "cpu",
) -> ImageScoring:
    """The scoring of ``settings.samples`` images that ``generator`` draws from the noise of ``seed``, as the
    evaluate step scores them (drawn on the CPU, quantised to 8 bits)."""
    samples, sample_labels = sample_labelled(generator, latent_dim, settings.samples, seed, settings.batch_size)
    if not torch.isfinite(samples).all():
        # Quantised to 8 bits, NaN pixels would become numbers and the scores of pictures that were never drawn.
        raise NonFiniteSamples(
            f"{int((~torch.isfinite(samples)).sum())} of the generator's {samples.numel()} sample values are not "
            "finite: its weights diverged in training"
        )
    return ImageScoring(
        settings,
        seed,
        torch.from_numpy(to_uint8(samples.numpy())),
        sample_labels,
        classifier_path,
        reference_path,
        quality_reference_path,
        real_path,
        device,
    )


def scored_on(device: str) -> str:
    """Where a scoring job extracted its features, for its score file: ``cpu`` or the GPU's model (float
    results differ in their last digits between the two, as between CPUs)."""
    return torch.cuda.get_device_name() if device == "cuda" else "cpu"


def label_tvd_metric(scoring: ImageScoring) -> dict[str, float]:
    predicted = scoring.classifier_features()["logits"].argmax(1).numpy()
    return {"label_tvd": label_tvd(predicted, scoring.classifier_reference().label_counts)}


def class_fid(scoring: ImageScoring) -> dict[str, float]:
    """The mean over classes of each class's FID; the per-class values go into the score file."""
    if scoring.labels is None:
        scoring.notes["class_fid"] = "not reported: the generator does not label its samples (modes single and grid)"
        return {}
    features = scoring.classifier_features()[scoring.settings.fid_features]
    per_class = scoring.facts["class_fid"]
    for label, real in scoring.classifier_reference().classes.items():
        mine = scoring.labels == label
        # A class with fewer than 2 samples has no covariance: its FID is undefined (NaN).
        per_class[str(label)] = (
            frechet_distance(feature_statistics(features[mine]), real) if int(mine.sum()) >= 2 else float("nan")
        )
    return {"class_fid": float(np.mean(list(per_class.values())))}


class NonFiniteSamples(GanstudyError):
    """A generator whose samples are NaN or inf: a run that diverged without its losses showing it (a grid's
    chosen mixture, a plugin's mode)."""


def diverged_scores(settings: EvaluationSettings, why: str) -> dict[str, Any]:
    """write_scores's scores and facts for a trial that diverged: inf in each of evaluation.metrics, which the
    rank tests count as worse than every finite score, and why."""
    return {"scores": dict.fromkeys(settings.metrics, math.inf), "outcome": DIVERGED, "notes": {"diverged": why}}


def write_scores(
    out_path: str | os.PathLike[str],
    settings: EvaluationSettings,
    run: dict[str, Any],
    trial: int,
    seed: int,
    scores: dict[str, float],
    **facts: Any,
) -> dict[str, Any]:
    """A generator's score file: its scores, what the scoring found (``facts``), and the training run's
    set-up and train seconds, with its provenance."""
    record = provenance_record(
        "evaluate",
        as_dict(settings),
        setup_name=run["setup_name"],
        trial=trial,
        seed=seed,
        scores=scores,
        train_seconds=run["train_seconds"],
        # The run's ranks and grid shape go with its scores into scores.csv (the scores-by-grid-size figure).
        world_size=run.get("world_size", 1),
        grid_shape=run.get("grid_shape"),
        # What each rank held, for the cost columns: its threads' cores, and its GPUs where it ran on one.
        cores_per_rank=run.get("torch_threads", 1),
        gpus_per_rank=0 if str(run.get("device", "cpu")) == "cpu" else run.get("gpus_per_rank", 1),
        # The hardware the trial trained on (its float path): the answer page warns where set-ups trained on
        # other kinds in unequal shares.
        hardware=run.get("hardware"),
        # Where each metric came from (a lab's plugin: its package, version and source hash).
        metric_parts={name: METRICS.origin(name).record() for name in settings.metrics},
        **facts,
    )
    write_json(out_path, record)
    return record
