"""Grid training over MPI: speed-up of a 2x2 grid on 2 ranks vs 1 rank, share of time in the neighbour
exchange, batched (stacked) cells vs the per-cell loop, and seconds per iteration of the thesis's work.

1. digits (8x8), 2x2 grid, 1 torch thread per rank: iteration time on 1 rank / on 2 ranks = speedup.
2. digits, 6x6 and 18x18 grids on 2 ranks (18 and 162 cells per rank), the default study's cell settings
   (batch 50, fitness and scores on 250 samples): iteration seconds with grid.batch_cells true and
   false in the same run; batched_speedup_<shape> = loop seconds / batched seconds.
3. 28x28 images (60,000, upscaled digits made in memory), 4LP, batch 100, the per-cell work of the
   thesis's MNIST runs: 600 generator and 300 discriminator updates, lr mutation at each update, fitness
   on 1,000 samples, two FIDs of a 1,000-sample mixture per iteration:
   - 2x2 grid on 2 ranks: iteration_seconds_2x2 and exchange_fraction (exchange seconds / iteration
     seconds, per rank);
   - the thesis's grid (--thesis-shape, 18x18 on a GPU; 4x4 on a CPU, where 18x18 takes a quarter of an
     hour per iteration) on --thesis-ranks ranks with the device found: iteration_seconds_thesis_<shape>
     and, per cell, cell_iteration_seconds_thesis (iteration seconds x ranks / cells).
Prints one JSON line with these keys.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ganstudy.config import validate_study_config
from ganstudy.data.arrays import Split, save_split
from ganstudy.data.prepare import prepare_dataset
from ganstudy.evaluate.classifier import train_classifier
from ganstudy.evaluate.extractor import classifier_extractor
from ganstudy.evaluate.scores import reference_statistics

SCHEMA = "workflow/schemas/config.schema.yaml"
BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


def grid_setup(iterations: int, setup: dict | None = None, **grid) -> dict:
    config = {"setups": {"g": {"mode": "grid", "iterations": iterations, "checkpoint_period": 0, **(setup or {}),
                               "grid": {"shape": "2x2", **grid}}}}
    return validate_study_config(config, SCHEMA)["setups"]["g"]


def run(ranks: int, setup: dict, folder: Path, out: Path) -> Path:
    command = ["mpiexec", "-n", str(ranks), "ganstudy", "train", "--setup", "g", "--settings", json.dumps(setup),
               "--train", str(folder / "train.npz"), "--seed", "1", "--trial", "0", "--out-dir", str(out),
               "--classifier", str(folder / "classifier.pt"), "--reference", str(folder / "reference.npz"), "--threads", "1"]
    subprocess.run(command, check=True, env=ENV, stdout=subprocess.DEVNULL)
    return out


def iteration_seconds(out: Path, skip: int = 1) -> float:
    """Median wall seconds of an iteration, leaving out the first (warm-up)."""
    rows = list(csv.DictReader((out / "losses.csv").open()))
    return statistics.median(float(r["seconds"]) for r in rows[skip:])


def exchange_fraction(out: Path, skip: int = 1) -> float:
    per_rank = defaultdict(float)
    for row in csv.DictReader((out / "profile.csv").open()):
        if row["routine"] == "exchange" and row["cell"] == "*" and 1 + skip <= int(row["iteration"]) <= _last(out):
            per_rank[row["rank"]] += float(row["seconds"])
    iterations = _last(out) - skip
    wall = iteration_seconds(out, skip) * iterations
    return statistics.mean(seconds / wall for seconds in per_rank.values())


def _last(out: Path) -> int:
    return len(list(csv.DictReader((out / "losses.csv").open())))


def score_inputs(folder: Path, epochs: int) -> None:
    settings = {"epochs": epochs, "batch_size": 100, "lr": 1e-3, "min_accuracy": 0.0}
    train_classifier(folder / "train.npz", folder / "test.npz", settings, 1, folder / "classifier.pt", folder / "classifier.json", 2)
    reference_statistics(folder / "train.npz", classifier_extractor(folder / "classifier.pt"), "logits", 1000, folder / "reference.npz", 2)


def mnist_like(source: Path, target: Path, count: int) -> None:
    """``count`` 28x28 images: digits upscaled to 24x24, placed at random offsets in a 28x28 frame."""
    rng = np.random.default_rng(0)
    for split, n in (("train", count), ("test", 2000)):
        with np.load(source / f"{split}.npz") as arrays:
            images, labels = torch.from_numpy(arrays["images"]), arrays["labels"]
        pick = rng.integers(len(images), size=n)
        big = F.interpolate(images[pick], size=(24, 24), mode="bilinear", align_corners=False).clamp(-1, 1)
        frame = torch.full((n, 1, 28, 28), -1.0)
        offsets = rng.integers(0, 5, size=(n, 2))
        for i, (dy, dx) in enumerate(offsets):
            frame[i, :, dy : dy + 24, dx : dx + 24] = big[i]
        save_split(target / f"{split}.npz", Split(frame.numpy(), labels[pick]))


def batched_vs_loop(shape: str, iterations: int, folder: Path, tmp: str) -> dict:
    """Iteration seconds of a digits grid on 2 ranks, stacked cells vs the per-cell loop."""
    cell = {"batch_size": 50, "lr": 5e-4}
    seconds = {}
    for batched in (True, False):
        setup = grid_setup(iterations, cell, shape=shape, fitness_sample_size=250, score_sample_size=250, batch_cells=batched)
        seconds[batched] = iteration_seconds(run(2, setup, folder, Path(tmp, f"{shape}-{batched}")))
    return {
        f"iteration_seconds_{shape}_batched": round(seconds[True], 3),
        f"iteration_seconds_{shape}_loop": round(seconds[False], 3),
        f"batched_speedup_{shape}": round(seconds[False] / seconds[True], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--thesis-shape", default="18x18" if torch.cuda.is_available() else "4x4")
    parser.add_argument("--thesis-ranks", type=int, default=1, help="ranks for the thesis's grid (one per GPU)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small, large = Path(tmp, "digits"), Path(tmp, "mnist_like")
        prepare_dataset("digits", None, 0.2, 1, small)
        score_inputs(small, epochs=20)
        setup = grid_setup(12, fitness_sample_size=500, score_sample_size=500)
        one = iteration_seconds(run(1, setup, small, Path(tmp, "one")))
        two = iteration_seconds(run(2, setup, small, Path(tmp, "two")))
        result = {
            "speedup": round(one / two, 3),
            "iteration_seconds_1_rank_digits": round(one, 3),
            "iteration_seconds_2_ranks_digits": round(two, 3),
            **batched_vs_loop("6x6", 5, small, tmp),
            # Median of 3 iterations after the warm-up: single iterations vary by 10% on a VM.
            **batched_vs_loop("18x18", 4, small, tmp),
        }

        large.mkdir()
        mnist_like(small, large, 60_000)
        score_inputs(large, epochs=2)
        work = dict(fitness_sample_size=1000, score_sample_size=1000, discriminator_skip=1)
        out = run(2, grid_setup(4, **work), large, Path(tmp, "large"))
        result |= {"iteration_seconds_2x2": round(iteration_seconds(out), 3), "exchange_fraction": round(exchange_fraction(out), 4)}
        rows, cols = map(int, args.thesis_shape.split("x"))
        thesis = iteration_seconds(run(args.thesis_ranks, grid_setup(2, shape=args.thesis_shape, **work), large, Path(tmp, "thesis")))
        result |= {
            f"iteration_seconds_thesis_{args.thesis_shape}": round(thesis, 3),
            "cell_iteration_seconds_thesis": round(thesis * args.thesis_ranks / (rows * cols), 4),
            "thesis_ranks": args.thesis_ranks,
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
