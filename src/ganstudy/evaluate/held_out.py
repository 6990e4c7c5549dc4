"""What the scoring job of every kind scored on held-out data opens first (ganstudy.contracts.HeldOutJob):
the metrics checked against the kind, the CPU threads set, the generator, the split, the run's record
and the scoring seed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganstudy.contracts import HeldOutJob
from ganstudy.core.atomic import read_json
from ganstudy.core.seeding import derive_seed
from ganstudy.data.arrays import Split, load_split
from ganstudy.data.kinds import DataKind
from ganstudy.evaluate.metrics import require_metrics
from ganstudy.models import NetworkSpec
from ganstudy.models.artifact import load_generator
from ganstudy.models.mixture import Generator
from ganstudy.parallel.world import set_cpu_threads


@dataclass(frozen=True)
class OpenedJob:
    generator: Generator
    spec: NetworkSpec
    split: Split
    run: dict[str, Any]  # the run's run.json
    seed: int  # the scoring's seed, by study seed and trial


def open_job(job: HeldOutJob, kind: DataKind) -> OpenedJob:
    """The job's inputs, after refusing metrics that cannot score ``kind`` (before anything is read)."""
    require_metrics(kind, job.settings)
    set_cpu_threads(job.threads)
    generator, spec = load_generator(job.generator_path)
    return OpenedJob(
        generator,
        spec,
        load_split(job.split_path),
        read_json(job.run_record_path),
        derive_seed(job.study_seed, job.trial, "evaluate"),
    )
