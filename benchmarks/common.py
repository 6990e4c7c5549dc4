"""What every benchmark shares: its command line (--quick, --out), set-ups from the schema's defaults,
timed `ganstudy train` runs under mpiexec, interleaved repeats, and the JSON record it prints.

A benchmark prints one JSON line last: {"benchmark", "quick", "results", "machine"}; with --out it also
appends that line to a file (JSON lines; `make bench` collects every benchmark's record there). Absolute
times belong to the machine the record names: compare ratios measured in one run.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from ganstudy.config.validate import validate_study_config
from ganstudy.core.code_version import git_state
from ganstudy.core.procfs import cpu_description
from ganstudy.core.provenance import now, package_versions
from ganstudy.parallel.topology import resolve_shape
from ganstudy.parallel.world import mpi_library_version
from ganstudy.train.job import job_description, write_job

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
SETUP = "bench"
# This interpreter's scripts (ganstudy, mpiexec) first, as `make` and the tests call the benchmarks.
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
# torch's thread count before a benchmark sets its own (the benchmarks run 1 thread per process).
TORCH_THREADS = torch.get_num_threads()
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE")


def parser(doc: str | None) -> argparse.ArgumentParser:
    """The benchmark's command line; a script adds its own options before parsing."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the same runs on tiny sizes: a check that the benchmark runs, not a measurement",
    )
    parser.add_argument(
        "--out", type=Path, metavar="FILE", help="also append the JSON record to this file (JSON lines)"
    )
    return parser


def setup(keys: dict[str, Any]) -> dict[str, Any]:
    """One set-up from the schema's defaults with ``keys`` on top; checkpoints and the in-training score are
    off unless ``keys`` say otherwise: the benchmarks time training, not saving or scoring."""
    config = {"setups": {SETUP: {"checkpoint_period": 0, "score_period": 0, **keys}}}
    return validate_study_config(config, SCHEMA)["setups"][SETUP]


def data_parallel_device() -> str:
    """Where the data-parallel benchmarks train both rank counts: nccl needs a GPU of its own per rank,
    so the GPUs where there are two, else the CPU over gloo (a 1-GPU machine still compares 1 and 2
    ranks, on its cores), never one rank count on each."""
    return "cuda" if torch.cuda.device_count() >= 2 else "cpu"


def train(
    ranks: int,
    settings: dict[str, Any],
    data: Path,
    out: Path,
    device: str = "auto",
    stack_layout: str = "auto",
    **inputs: Path,
) -> Path:
    """``mpiexec -n ranks ganstudy train`` of one set-up on ``device`` (compute.device, compute.stack_layout),
    1 torch thread per rank, from a job file beside ``out`` (``inputs``: the job's other input files);
    returns ``out``. A failed run stops the benchmark with the end of its log."""
    job = out.parent / f"{out.name}.job.json"
    files = {"train": str(data), **{key: str(path) for key, path in inputs.items()}}
    write_job(
        job, job_description(SETUP, settings, 1, files, {"threads": 1, "device": device, "stack_layout": stack_layout})
    )
    command = ["mpiexec", "-n", str(ranks), "ganstudy", "train", str(job), "--trial", "0", "--out-dir", str(out)]
    done = subprocess.run(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"benchmark run failed (exit {done.returncode}): {' '.join(command)}")
    return out


def median_seconds(out: Path, skip: int = 1) -> float:
    """Median of a run's per-iteration (per-epoch) seconds in losses.csv, leaving out the first ``skip``
    (warm-up): the training loop's own clock, without start-up. A per-class run has a row per class and
    epoch, and one rank trains its classes one after another: an epoch is the sum of its rows (the
    benchmarks time per-class runs so on one rank only)."""
    per_iteration: dict[int, float] = defaultdict(float)
    with (out / "losses.csv").open() as handle:
        for row in csv.DictReader(handle):
            per_iteration[int(row["iteration"])] += float(row["seconds"])
    return statistics.median(seconds for _, seconds in sorted(per_iteration.items())[skip:])


def iterations_logged(out: Path) -> int:
    """The iterations a grid run has logged: one row each in its losses.csv."""
    with (out / "losses.csv").open() as handle:
        return sum(1 for _ in csv.DictReader(handle))


def routine_seconds(out: Path, skip: int = 1) -> dict[str, float]:
    """Rank 0's mean seconds per iteration in each routine of a grid run (profile.csv), iterations after
    the first ``skip`` (the final scoring's row, numbered one past the last iteration, left out). Each
    routine ends in a read of its results on the host, so on a GPU its time includes its kernels'."""
    last = iterations_logged(out)
    totals: dict[str, float] = defaultdict(float)
    for row in csv.DictReader((out / "profile.csv").open()):
        if row["cell"] == "*" and row["rank"] == "0" and skip < int(row["iteration"]) <= last:
            totals[row["routine"]] += float(row["seconds"])
    return {routine: round(seconds / (last - skip), 3) for routine, seconds in totals.items()}


def interleaved_medians(measure: Callable[[str, int], float], names: Iterable[str], repeats: int) -> dict[str, float]:
    """The median of ``measure(name, repeat)`` over ``repeats`` rounds per name; each round measures every
    name once, so that a slow spell of the machine hits all of them alike."""
    values: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        for name, series in values.items():
            series.append(measure(name, repeat))
    return {name: statistics.median(series) for name, series in values.items()}


def _lscpu() -> dict[str, str]:
    try:
        done = subprocess.run(
            ["lscpu"], capture_output=True, text=True, check=True, timeout=10, env={**os.environ, "LC_ALL": "C"}
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    return {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in done.stdout.splitlines())}


def machine() -> dict[str, Any]:
    """Where the figures were measured: CPU, cores, thread settings, versions, date and commit."""
    cpu = _lscpu()
    sockets, per_socket = cpu.get("Socket(s)", ""), cpu.get("Core(s) per socket", "")
    return {
        "cpu_model": cpu.get("Model name") or cpu_description()["model"] or platform.processor() or None,
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "physical_cores": int(sockets) * int(per_socket) if sockets.isdigit() and per_socket.isdigit() else None,
        "torch_threads": TORCH_THREADS,
        "thread_environment": {name: os.environ.get(name) for name in THREAD_VARIABLES},
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "versions": {**package_versions(), "mpi_library": mpi_library_version()},
        "date": now(),
        "git": git_state(str(REPO)),
    }


def emit(name: str, results: dict[str, Any], args: argparse.Namespace) -> None:
    """Print the benchmark's record as one JSON line (last on stdout); append it to ``args.out`` if given."""
    line = json.dumps({"benchmark": name, "quick": args.quick, "results": results, "machine": machine()})
    print(line, flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as handle:
            handle.write(line + "\n")


def cell_count(shape: str) -> int:
    """The cells of a fixed "RxC" grid, as the grid mode reads its shape."""
    return resolve_shape(shape, ranks=1, min_cells=1, max_cells=10**9).size
