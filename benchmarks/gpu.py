"""What one GPU does with a study's work: the prepared check of a GPU machine (`make bench-gpu`, issue 46).

One script, about 11 minutes on one H200 (the profile part 2.5 of them), nothing to install beyond `make
setup`; on a machine without a GPU only --quick runs (the same code on the CPU, on tiny sizes). Every run
trains in this process, on one rank with one torch thread (no interpreter start-up to wait for); seconds are a
run's own clock (losses.csv), the median of its iterations or epochs after the first, without start-up. Keys:

- gemm_tflops_fp32, gemm_tflops_tf32: a square float32 matrix product (8192; --quick 256) in float32
  and in TF32, the device's practical peak, which the shares below divide by.
- The thesis's grid (seed 002: 18x18 cells; --quick 2x2) of four-layer perceptrons, stacked, at its
  per-cell work (benchmarks/grid_scaling.py part 3: 28x28 images, 60,000 of them, batch 100, 600 G and
  300 D updates per iteration, fitness and two FIDs on 1,000 samples):
  thesis_cells; thesis_iteration_seconds_fp32 and _tf32 (compute.tf32); thesis_gflop_per_iteration
  (matrix products and convolutions, torch.utils.flop_counter); thesis_tflops_fp32 and _tf32 (GFLOP /
  seconds) and thesis_peak_share_fp32 and _tf32 (over the GEMM's); thesis_peak_memory_mb (torch's
  peak allocation on the GPU, on a CPU the peak resident memory); thesis_routine_seconds_fp32 and _tf32
  (seconds per iteration in each routine: fitness, selection, train, replacement, mixture, exchange,
  from the run's profile.csv); thesis_operators_per_iteration and
  thesis_host_reads_per_iteration on this device (benchmarks/grid_dispatch.py's counters), and their
  growth from a 2x2 grid of the same work (thesis_operators_growth, thesis_host_reads_growth: 81 times
  the cells, 1.0 ideal); thesis_top10: torch.profiler's ten operators with the most self time on the
  device (on a CPU: the host) in a run of one iteration, each [name, milliseconds, calls].
- cnn_grid_cells, cnn_iteration_seconds: a 6x6 grid (--quick 1x1) of the thesis's CNN28 cells on the
  28x28 images, a tenth of them per cell (grid.data_ratio 0.1), stacked in the general form
  (StackedNetwork, compute.stack_layout whole); cnn_iteration_seconds_loop: the same grid cell by cell
  (the cache layout); cnn_batched_speedup: loop seconds / stacked seconds, in the same run.
- per_class_epoch_seconds: seed 001's DC-GAN per class, all 10 classes on one rank, 28x28 images;
  conditional_epoch_seconds: its conditional DC-CGAN on the same images.
- calo3d_epoch_seconds_fp32, _bf16; pix2pix_epoch_seconds_fp32, _bf16: the data-parallel networks
  (benchmarks/data_parallel_networks.py's calo3d and 64x64 pix2pix cases) on one rank, in float32
  and under bf16 autocast (data_parallel.amp).
- The graphs part (issue 69; with the host part, --short: the check of a short allocation, about 4 minutes
  on one H200 before the host part): the thesis's grid eager and replaying CUDA graphs (compute.cuda_graphs
  false and true), each in float32 and TF32: thesis_iteration_seconds_<kind>_<way>,
  thesis_tflops_<kind>_<way> (the 2x2 grid's FLOPs times 81), thesis_routine_seconds_<kind>_<way>,
  thesis_peak_memory_mb_<way>, graphs_speedup_<kind> (eager seconds / graphs seconds);
  operators_per_iteration_2x2_<way> and host_reads_per_iteration_2x2_<way>: grid_dispatch.py's counts of a
  2x2 grid of the same work on this device (a replayed update dispatches only the copies of its inputs).
- The host part (with --short too): where the host's time goes in a thesis run of two iterations (eager,
  float32; set-up and final scoring included) under cProfile: thesis_host_own_top20, the functions and
  built-in calls with the most time of their own (a GPU's copies and syncs show here: torch.stack, to, cpu,
  sort), and thesis_host_cumulative_top20, ganstudy's functions with the most time inside them, each
  [name, milliseconds, calls].
- device: the GPU's name, or cpu.
--quick: the same runs on tiny sizes (200 images, 2x2 grids, thin networks): a check that the script
runs, not a measurement. Progress goes to stderr, one line per part with its seconds and keys; PART arguments
run some parts only (all by default; the record then holds theirs). Prints one JSON record last.

    python benchmarks/gpu.py [--quick | --short] [--out FILE] [PART ...]
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

import data_parallel_networks
from common import cell_count, emit, median_seconds, parser, routine_seconds
from ganstudy.data.prepare import prepare_dataset
from ganstudy.train.job import read_job
from ganstudy.train.run import run_training
from grid_dispatch import iteration_counts, job_file, run_files
from grid_scaling import mnist_like, score_inputs, thesis_grid

FULL = {
    "gemm": 8192,
    "images": 60_000,
    "scoring_images": 2000,
    "thesis_shape": "18x18",
    "samples": 1000,
    "data_ratio": 1.0,
    "network": {},
    "cnn_shape": "6x6",
    "cnn": {"data_ratio": 0.1},
    "conv": {},
    "networks": data_parallel_networks.FULL,
}
QUICK = {
    "gemm": 256,
    "images": 200,
    "scoring_images": 200,
    "thesis_shape": "2x2",
    "samples": 50,
    "data_ratio": 0.01,
    "network": {"hidden_units": 16, "latent_dim": 8},
    "cnn_shape": "1x1",
    # CNN28's 512 maps take seconds per batch of 100 on a CPU: batches and samples of 20.
    "cnn": {"data_ratio": 0.01, "fitness_sample_size": 20, "score_sample_size": 20},
    # The convolutional networks' (CNN28 and the DC-GANs) own keys: latent 8, batches of 8.
    "conv": {"latent_dim": 8, "batch_size": 8},
    # calo3d's bf16 kernels are emulated on most CPUs: 10 s per batch of 4 showers.
    "networks": {
        **data_parallel_networks.QUICK,
        "network_keys": {
            "calo3d": {"hidden_units": 2, "batch_size": 2},
            "pix2pix": {"hidden_units": 8, "batch_size": 2},
        },
    },
}
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def gemm_tflops(size: int, tf32: bool) -> float:
    """TFLOP/s of a size x size float32 product, the best of 5 after a warm-up."""
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a, b = (torch.randn(size, size, device=DEVICE) for _ in range(2))
    best = float("inf")
    try:
        for repeat in range(6):
            _synchronise()
            started = time.perf_counter()
            a @ b
            _synchronise()
            if repeat:
                best = min(best, time.perf_counter() - started)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return 2 * size**3 / best / 1e12


def _synchronise() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def thesis_keys(shape: str, iterations: int, size: dict) -> dict:
    """grid_scaling's thesis work in a ``shape`` grid of 4LP cells."""
    return {
        "mode": "grid",
        "iterations": iterations,
        **size["network"],
        "grid": {"shape": shape, "data_ratio": size["data_ratio"], **thesis_grid(size["samples"])},
    }


