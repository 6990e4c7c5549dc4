"""The scoring's own noise: a trained generator scored again on fresh sample sets, exactly as the evaluate
step scores it (``ganstudy scoring-noise``). A score such as FID on a few thousand samples varies from one
sample set to the next; where that variation is a large part of the spread between trials, more
evaluation.samples (scoring only) narrows a comparison that more trials (training) would otherwise have to."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ganstudy.errors import GanstudyError
from ganstudy.evaluate.metrics import score_all
from ganstudy.evaluate.scores import draw_seed, image_scoring, noise_generator
from ganstudy.evaluate.settings import EvaluationSettings
from ganstudy.parallel.world import set_cpu_threads


@dataclass(frozen=True)
class ScoringJob:
    """What one evaluate step of the study scored: the paths and settings of its arguments file."""

    generator: str | os.PathLike[str]
    settings: EvaluationSettings
    study_seed: int
    trial: int
    classifier: str | os.PathLike[str] | None
    reference: str | os.PathLike[str] | None
    quality_reference: str | os.PathLike[str] | None = None
    real: str | os.PathLike[str] | None = None
    device: str = "cpu"


def scoring_draws(job: ScoringJob, draws: int, samples: int | None = None, threads: int = 1) -> list[dict[str, float]]:
    """The scores of ``job``'s generator on sample sets 0 to ``draws`` (0: the evaluate step's own noise, so
    at the study's evaluation.samples it is the score file's score on the machine that wrote it), each of
    ``samples`` images (default: the study's)."""
    if draws < 1:
        raise GanstudyError(f"--draws {draws}: give at least 1 fresh sample set")
    set_cpu_threads(threads)
    settings = job.settings if samples is None else replace(job.settings, samples=samples)
    generator, spec = noise_generator(job.generator)
    scored, previous = [], None
    for draw in range(draws + 1):
        scoring = image_scoring(
            generator,
            spec.latent_dim,
            settings,
            draw_seed(job.study_seed, job.trial, draw),
            job.classifier,
            job.reference,
            job.quality_reference,
            job.real,
            job.device,
        )
        if previous is not None:
            # The extractor's weights are hashed and the references read once, not once per draw.
            scoring.reuse(previous)
        scored.append(score_all(settings.metrics, scoring))
        previous = scoring
    return scored
