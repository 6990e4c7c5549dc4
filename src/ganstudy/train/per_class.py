"""Training mode ``per_class`` (seed 001's distributed DC-CGAN): one unconditional GAN per class, the
classes spread over the MPI ranks by sample count. Ranks train independently and meet once, at the
end, to hand their generators to rank 0, which returns a labelled mixture weighted by the class prior.

Every class has its own seed streams and checkpoints, so the generators are bit-identical whatever
the rank count, and a restarted job resumes each class where it stopped.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import Any

from ganstudy.core.seeding import pair_seeds
from ganstudy.data.subsets import class_partitions, class_prior
from ganstudy.models import NetworkSpec
from ganstudy.models.mixture import MixtureGenerator
from ganstudy.parallel.rank_work import assign_classes
from ganstudy.parallel.stop import TrainingStopped
from ganstudy.parallel.timing import profile_rows
from ganstudy.study.outcomes import TrainingDiverged
from ganstudy.train.modes import TrainingContext, TrainingResult
from ganstudy.train.network_spec import network_spec
from ganstudy.train.pair import PairTrainer
from ganstudy.train.score_curve import score_curve


def train_per_class(context: TrainingContext) -> TrainingResult | None:
    setup, data, world = context.setup, context.data, context.world
    spec = network_spec(setup, data)
    classes, prior, counts = class_prior(data.labels)
    blocks = assign_classes(counts, world.size)
    if world.is_root:
        layout = "; ".join(f"rank {r}: {block}" for r, block in enumerate(blocks))
        print(
            f"ganstudy per_class: {len(classes)} classes on {world.size} rank(s) — {layout}",
            file=sys.stderr,
            flush=True,
        )
    gathered = world.comm.gather(_train_classes(context, spec, blocks[world.rank]), root=0)
    if not world.is_root:
        return None
    results = {label: entry for part in gathered for label, entry in part.items()}
    history = [{"class": label, **row} for label in classes for row in results[label]["history"]]
    profile = [
        row
        for label in classes
        for row in profile_rows(results[label]["history"], f"class{label}", results[label]["rank"])
    ]
    diverged = {label: results[label]["diverged"] for label in classes if "diverged" in results[label]}
    if diverged:
        raise TrainingDiverged(
            str(next(iter(diverged.values())))
            + (f" (and {len(diverged) - 1} more of the {len(classes)} classes)" if len(diverged) > 1 else ""),
            {trainer: facts for error in diverged.values() for trainer, facts in error.where.items()},
            history,
            profile,
        )
    table, seeds = [], {}
    for label, share in zip(classes, prior):
        entry = results[label]
        last = entry["history"][-1]
        table.append(
            {
                "class": label,
                "images": counts[label],
                "prior": share,
                "rank": entry["rank"],
                "seconds": entry["seconds"],
                "d_loss": last["d_loss"],
                "g_loss": last["g_loss"],
            }
        )
        seeds.update({f"class{label}/{name}": seed for name, seed in entry["seeds"].items()})
    mixture = MixtureGenerator([results[label]["generator"] for label in classes], prior, classes)
    return TrainingResult(
        mixture,
        setup.network,
        spec,
        history,
        profile,
        tables={"classes": table},
        seeds=seeds,
        facts={"class_assignment": blocks},
    )


def _train_classes(context: TrainingContext, spec: NetworkSpec, block: list[int]) -> dict[int, dict[str, Any]]:
    """This rank's classes (``block``), each a generator against its own class's real images; every rank
    returns only once all agree that none was stopped."""
    world, data = context.world, context.data
    trained: dict[int, dict[str, Any]] = {}
    partitions = class_partitions(data.labels)
    curve = score_curve(context)
    stopped: TrainingStopped | None = None
    for label in block:
        started = time.perf_counter()
        seeds = pair_seeds(context.study_seed, context.trial, f"class{label}/")
        images = data.images[partitions[label]]
        trainer = PairTrainer(
            context.setup,
            spec,
            images,
            None,
            seeds,
            context.devices,
            name=f"class{label}",
            curve=curve and replace(curve, label=label),
        )
        try:
            # A finished class keeps its checkpoint: a job stopped later resumes without retraining it.
            report = trainer.report(context.progress, {"class": label})
            generator = trainer.train(context.checkpoint_dir, context.stop, final_checkpoint=True, report=report).cpu()
        except TrainingStopped as exc:
            stopped = exc
            break
        except TrainingDiverged as exc:
            # The trial has diverged, but every class is trained still: the run's record then names each class
            # that diverges, whatever the rank count.
            trained[label] = {"diverged": exc, "history": exc.history, "rank": world.rank}
            continue
        trained[label] = {
            "generator": generator,
            "history": trainer.history,
            "seeds": seeds,
            "rank": world.rank,
            "seconds": time.perf_counter() - started,
        }
    # Ranks train alone: they agree on stopping only here, before they would meet in the gather.
    if context.stop.agreed(world.comm):
        raise stopped or TrainingStopped(
            f"per_class: another rank was stopped by a signal; rank {world.rank} finished its classes "
            f"{block}, kept in {context.checkpoint_dir}: rerun the job (Snakemake's retries do) to "
            "resume"
        )
    return trained