class Parts:
    """The benchmark's parts over one set of data, each adding its keys to ``results``."""

    def __init__(self, size: dict, tmp: Path) -> None:
        self.size, self.tmp, self.results = (
            size,
            tmp,
            {"device": torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu"},
        )
        # The matrix product's TFLOPS by kind, unrounded (gemm).
        self.peak: dict[str, float] = {}
        digits, self.images, scoring = tmp / "digits", tmp / "images", tmp / "scoring"
        prepare_dataset("digits", None, 0.2, 1, digits)
        # The 28x28 images the networks train on; the grid's classifier and reference from a smaller set
        # of the same kind (the scores are not what is measured).
        self.images.mkdir()
        mnist_like(digits, self.images, size["images"], min(size["images"], 2000))
        scoring.mkdir()
        mnist_like(digits, scoring, size["scoring_images"], 200)
        score_inputs(scoring, 1)
        self.files = {**run_files(scoring), "train": str(self.images / "train.npz")}

    def _run(
        self,
        name: str,
        keys: dict,
        tf32: bool = False,
        files: dict[str, str] | None = None,
        layout: str = "auto",
        graphs: str | bool = "auto",
    ) -> Path:
        """A training run of set-up ``keys`` in this process (one rank; no interpreter start-up to wait
        for), on the 28x28 images and the grid's scoring files unless ``files`` name others, in
        compute.stack_layout ``layout``, with compute.cuda_graphs ``graphs``."""
        out = self.tmp / name
        job = job_file(keys, files or self.files, out, DEVICE, tf32, layout, graphs)
        if DEVICE == "cuda":
            torch.cuda.reset_peak_memory_stats()
        run_training(read_job(job), 0, out)
        return out

    def gemm(self) -> None:
        # Kept unrounded for the thesis's share of it: a CPU's quick-mode product (256) runs at about 0.001
        # TFLOPS, which a busy machine's rounding to 3 decimals made 0 (a division by zero, seen in the suite).
        self.peak = {kind: gemm_tflops(self.size["gemm"], kind == "tf32") for kind in ("fp32", "tf32")}
        self.results |= {f"gemm_tflops_{kind}": float(f"{tflops:.4g}") for kind, tflops in self.peak.items()}

    def thesis(self) -> None:
        size, shape = self.size, self.size["thesis_shape"]
        counts, _ = iteration_counts(thesis_keys(shape, 1, size), self.files, str(self.tmp), "thesis-count", DEVICE)
        small = (
            counts
            if shape == "2x2"
            else iteration_counts(thesis_keys("2x2", 1, size), self.files, str(self.tmp), "2x2-count", DEVICE)[0]
        )
        if not self.peak:
            self.gemm()
        results = {
            "thesis_cells": cell_count(shape),
            "thesis_gflop_per_iteration": round(counts.flops / 1e9, 3),
            "thesis_operators_per_iteration": counts.operators,
            "thesis_host_reads_per_iteration": counts.host_reads,
            "thesis_operators_growth": round(counts.operators / small.operators, 2),
            "thesis_host_reads_growth": round(counts.host_reads / small.host_reads, 2),
        }
        for kind in ("fp32", "tf32"):
            out = self._run(f"thesis-{kind}", thesis_keys(shape, 2, size), tf32=kind == "tf32")
            seconds = median_seconds(out)
            results[f"thesis_iteration_seconds_{kind}"] = round(seconds, 3)
            results[f"thesis_tflops_{kind}"] = round(counts.flops / seconds / 1e12, 4)
            results[f"thesis_peak_share_{kind}"] = round(counts.flops / seconds / 1e12 / self.peak[kind], 5)
            results[f"thesis_routine_seconds_{kind}"] = routine_seconds(out)
            if kind == "fp32":
                results["thesis_peak_memory_mb"] = _peak_memory_mb(out)
        self.results |= results

    def graphs(self) -> None:
        """The thesis's grid eager and replaying CUDA graphs (compute.cuda_graphs), in float32 and TF32; and
        a 2x2 grid's operators and host reads per iteration of the same work both ways."""
        size, shape = self.size, self.size["thesis_shape"]
        results: dict = {"thesis_cells": cell_count(shape)}
        for graphs in (False, True):
            way = "graphs" if graphs else "eager"
            # On a CPU (--quick) graphs cannot run: auto turns them off there.
            asked = graphs if DEVICE == "cuda" else "auto"
            counts, _ = iteration_counts(
                thesis_keys("2x2", 1, size), self.files, str(self.tmp), f"2x2-{way}", DEVICE, graphs=asked
            )
            results[f"operators_per_iteration_2x2_{way}"] = counts.operators
            results[f"host_reads_per_iteration_2x2_{way}"] = counts.host_reads
            if not graphs:  # a replayed graph's products are out of the flop counter's sight
                flops = counts.flops * cell_count(shape) // cell_count("2x2")
            for kind in ("fp32", "tf32"):
                out = self._run(f"thesis-{kind}-{way}", thesis_keys(shape, 2, size), kind == "tf32", graphs=asked)
                seconds = median_seconds(out)
                assert json.loads((out / "run.json").read_text())["cuda_graphs_used"] is (graphs and DEVICE == "cuda")
                results[f"thesis_iteration_seconds_{kind}_{way}"] = round(seconds, 3)
                results[f"thesis_routine_seconds_{kind}_{way}"] = routine_seconds(out)
                print(f"  thesis {kind} {way}: {seconds:.3f} s per iteration", file=sys.stderr, flush=True)
                results[f"thesis_tflops_{kind}_{way}"] = round(flops / seconds / 1e12, 4)
                if kind == "fp32":
                    results[f"thesis_peak_memory_mb_{way}"] = _peak_memory_mb(out)
        for kind in ("fp32", "tf32"):
            results[f"graphs_speedup_{kind}"] = round(
                results[f"thesis_iteration_seconds_{kind}_eager"] / results[f"thesis_iteration_seconds_{kind}_graphs"],
                3,
            )
        self.results |= results

    def profile(self) -> None:
        """The ten operators with the most self time in a run of one thesis iteration."""
        out = self.tmp / "thesis-profile"
        job = read_job(job_file(thesis_keys(self.size["thesis_shape"], 1, self.size), self.files, out, DEVICE))
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])
        with profile(activities=activities) as profiler:
            run_training(job, 0, out)
        own = "self_device_time_total" if DEVICE == "cuda" else "self_cpu_time_total"
        events = sorted(profiler.key_averages(), key=lambda event: getattr(event, own), reverse=True)[:10]
        self.results["thesis_top10"] = [
            [event.key, round(getattr(event, own) / 1000, 3), event.count] for event in events
        ]

    def host(self) -> None:
        """Where the host's time goes in a thesis run of two iterations (eager, float32) under cProfile."""
        out = self.tmp / "thesis-host"
        job = read_job(
            job_file(thesis_keys(self.size["thesis_shape"], 2, self.size), self.files, out, DEVICE, graphs=False)
        )
        profiler = cProfile.Profile()
        profiler.runcall(run_training, job, 0, out)
        calls = pstats.Stats(profiler).stats  # (file, line, function): (primitive calls, calls, own, inside, callers)
        named = [
            (function if file == "~" else f"{Path(file).name}:{line}({function})", file, row)
            for (file, line, function), row in calls.items()
        ]
        ours = [(name, file, row) for name, file, row in named if f"{os.sep}ganstudy{os.sep}" in file]
        for key, rows, column in (("own", named, 2), ("cumulative", ours, 3)):
            top = sorted(rows, key=lambda item: item[2][column], reverse=True)[:20]
            self.results[f"thesis_host_{key}_top20"] = [
                [name, round(row[column] * 1000, 3), row[1]] for name, _, row in top
            ]

    def cnn(self) -> None:
        shape = self.size["cnn_shape"]
        keys = {**thesis_keys(shape, 2, self.size), "network": "cnn28", **self.size["conv"]}
        keys["grid"] |= self.size["cnn"]
        # The whole layout stacks the cells (StackedNetwork); the cache layout trains them one after another.
        seconds = {
            layout: median_seconds(self._run(f"cnn-{layout}", keys, layout=layout)) for layout in ("whole", "cache")
        }
        self.results |= {
            "cnn_grid_cells": cell_count(shape),
            "cnn_iteration_seconds": round(seconds["whole"], 3),
            "cnn_iteration_seconds_loop": round(seconds["cache"], 3),
            "cnn_batched_speedup": round(seconds["cache"] / seconds["whole"], 3),
        }

    def per_class(self) -> None:
        images = {"train": self.files["train"]}
        for mode, network in (("per_class", "dcgan"), ("conditional", "dccgan")):
            keys = {
                "mode": mode,
                "network": network,
                "latent_dim": 100,
                "batch_size": 64,
                "iterations": 2,
                **self.size["conv"],
            }
            self.results[f"{mode}_epoch_seconds"] = round(median_seconds(self._run(mode, keys, files=images)), 3)

    def networks(self) -> None:
        """calo3d and 64x64 pix2pix on one rank, float32 and bf16 autocast."""
        for case in ("calo3d", "pix2pix"):
            settings = data_parallel_networks.settings(case, self.size["networks"])
            split = data_parallel_networks.data(case, 2 * settings["batch_size"], self.tmp)
            for amp in ("fp32", "bf16"):
                run = {
                    **settings,
                    "data_parallel": {**settings["data_parallel"], "amp": "none" if amp == "fp32" else "bf16"},
                }
                seconds = median_seconds(self._run(f"{case}-{amp}", run, files={"train": str(split)}))
                self.results[f"{case}_epoch_seconds_{amp}"] = round(seconds, 3)


