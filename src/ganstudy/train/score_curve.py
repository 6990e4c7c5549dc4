"""The in-training score curve of a pair: what is scored, on what, and how often."""

from __future__ import annotations

from dataclasses import dataclass

from ganstudy.errors import GanstudyError
from ganstudy.evaluate.fid import FidScorer
from ganstudy.evaluate.paired import PairScorer
from ganstudy.evaluate.showers import ShowerScorer
from ganstudy.models import build_pair, get_network
from ganstudy.seeding import derive_seed
from ganstudy.train.modes import TrainingContext
from ganstudy.train.network_spec import network_spec


@dataclass(frozen=True)
class ScoreCurve:
    """A pair's in-training score every ``period`` iterations (and at the last): the FID of its generator's
    images of one fixed noise batch of ``samples`` against the real statistics (a class's, for per-class
    pairs), or for a paired generator the L1 of its outputs for ``samples`` held-out pairs. Scoring draws
    no random number the training uses and changes no weight or statistic, so it changes none of the
    training's bits."""

    scorer: FidScorer | PairScorer | ShowerScorer
    period: int
    samples: int
    label: int | None = None

    @property
    def held_out(self) -> bool:
        """Whether the scorer runs the generator on the test split (paired and shower generators)."""
        return isinstance(self.scorer, (PairScorer, ShowerScorer))

    @property
    def column(self) -> str:
        """The score's column in losses.csv."""
        return self.scorer.column if self.held_out else "fid"


# Tasks whose generators are scored on the test split during training: what is scored on what, the
# seed's name, and the scorer.
HELD_OUT_SCORERS = {"paired": ("a paired generator on held-out pairs", "score-pairs", PairScorer),
                    "energy": ("a shower generator on held-out showers", "score-showers", ShowerScorer)}


def score_curve(context: TrainingContext) -> ScoreCurve | None:
    """The set-up's score curve (``score_period``, ``score_samples``); None when it is switched off."""
    setup = context.setup
    if not setup.score_period:
        return None
    task = get_network(setup.network).task
    if task in HELD_OUT_SCORERS:
        what, stream, scorer = HELD_OUT_SCORERS[task]
        if context.held_out_path is None:
            raise GanstudyError(f"score_period {setup.score_period} scores {what} during training: "
                                "give the job's inputs.held_out (the test split; the workflow does), or set score_period: 0")
        network = build_pair(setup.network, network_spec(setup, context.data, any_task=True))[0]
        seed = derive_seed(context.study_seed, context.trial, stream)
        sizes = {"latent_dim": setup.latent_dim} if scorer is ShowerScorer else {}
        return ScoreCurve(scorer(context.held_out_path, setup.score_samples, seed, network, context.device, **sizes),
                          setup.score_period, setup.score_samples)
    if context.classifier_path is None or context.reference_path is None:
        raise GanstudyError(f"score_period {setup.score_period} scores the generator during training with the data set's "
                            "classifier: give the job's inputs.classifier and inputs.reference (the workflow does), or set score_period: 0")
    scorer = FidScorer(context.classifier_path, context.reference_path, context.device)
    return ScoreCurve(scorer, setup.score_period, setup.score_samples)
