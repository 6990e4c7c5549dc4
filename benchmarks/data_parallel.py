"""Data-parallel DC-GAN training (seeds 003 and 004) on this machine: 640 digits brought to MNIST's
28x28 (5 global batches of 128 per epoch), 1 torch thread per rank.

efficiency: strong scaling from 1 to 2 ranks, epoch seconds on 1 rank / (2 x epoch seconds on 2 ranks)
  (ideal 1.0; seed 003 reached 0.989 from 1 to 12 GPUs).
<option>_ratio: epoch seconds of data parallelism on 2 ranks with one option (bf16 autocast, 4
  micro-batches, clipping to norm 2, ZeRO-1) / without it (seed 004's table 1 as ratios).
An epoch's seconds are the median over its epochs after the first (losses.csv, the training loop's own
clock, without start-up); each figure is the median of interleaved repeats, except bf16: on a CPU
without AVX512-BF16/AMX its kernels are emulated and one run of one timed epoch has to do. Prints one
JSON line last.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from ganstudy.config import validate_study_config
from ganstudy.data.arrays import Split, load_split, save_split
from ganstudy.data.conform import conform
from ganstudy.data.prepare import prepare_dataset

SCHEMA = "workflow/schemas/config.schema.yaml"
BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
REPEATS = 3
ITERATIONS = 3
IMAGES = 640
OPTIONS = {"accumulation_4": {"accumulation_steps": 4}, "clip_2": {"clip_norm": 2.0}, "zero": {"zero": True}}


def setup(options: dict, iterations: int = ITERATIONS) -> dict:
    config = {"setups": {"p": {"mode": "data_parallel", "network": "dcgan", "latent_dim": 100, "batch_size": 128,
                               "iterations": iterations, "checkpoint_period": 0, "data_parallel": options}}}
    return validate_study_config(config, SCHEMA)["setups"]["p"]


def epoch_seconds(ranks: int, settings: dict, data: Path, out: Path) -> float:
    command = ["mpiexec", "-n", str(ranks), "ganstudy", "train", "--setup", "p", "--settings", json.dumps(settings),
               "--train", str(data), "--seed", "1", "--trial", "0", "--out-dir", str(out), "--threads", "1"]
    subprocess.run(command, check=True, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return float(pd.read_csv(out / "losses.csv").seconds.iloc[1:].median())


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        prepare_dataset("digits", None, 0.2, 1, folder)
        train = load_split(folder / "train.npz")
        save_split(folder / "mnist_size.npz", Split(conform(train.images[:IMAGES], 28, 1), train.labels[:IMAGES]))
        data = folder / "mnist_size.npz"
        runs = {"ranks1": (1, setup({})), "ranks2": (2, setup({}))} | {name: (2, setup(o)) for name, o in OPTIONS.items()}
        times: dict[str, list[float]] = {name: [] for name in runs}
        for repeat in range(REPEATS):
            for name, (ranks, settings) in runs.items():
                times[name].append(epoch_seconds(ranks, settings, data, folder / f"{name}-{repeat}"))
        median = {name: statistics.median(values) for name, values in times.items()}
        median["amp_bf16"] = epoch_seconds(2, setup({"amp": "bf16"}, iterations=2), data, folder / "amp_bf16")
        result = {"efficiency": round(median["ranks1"] / (2 * median["ranks2"]), 3)}
        result |= {f"{name}_ratio": round(median[name] / median["ranks2"], 3) for name in [*OPTIONS, "amp_bf16"]}
        result |= {f"epoch_seconds_{name}": round(seconds, 3) for name, seconds in median.items()}
        result["steps_per_epoch"] = IMAGES // 128
        print(json.dumps(result))


if __name__ == "__main__":
    main()
