"""The ``train`` job: run a set-up's training mode for one trial and write its outputs on rank 0.

Outputs: generator.pt, losses.csv (per iteration), profile.csv (seconds per routine), samples.png,
run.json (provenance), and for the grid cells.csv (every cell's final mixture and score).
"""

from __future__ import annotations

import csv
import io
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from PIL import Image, ImageDraw

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.config.typed import as_dict
from ganstudy.contracts import SampleFigure
from ganstudy.core.atomic import atomic_path, read_json, write_json, write_text
from ganstudy.core.checkpoint import FinishedOutputs, run_fingerprint
from ganstudy.core.provenance import cuda_versions, float_path, now, provenance_record
from ganstudy.core.resources import peak_memory
from ganstudy.core.seeding import derive_seed
from ganstudy.data.arrays import file_digest, load_split
from ganstudy.data.kinds import KINDS, get_kind
from ganstudy.data.loaders import DATASETS
from ganstudy.models import NETWORKS, get_network
from ganstudy.models.artifact import save_diverged, save_generator
from ganstudy.parallel.determinism import configure_determinism, configure_tf32
from ganstudy.parallel.stop import StopSignal, TrainingStopped
from ganstudy.parallel.world import (
    GPU_ENVIRONMENT,
    World,
    device_names,
    mpi_library_version,
    mpi_world,
    select_devices,
    set_cpu_threads,
)
from ganstudy.study.outcomes import FINISHED, TrainingDiverged, divergence_parts, divergence_text
from ganstudy.train.job import TrainingJob
from ganstudy.train.mode_needs import TRAINING_MODES
from ganstudy.train.modes import TrainingContext, TrainingResult, get_mode
from ganstudy.train.progress import INTERVAL, Progress, remove_rank_tables
from ganstudy.train.tasks import TASKS


def rows_to_csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


# Training seconds of a run's earlier segments, beside its checkpoints: a job stopped at its wall time
# and resumed reports all the time its result took, not only its last segment's.
ELAPSED_FILE = "elapsed.json"


