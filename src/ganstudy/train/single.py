"""Training modes ``single`` (one unconditional GAN, seed 001's DC-GAN baseline) and ``conditional``
(one conditional GAN, seed 001's DC-CGAN), each on one rank."""

from __future__ import annotations

import numpy as np

from ganstudy.core.seeding import pair_seeds
from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec
from ganstudy.models.mixture import pair_generator
from ganstudy.parallel.timing import profile_rows
from ganstudy.train.modes import TrainingContext, TrainingResult
from ganstudy.train.network_spec import network_spec
from ganstudy.train.pair import PairTrainer
from ganstudy.train.score_curve import score_curve


def _one_rank(context: TrainingContext) -> None:
    if context.world.size != 1:
        raise GanstudyError(
            f"training mode '{context.setup.mode}' runs on 1 MPI rank, but the job has {context.world.size}; "
            "give the set-up 1 task or choose a distributed mode"
        )


def _one_pair(
    context: TrainingContext, spec: NetworkSpec, labels: np.ndarray | None, conditions: np.ndarray | None
) -> TrainingResult:
    """One pair on this rank; ``labels`` condition the generator (a conditional GAN), ``conditions`` are the
    per-image inputs of a generator that needs them (3DGAN's energies)."""
    seeds = pair_seeds(context.study_seed, context.trial)
    trainer = PairTrainer(
        context.setup,
        spec,
        context.data.images,
        labels,
        seeds,
        context.devices,
        curve=score_curve(context),
        conditions=conditions,
    )
    generator = trainer.train(context.checkpoint_dir, context.stop, report=trainer.report(context.progress)).cpu()
    return TrainingResult(
        pair_generator(generator, labels),
        context.setup.network,
        spec,
        trainer.history,
        profile_rows(trainer.history, "0-0", 0),
        seeds=seeds,
    )


def train_single(context: TrainingContext) -> TrainingResult:
    _one_rank(context)
    spec = network_spec(context.setup, context.data, any_task=True)
    return _one_pair(context, spec, None, context.data.conditions if spec.condition_shape is not None else None)


def train_conditional(context: TrainingContext) -> TrainingResult:
    _one_rank(context)
    spec = network_spec(context.setup, context.data, conditional=True)
    return _one_pair(context, spec, context.data.labels, None)
