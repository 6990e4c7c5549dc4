"""Data-parallel training of the two systems of seeds 003 and 004 on this machine: strong scaling from 1
to 2 ranks (1 torch thread each) of calo3d (3DGAN's networks at their size: 25x25x25 showers, latent 200,
hidden_units 8) and pix2pix (ngf = ndf = 64) at 64x64 (six U-Net levels) and at facades' 256x256 (eight,
seed 004's size), on data the benchmark makes.

efficiency: epoch seconds on 1 rank / (2 x epoch seconds on 2 ranks), per case (ideal 1.0; seed 003
  reached 0.989 from 1 to 12 GPUs). The global batch is the same on both rank counts, large enough that
  each rank's share keeps a core busy (pix2pix at 64x64 and a global batch of 8 measured 0.51 here: its
  512-channel inner layers cost about the same for 4 rows as for 8).
An epoch's seconds are the median over its epochs after the first (losses.csv, the training loop's own
clock, without start-up); each figure is the median of interleaved repeats. Prints one JSON line last.

    python benchmarks/data_parallel_networks.py [CASE ...]     (all cases by default)
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
# The DC-GAN benchmark's timing of one `ganstudy train` under mpiexec (this folder is on sys.path when a
# benchmark runs as a script).
from data_parallel import SCHEMA, epoch_seconds

from ganstudy.config import validate_study_config
from ganstudy.data.arrays import Split, save_split

REPEATS = 3
ITERATIONS = 3
# case -> (network, set-up keys, rows per epoch, image side); an epoch is 2 global batches.
CASES = {
    "calo3d": ("calo3d", {"latent_dim": 200, "hidden_units": 8, "batch_size": 32}, 64, 25),
    "pix2pix": ("pix2pix", {"latent_dim": 1, "hidden_units": 64, "batch_size": 32}, 64, 64),
    "pix2pix256": ("pix2pix", {"latent_dim": 1, "hidden_units": 64, "batch_size": 8}, 16, 256),
}


def data(case: str, folder: Path) -> Path:
    """Showers whose voxel sum grows with the primary energy, or random image pairs in [-1, 1]."""
    network, _, rows, side = CASES[case]
    rng = np.random.default_rng(0)
    if network == "calo3d":
        energy = rng.uniform(1, 5, (rows, 1)).astype(np.float32)
        images = (rng.exponential(1.0, (rows, 1, side, side, side)) * energy[:, :, None, None, None] / 50).astype(np.float32)
        split = Split(images, np.zeros(rows, np.int64), conditions=energy)
    else:
        inputs = rng.uniform(-1, 1, (rows, 3, side, side)).astype(np.float32)
        split = Split(np.flip(inputs, 3).copy(), np.zeros(rows, np.int64), conditions=inputs)
    path = folder / f"{case}.npz"
    save_split(path, split)
    return path


def settings(case: str) -> dict:
    network, keys, _, _ = CASES[case]
    config = {"setups": {"p": {"mode": "data_parallel", "network": network, "iterations": ITERATIONS, "checkpoint_period": 0,
                               "score_period": 0, **keys}}}
    return validate_study_config(config, SCHEMA)["setups"]["p"]


def main(cases: list[str]) -> None:
    unknown = set(cases) - set(CASES)
    if unknown:
        raise SystemExit(f"unknown case(s) {sorted(unknown)}; the cases are {list(CASES)}")
    result: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for case in cases:
            train, setup = data(case, folder), settings(case)
            times: dict[int, list[float]] = {1: [], 2: []}
            for repeat in range(REPEATS):
                for ranks in times:
                    times[ranks].append(epoch_seconds(ranks, setup, train, folder / f"{case}-{ranks}-{repeat}"))
            one, two = (statistics.median(times[ranks]) for ranks in (1, 2))
            result |= {f"{case}_efficiency": round(one / (2 * two), 3), f"{case}_epoch_seconds_1": round(one, 3),
                       f"{case}_epoch_seconds_2": round(two, 3), f"{case}_global_batch": setup["batch_size"]}
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:] or list(CASES))