def earlier_seconds(checkpoint_dir: Path | None) -> float:
    """Seconds the run trained in the segments before this one (0 for a fresh run)."""
    if checkpoint_dir is None or not (checkpoint_dir / ELAPSED_FILE).is_file():
        return 0.0
    try:
        return float(read_json(checkpoint_dir / ELAPSED_FILE)["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        # A damaged clock loses the earlier segments' time, never the run.
        print(
            f"ganstudy: warning: {checkpoint_dir / ELAPSED_FILE} is unreadable; earlier segments' time is not counted",
            file=sys.stderr,
            flush=True,
        )
        return 0.0


def part_records(settings: TrainingSettings, kind: str, dataset: str | None = None) -> dict[str, dict[str, str | None]]:
    """Where the run's pluggable parts came from: reference, package, version and source hash; the data
    set's too where the job names it (``dataset``: its name, from the job's sources)."""
    network = get_network(settings.network)
    named = {
        "network": (NETWORKS, settings.network),
        "task": (TASKS, network.task),
        "mode": (TRAINING_MODES, settings.mode),
        "kind": (KINDS, kind),
    }
    if dataset is not None:
        named["dataset"] = (DATASETS, dataset)
    return {part: registry.origin(name).record() for part, (registry, name) in named.items()}


def run_training(
    job: TrainingJob,
    trial: int,
    out_dir: str | os.PathLike[str],
    checkpoint_dir: str | os.PathLike[str] | None = None,
    progress_seconds: float = INTERVAL,
) -> None:
    """Train ``job``'s set-up for one trial on this MPI world; rank 0 writes the outputs to ``out_dir``.
    While it runs, progress lines go to the log at most every ``progress_seconds`` per trainer, and the
    rows of losses.csv into ``out_dir`` as they come."""
    started_at = now()
    started = time.perf_counter()
    compute = job.compute
    world = mpi_world()
    finished = _finished_outputs(job, trial, checkpoint_dir)
    if finished is not None and world.comm.bcast(world.is_root and _restored(finished, Path(out_dir)), root=0):
        return
    set_cpu_threads(compute.threads)
    mode = get_mode(job.settings.mode)
    devices = select_devices(world, compute.device, compute.gpus_per_rank, compute.node_gpus)
    # Before the first CUDA computation: cuBLAS reads its workspace setting when it starts.
    configure_determinism(devices[0], compute.deterministic)
    configure_tf32(devices[0], compute.tf32)
    # Installed before the data is read: a signal that comes early still stops at the first safe point.
    with StopSignal() as stop:
        context = _context(
            job, trial, world, devices, stop, checkpoint_dir, Progress(Path(out_dir), world.rank, progress_seconds)
        )
        hosts = world.hosts()
        result, earlier, train_seconds = _train(mode, context)
        ranks = _rank_facts(world, context)
    if not world.is_root:
        return
    out = Path(out_dir)
    if isinstance(result, TrainingDiverged):
        outcome = _write_diverged(result, out)
    else:
        outcome = _write_outputs(job, trial, context, result, out)
    # run.json last: its presence means the run is complete.
    write_json(
        out / "run.json",
        _run_record(
            job,
            trial,
            context,
            outcome,
            hosts,
            ranks,
            started_at=started_at,
            train_seconds=train_seconds,
            earlier_segments_seconds=earlier,
            total_seconds=time.perf_counter() - started,
        ),
    )
    if finished is not None:
        # The outputs are complete: they replace the checkpoints, which have served their purpose.
        finished.keep(out)


def _finished_outputs(
    job: TrainingJob, trial: int, checkpoint_dir: str | os.PathLike[str] | None
) -> FinishedOutputs | None:
    """Where a run keeps its outputs once finished, identified by what decides them: the job's record, the
    trial and the bytes of its input files (a data set prepared again differently is another run)."""
    if checkpoint_dir is None:
        return None

    def identity() -> str:
        inputs = {name: file_digest(path) for name, path in as_dict(job.files()).items() if path}
        return run_fingerprint({"job": job.record(), "trial": trial, "input_sha256": inputs})

    return FinishedOutputs(checkpoint_dir, identity)


def _restored(finished: FinishedOutputs, out: Path) -> bool:
    if not finished.restore(out):
        return False
    print(
        f"ganstudy: restored the outputs of this run, finished before its workflow recorded it, from {finished.kept}: "
        "not trained again",
        file=sys.stderr,
        flush=True,
    )
    return True


def _run_record(
    job: TrainingJob,
    trial: int,
    context: TrainingContext,
    outcome: dict[str, Any],
    hosts: list[str],
    ranks: list[dict[str, Any]],
    **times: Any,
) -> dict[str, Any]:
    """run.json: the job, the world it ran on, where its parts came from, its times and its ``outcome``: a
    finished run's seeds and mode's facts, or where it diverged."""
    return provenance_record(
        "train",
        job.settings_record(),
        setup_name=job.setup,
        study_seed=job.seed,
        trial=trial,
        job=job.record(),
        world_size=context.world.size,
        hosts=hosts,
        ranks=[{key: value for key, value in rank.items() if key != "devices"} for rank in ranks],
        device=str(context.device),
        discriminator_device=str(context.devices[1]),
        device_names=[rank["devices"] for rank in ranks],
        # The float paths its ranks trained on, as scores.csv and the answer page compare them: several where
        # one trial's ranks ran on nodes of other kinds.
        hardware=" | ".join(dict.fromkeys(rank["float_path"] for rank in ranks)),
        cuda=cuda_versions(),
        deterministic=job.compute.deterministic,
        tf32=job.compute.tf32,
        stack_layout=job.compute.stack_layout,
        cuda_graphs=job.compute.cuda_graphs,
        inputs=as_dict(job.inputs),
        parts=part_records(job.settings, job.kind, job.sources.get("dataset", {}).get("name")),
        mpi_library=mpi_library_version(),
        torch_threads=job.compute.threads,
        gpus_per_rank=job.compute.gpus_per_rank,
        # started_at, train_seconds, earlier_segments_seconds (of train_seconds, the segments before a stop
        # at the wall time: 0 when the run was not resumed), total_seconds.
        **times,
        **outcome,
    )


def _context(
    job: TrainingJob,
    trial: int,
    world: World,
    devices: tuple[torch.device, torch.device],
    stop: StopSignal,
    checkpoint_dir: str | os.PathLike[str] | None,
    progress: Progress,
) -> TrainingContext:
    """What the training mode reads: the set-up, the data, the world, the devices and the job's inputs."""
    inputs = job.files()
    optional = lambda path: Path(path) if path else None  # noqa: E731
    return TrainingContext(
        setup=job.settings,
        data=load_split(inputs.train),
        kind=get_kind(job.kind),
        study_seed=job.seed,
        trial=trial,
        world=world,
        device=devices[0],
        discriminator_device=devices[1],
        classifier_path=optional(inputs.classifier),
        reference_path=optional(inputs.reference),
        inception_path=optional(inputs.inception),
        held_out_path=optional(inputs.held_out),
        checkpoint_dir=optional(checkpoint_dir),
        stack_layout=job.compute.stack_layout,
        cuda_graphs=job.compute.cuda_graphs,
        stop=stop,
        progress=progress,
    )


def _train(
    mode: Callable[[TrainingContext], TrainingResult], context: TrainingContext
) -> tuple[TrainingResult | TrainingDiverged, float, float]:
    """The mode's result (or its divergence, an outcome too), the seconds of the run's earlier segments and
    of all its training. A stopped run leaves its seconds so far beside its checkpoints, for the segment that
    resumes it."""
    earlier = earlier_seconds(context.checkpoint_dir)
    train_started = time.perf_counter()
    try:
        result = mode(context)
    except TrainingDiverged as error:
        result = error
    except TrainingStopped:
        if context.world.is_root and context.checkpoint_dir is not None:
            write_json(
                context.checkpoint_dir / ELAPSED_FILE, {"seconds": earlier + time.perf_counter() - train_started}
            )
        raise
    finally:
        context.progress.close()
    return result, earlier, earlier + time.perf_counter() - train_started


def _rank_facts(world: World, context: TrainingContext) -> list[dict[str, Any]]:
    """Per rank, in one collective: its devices, what it used (to size jobs by), its place among its
    node's ranks (which picks its GPUs) and the GPUs the scheduler gave it (None off rank 0)."""
    return world.comm.gather(
        {
            "devices": device_names(context.devices),
            "float_path": float_path(device_names(context.devices)),
            **peak_memory(),
            "node_rank": world.node_rank(),
            "scheduler": {name: os.environ[name] for name in GPU_ENVIRONMENT if name in os.environ},
        },
        root=0,
    )


def _write_outputs(
    job: TrainingJob, trial: int, context: TrainingContext, result: TrainingResult, out: Path
) -> dict[str, Any]:
    """Rank 0's outputs but run.json: the sample figure, losses.csv, profile.csv, the mode's tables and the
    generator; returns what run.json says of the outcome."""
    grid_seed = derive_seed(job.seed, trial, "sample-grid")
    if context.kind.part(context.kind.sample_figure, SampleFigure)(
        result.generator, result.spec, context.data, grid_seed, out / "samples.png"
    ):
        result.seeds["sample-grid"] = grid_seed
    _write_tables(out, result.history, result.profile)
    for name, rows in result.tables.items():
        write_text(out / f"{name}.csv", rows_to_csv(rows))
    save_generator(out / "generator.pt", result.generator, result.network, result.spec)
    return {
        "outcome": FINISHED,
        "seeds": result.seeds,
        "mixture_weights": list(result.generator.weights),
        **result.facts,
    }


def _write_tables(out: Path, history: list[dict[str, Any]], profile: list[dict[str, Any]]) -> None:
    """losses.csv (every rank's rows: the live per-rank tables go) and profile.csv."""
    write_text(out / "losses.csv", rows_to_csv(history))
    remove_rank_tables(out)
    write_text(out / "profile.csv", rows_to_csv(profile))


def _write_diverged(error: TrainingDiverged, out: Path) -> dict[str, Any]:
    """The outputs of a run that diverged, with what run.json says of it: its losses and profile up to the
    non-finite row, a sample figure that says why it has no samples, and in place of the generator the record
    of its divergence (ganstudy.models.artifact.load_generator refuses it, naming the reason)."""
    record = error.record()
    print(
        f"ganstudy: {error}. The trial diverged ({divergence_text(record)}): an outcome of the study, not a failed "
        "job; its scores are inf, which the rank tests count as worse than every finite score",
        file=sys.stderr,
        flush=True,
    )
    _save_notice(out / "samples.png", ["diverged:", *divergence_parts(record), "no samples"])
    _write_tables(out, error.history, error.profile)
    save_diverged(out / "generator.pt", record)
    return record


def _save_notice(path: Path, lines: list[str]) -> None:
    """A sample figure's stand-in that says why there are no samples, in the grid's place (the report and the
    set-ups' sample montage show it)."""
    picture = Image.new("L", (256, 24 + 16 * len(lines)), 235)
    ImageDraw.Draw(picture).multiline_text((12, 12), "\n".join(lines), fill=0, spacing=4)
    with atomic_path(path) as tmp:
        picture.save(tmp, format="PNG")
