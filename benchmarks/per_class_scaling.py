"""Per-class training over MPI (seed 001's weak scaling), DC-GAN on the digits, 1 torch thread per rank.

weak_scaling_ratio: k classes on k ranks with the same work per rank (every class cut to the same
  number of images): training seconds of 2 classes on 2 ranks / 1 class on 1 rank (ideal 1.0).
strong_speedup: all 10 classes on 1 rank / on 2 ranks (ideal 2.0; the classes' sizes differ, so the
  balanced assignment bounds it a little below).
Each figure is the median of interleaved repeats of `mpiexec -n k ganstudy train` (the run's own
train_seconds, without interpreter start-up). Prints one JSON line last.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ganstudy.config import validate_study_config
from ganstudy.data.arrays import Split, load_split, save_split
from ganstudy.data.prepare import prepare_dataset

SCHEMA = "workflow/schemas/config.schema.yaml"
BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
REPEATS = 3


def setup(iterations: int) -> dict:
    config = {"setups": {"p": {"mode": "per_class", "network": "dcgan", "latent_dim": 100, "batch_size": 32,
                               "iterations": iterations, "checkpoint_period": 0}}}
    return validate_study_config(config, SCHEMA)["setups"]["p"]


def train_seconds(ranks: int, settings: dict, data: Path, out: Path) -> float:
    command = ["mpiexec", "-n", str(ranks), "ganstudy", "train", "--setup", "p", "--settings", json.dumps(settings),
               "--train", str(data), "--seed", "1", "--trial", "0", "--out-dir", str(out), "--threads", "1"]
    subprocess.run(command, check=True, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads((out / "run.json").read_text())["train_seconds"]


def equal_classes(split: Split, classes: list[int], per_class: int) -> Split:
    """The first ``per_class`` images of each listed class: the same work for every class."""
    keep = np.concatenate([np.flatnonzero(split.labels == c)[:per_class] for c in classes])
    return Split(split.images[keep], split.labels[keep])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        prepare_dataset("digits", None, 0.2, 1, folder)
        train = load_split(folder / "train.npz")
        smallest = int(np.bincount(train.labels).min())
        for k in (1, 2):
            save_split(folder / f"weak{k}.npz", equal_classes(train, list(range(k)), smallest))
        weak_settings, strong_settings = setup(40), setup(10)
        times: dict[str, list[float]] = {"weak1": [], "weak2": [], "strong1": [], "strong2": []}
        for repeat in range(REPEATS):
            for k in (1, 2):
                times[f"weak{k}"].append(train_seconds(k, weak_settings, folder / f"weak{k}.npz", folder / f"w{k}r{repeat}"))
                times[f"strong{k}"].append(train_seconds(k, strong_settings, folder / "train.npz", folder / f"s{k}r{repeat}"))
        median = {name: statistics.median(values) for name, values in times.items()}
        result = {
            "weak_scaling_ratio": round(median["weak2"] / median["weak1"], 3),
            "strong_speedup": round(median["strong1"] / median["strong2"], 3),
            "seconds_1_class_1_rank": round(median["weak1"], 2),
            "seconds_2_classes_2_ranks": round(median["weak2"], 2),
            "seconds_10_classes_1_rank": round(median["strong1"], 2),
            "seconds_10_classes_2_ranks": round(median["strong2"], 2),
            "images_per_class_weak": smallest,
        }
        print(json.dumps(result))


if __name__ == "__main__":
    main()
