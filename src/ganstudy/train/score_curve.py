"""The in-training score curve of a pair: what is scored, on what, and how often."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganstudy.contracts import HeldOutScorer
from ganstudy.core.seeding import derive_seed
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.extractor import inception_extractor
from ganstudy.evaluate.fid import FidScorer
from ganstudy.models import build_pair
from ganstudy.train.modes import TrainingContext
from ganstudy.train.network_spec import network_spec


@dataclass(frozen=True)
class ScoreCurve:
    """A pair's in-training score every ``period`` iterations (and at the last): the FID of its generator's
    images of one fixed noise batch of ``samples`` against the real statistics (a class's, for per-class
    pairs), or for a paired generator the L1 of its outputs for ``samples`` held-out pairs. Scoring draws
    no random number the training uses and changes no weight or statistic, so it changes none of the
    training's bits."""

    scorer: Any  # FidScorer, or the data kind's held-out scorer
    period: int
    samples: int
    label: int | None = None
    # Whether the scorer runs the generator on the test split (data kinds with a held-out scorer).
    held_out: bool = False
    # The score's column in losses.csv (a held-out scorer's is its data kind's HeldOut.column).
    column: str = "fid"


def score_curve(context: TrainingContext) -> ScoreCurve | None:
    """The set-up's score curve (``score_period``, ``score_samples``); None when it is switched off."""
    setup = context.setup
    if not setup.score_period:
        return None
    held_out = context.kind.held_out
    if held_out is not None:
        if context.held_out_path is None:
            raise GanstudyError(
                f"score_period {setup.score_period} scores {held_out.what} during training: "
                "give the job's inputs.held_out (the test split; the workflow does), or set score_period: 0"
            )
        network = build_pair(setup.network, network_spec(setup, context.data, any_task=True))[0]
        seed = derive_seed(context.study_seed, context.trial, held_out.stream)
        scorer = context.kind.part(held_out.scorer, HeldOutScorer)
        return ScoreCurve(
            scorer(
                context.held_out_path, setup.score_samples, seed, network, context.device, setup, context.world.size
            ),
            setup.score_period,
            setup.score_samples,
            held_out=True,
            column=held_out.column,
        )
    why = f"score_period {setup.score_period} scores the generator during training"
    return ScoreCurve(
        training_scorer(context, f"{why}, or set score_period: 0"), setup.score_period, setup.score_samples
    )


def training_scorer(context: TrainingContext, why: str) -> FidScorer:
    """The FID of training (score curves, the grid's selection): in the data set's classifier's features,
    or on data of one class without one in Inception's. ``why`` says what needs it when the job lacks it."""
    if context.reference_path is None or (context.classifier_path is None and context.inception_path is None):
        raise GanstudyError(
            f"{why} with the data set's classifier (or Inception, for data of one class): give the job's "
            "inputs.classifier or inputs.inception, and inputs.reference (the workflow does)"
        )
    if context.classifier_path is not None:
        return FidScorer(context.classifier_path, context.reference_path, context.device)
    return FidScorer(inception_extractor(context.inception_path, None), context.reference_path, context.device)
