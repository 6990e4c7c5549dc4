"""The benchmarks keep running: each one's --quick mode (its code path on tiny sizes) ends with one JSON
record that holds every key of its full mode, finite numbers and the machine it ran on, and appends that
record to --out as `make bench` does. The measured values themselves are not checked."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pytest

from conftest import REPO

RESULT_KEYS = {
    "training_loop": {
        "ours_samples_per_s",
        "bare_samples_per_s",
        "ratio",
        "grid_train_samples_per_s",
        "grid_train_ratio",
        "iterations",
        "repeats",
        "threads",
    },
    "per_class_scaling": {
        "weak_scaling_ratio",
        "strong_speedup",
        "seconds_1_class_1_rank",
        "seconds_2_classes_2_ranks",
        "seconds_10_classes_1_rank",
        "seconds_10_classes_2_ranks",
        "images_per_class_weak",
    },
    "data_parallel": {"efficiency", "steps_per_epoch", "device"}
    | {f"{option}_ratio" for option in ("accumulation_4", "clip_2", "zero", "zero3_offload", "amp_bf16")}
    | {
        f"epoch_seconds_{run}"
        for run in ("ranks1", "ranks2", "accumulation_4", "clip_2", "zero", "zero3_offload", "amp_bf16")
    },
    "data_parallel_networks": {
        f"{case}_{key}"
        for case in ("calo3d", "pix2pix", "pix2pix256", "pix2pix_bf16")
        for key in ("efficiency", "epoch_seconds_1", "epoch_seconds_2", "global_batch", "d_loss", "g_loss")
    }
    | {"device"},
    "grid_scaling": {
        "speedup",
        "iteration_seconds_1_rank_digits",
        "iteration_seconds_2_ranks_digits",
        "weak_efficiency",
        "iteration_seconds_3x6_2_ranks_digits",
        "strong_speedup_28x28",
        "iteration_seconds_2x2_1_rank",
        "iteration_seconds_2x2",
        "exchange_fraction",
        "iteration_seconds_thesis_4x4",
        "cell_iteration_seconds_thesis",
        "thesis_ranks",
        "device",
        "cnn_grid_cells",
        "iteration_seconds_cnn_stacked",
        "iteration_seconds_cnn_loop",
        "cnn_batched_speedup",
        "seconds_per_pass_hand_stacked",
        "seconds_per_pass_general_stacked",
        "hand_stacked_speedup",
    }
    | {
        key
        for shape in ("6x6", "18x18")
        for key in (f"batched_speedup_{shape}", f"iteration_seconds_{shape}_batched", f"iteration_seconds_{shape}_loop")
    },
    "grid_dispatch": {
        f"{count}_{per}_{case}"
        for count in ("operators", "host_reads")
        for per in ("per_iteration", "per_cell")
        for case in [
            f"{name}_{layout}"
            for name in ("4lp_2x2", "4lp_6x6", "4lp_18x18", "dcgan", "dcgan_small")
            for layout in ("cache", "whole")
        ]
    }
    | {f"{count}_growth_18x18_{layout}" for count in ("operators", "host_reads") for layout in ("cache", "whole")}
    | {f"{count}_added_per_cell_dcgan_{layout}" for count in ("operators", "reads") for layout in ("cache", "whole")}
    | {"top_operators_per_cell_18x18_whole", "top_operators_added_per_cell_dcgan_whole", "dcgan_cells", "device"},
    "gpu": {f"gemm_tflops_{kind}" for kind in ("fp32", "tf32")}
    | {
        f"thesis_{key}_{kind}"
        for key in ("iteration_seconds", "tflops", "peak_share", "routine_seconds")
        for kind in ("fp32", "tf32")
    }
    | {
        f"thesis_{key}"
        for key in (
            "cells",
            "gflop_per_iteration",
            "peak_memory_mb",
            "operators_per_iteration",
            "host_reads_per_iteration",
            "operators_growth",
            "host_reads_growth",
            "top10",
            "host_own_top20",
            "host_cumulative_top20",
        )
    }
    | {
        "cnn_grid_cells",
        "cnn_iteration_seconds",
        "cnn_iteration_seconds_loop",
        "cnn_batched_speedup",
        "per_class_epoch_seconds",
        "conditional_epoch_seconds",
        "device",
    }
    | {f"{case}_epoch_seconds_{kind}" for case in ("calo3d", "pix2pix") for kind in ("fp32", "bf16")}
    # The graphs part (--short on a GPU): the thesis's grid eager and replaying CUDA graphs.
    | {f"{count}_per_iteration_2x2_{way}" for count in ("operators", "host_reads") for way in ("eager", "graphs")}
    | {
        f"thesis_{key}_{kind}_{way}"
        for key in ("iteration_seconds", "tflops", "routine_seconds")
        for kind in ("fp32", "tf32")
        for way in ("eager", "graphs")
    }
    | {f"thesis_peak_memory_mb_{way}" for way in ("eager", "graphs")}
    | {f"graphs_speedup_{kind}" for kind in ("fp32", "tf32")},
    "parse_time": {
        f"{name}{suffix}"
        for name in ("startup", "list_rules", "dry_run", "job_parse", "largest_plan")
        for suffix in ("", "_baseline", "_ratio")
    }
    | {"repeats"},
    "scoring": {
        "images_per_second",
        "gmac_per_second",
        "activation_mb_per_image",
        "gpu_mb_per_image",
        "peak_rss_mb",
        "device",
        "threads",
    },
}
# Times, throughputs and the ratios of two of them, and counts: greater than zero.
POSITIVE = (
    "seconds",
    "samples_per_s",
    "per_second",
    "peak_rss",
    "ratio",
    "efficiency",
    "speedup",
    "iterations",
    "repeats",
    "threads",
    "batch",
    "steps_per_epoch",
    "images_per_class",
    "thesis_ranks",
    "operators",
    "host_reads",
    "growth",
    "cells",
    "tflops",
    "gflop",
    "peak_share",
    "memory_mb",
)
MACHINE_KEYS = {
    "cpu_model",
    "cpus",
    "cpus_usable",
    "physical_cores",
    "torch_threads",
    "thread_environment",
    "gpu",
    "versions",
    "date",
    "git",
}
# Every benchmark but training_loop, scoring (one process) and parse_time (Snakemake's) runs
# `ganstudy train` under mpiexec.
BENCHMARKS = [
    pytest.param(name, marks=[] if name in ("training_loop", "scoring", "parse_time") else [pytest.mark.mpi])
    for name in RESULT_KEYS
]


@pytest.mark.parametrize("name", BENCHMARKS)
def test_quick_mode_prints_every_key(name, env, tmp_path):
    records = tmp_path / "benchmarks.jsonl"
    done = subprocess.run(
        [sys.executable, f"benchmarks/{name}.py", "--quick", "--out", str(records)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip().splitlines()[-1]
    assert records.read_text() == line + "\n"
    record = json.loads(line)
    assert record["benchmark"] == name and record["quick"] is True
    assert set(record["machine"]) == MACHINE_KEYS
    assert record["machine"]["versions"]["torch"] and record["machine"]["versions"]["mpi_library"]
    results = record["results"]
    assert set(results) == RESULT_KEYS[name]
    for key, value in results.items():
        if key == "device":
            assert isinstance(value, str) and value
            continue
        if top := re.search(r"_top(\d+)$", key):
            # A profile's operators or functions with the most time: [name, milliseconds, calls], most first.
            assert len(value) == int(top[1]) and all(
                isinstance(name, str) and ms >= 0 and calls >= 1 for name, ms, calls in value
            )
            assert [ms for _, ms, _ in value] == sorted((ms for _, ms, _ in value), reverse=True)
            continue
        if "_routine_seconds_" in key:
            # The grid's routines, each with its seconds per iteration; training takes time.
            assert (
                set(value) == {"fitness", "selection", "train", "replacement", "mixture", "exchange"}
                and value["train"] > 0
            )
            assert all(seconds >= 0 for seconds in value.values())
            continue
        if key.startswith("top_operators"):
            # Operator names with their extra calls per extra cell, most first.
            assert (
                value
                and all(isinstance(name, str) for name in value)
                and list(value.values()) == sorted(value.values(), reverse=True)
            )
            continue
        assert isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value), (key, value)
        assert value > 0 if any(word in key for word in POSITIVE) else value >= 0, (key, value)