def _peak_memory_mb(out: Path) -> float:
    """The run's peak memory on its GPU (torch's allocations), else its peak resident memory (run.json)."""
    rank = json.loads((out / "run.json").read_text())["ranks"][0]
    return round(max(rank["gpu_mb"].values()) if rank["gpu_mb"] else rank["rss_mb"], 1)


PARTS: dict[str, Callable[[Parts], None]] = {
    "gemm": Parts.gemm,
    "thesis": Parts.thesis,
    "graphs": Parts.graphs,
    "host": Parts.host,
    "profile": Parts.profile,
    "cnn": Parts.cnn,
    "per_class": Parts.per_class,
    "networks": Parts.networks,
}


def main() -> None:
    arguments = parser(__doc__)
    arguments.add_argument("parts", nargs="*", metavar="PART", help=f"parts to run (default: all of {list(PARTS)})")
    arguments.add_argument(
        "--short", action="store_true", help="the check of a short allocation: the graphs and host parts, full size"
    )
    args = arguments.parse_args()
    if args.short:
        args.parts = ["graphs", "host"]
    unknown = set(args.parts) - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown part(s) {sorted(unknown)}; the parts are {list(PARTS)}")
    if DEVICE == "cpu" and not args.quick:
        raise SystemExit(
            "torch finds no CUDA GPU here: this benchmark measures a GPU (--quick runs its code on the CPU)"
        )
    torch.set_num_threads(1)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        parts = Parts(QUICK if args.quick else FULL, Path(tmp))
        print(f"data ready: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        for name in args.parts or PARTS:
            begun, before = time.perf_counter(), set(parts.results)
            PARTS[name](parts)
            # Its keys at once: a run stopped at its time limit still reports the parts it finished.
            added = {key: parts.results[key] for key in parts.results if key not in before}
            print(f"{name}: {time.perf_counter() - begun:.0f} s {json.dumps(added)}", file=sys.stderr, flush=True)
    emit("gpu", parts.results, args)


if __name__ == "__main__":
    main()
