"""The ``train`` job: run a set-up's training mode for one trial and write its outputs on rank 0.

Outputs: generator.pt, losses.csv (per iteration), samples.png, run.json (provenance).
"""

from __future__ import annotations

import csv
import io
import os
import time
from pathlib import Path
from typing import Any

from ganstudy.atomic import write_json, write_text
from ganstudy.data.arrays import load_split
from ganstudy.models.artifact import sample_generator, save_generator
from ganstudy.parallel.world import mpi_library_version, mpi_world, set_cpu_threads
from ganstudy.provenance import now, provenance_record
from ganstudy.report.images import save_grid
from ganstudy.seeding import derive_seed
from ganstudy.train.modes import get_mode

GRID_SAMPLES = 64


def _history_csv(history: list[dict[str, float]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(history[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(history)
    return buffer.getvalue()


def run_training(
    setup_name: str,
    setup: dict[str, Any],
    train_path: str | os.PathLike[str],
    study_seed: int,
    trial: int,
    out_dir: str | os.PathLike[str],
    threads: int,
) -> None:
    started_at = now()
    started = time.perf_counter()
    world = mpi_world()
    set_cpu_threads(threads)
    mode = get_mode(setup["mode"])
    data = load_split(train_path)
    hosts = world.hosts()
    train_started = time.perf_counter()
    result = mode(setup, data, study_seed, trial, world)
    train_seconds = time.perf_counter() - train_started
    if not world.is_root:
        return
    out = Path(out_dir)
    grid_seed = derive_seed(study_seed, trial, "sample-grid")
    grid = sample_generator(result.generator, result.spec.latent_dim, GRID_SAMPLES, grid_seed, GRID_SAMPLES)
    save_grid(out / "samples.png", grid.numpy())
    write_text(out / "losses.csv", _history_csv(result.history))
    save_generator(out / "generator.pt", result.generator, result.network, result.spec)
    # run.json last: its presence means the run is complete.
    write_json(
        out / "run.json",
        provenance_record(
            "train",
            setup,
            setup_name=setup_name,
            study_seed=study_seed,
            trial=trial,
            seeds={**result.seeds, "sample-grid": grid_seed},
            world_size=world.size,
            hosts=hosts,
            mpi_library=mpi_library_version(),
            torch_threads=threads,
            started_at=started_at,
            train_seconds=train_seconds,
            total_seconds=time.perf_counter() - started,
        ),
    )
