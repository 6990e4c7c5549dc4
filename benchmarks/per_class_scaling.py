"""Per-class training over MPI (seed 001's weak scaling), DC-GAN on the digits, 1 torch thread per rank.

weak_scaling_ratio: k classes on k ranks with the same work per rank (every class cut to the same
  number of images): training seconds of 2 classes on 2 ranks / 1 class on 1 rank (ideal 1.0).
strong_speedup: all 10 classes on 1 rank / on 2 ranks (ideal 2.0; the classes' sizes differ, so the
  balanced assignment bounds it a little below).
seconds_<classes>_<ranks>: the medians behind them; images_per_class_weak: the images of each class
  in the weak-scaling runs.
Each figure is the median of interleaved repeats of `mpiexec -n k ganstudy train` (the run's own
train_seconds, without interpreter start-up): full, 40 iterations (weak) and 10 (strong) x 3 repeats;
--quick, 1 iteration x 1 repeat on 32 images per class. Prints one JSON record last (benchmarks/common.py).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

from common import emit, interleaved_medians, parser, setup, train
from ganstudy.data.arrays import Split, load_split, save_split
from ganstudy.data.prepare import prepare_dataset

# images_per_class: a cap on every class's images (None: the smallest class's count for weak scaling,
# every image for strong scaling).
FULL = {"weak_iterations": 40, "strong_iterations": 10, "repeats": 3, "images_per_class": None}
QUICK = {"weak_iterations": 1, "strong_iterations": 1, "repeats": 1, "images_per_class": 32}


def settings(iterations: int) -> dict:
    return setup(
        {"mode": "per_class", "network": "dcgan", "latent_dim": 100, "batch_size": 32, "iterations": iterations}
    )


def equal_classes(split: Split, classes: list[int], per_class: int) -> Split:
    """The first ``per_class`` images of each listed class: the same work for every class."""
    keep = np.concatenate([np.flatnonzero(split.labels == c)[:per_class] for c in classes])
    return Split(split.images[keep], split.labels[keep])


def main() -> None:
    args = parser(__doc__).parse_args()
    size = QUICK if args.quick else FULL
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        prepare_dataset("digits", None, 0.2, 1, folder)
        train_split = load_split(folder / "train.npz")
        cap, smallest = size["images_per_class"], int(np.bincount(train_split.labels).min())
        per_class = smallest if cap is None else min(smallest, cap)
        for k in (1, 2):
            save_split(folder / f"weak{k}.npz", equal_classes(train_split, list(range(k)), per_class))
        strong = folder / "train.npz"
        if cap is not None:
            strong = folder / "strong.npz"
            save_split(strong, equal_classes(train_split, list(range(10)), cap))
        # name -> (ranks, settings, data)
        runs = {f"weak{k}": (k, settings(size["weak_iterations"]), folder / f"weak{k}.npz") for k in (1, 2)}
        runs |= {f"strong{k}": (k, settings(size["strong_iterations"]), strong) for k in (1, 2)}

        def train_seconds(name: str, repeat: int) -> float:
            ranks, run_settings, data = runs[name]
            out = train(ranks, run_settings, data, folder / f"{name}-{repeat}")
            return json.loads((out / "run.json").read_text())["train_seconds"]

        median = interleaved_medians(train_seconds, runs, size["repeats"])
    results = {
        "weak_scaling_ratio": round(median["weak2"] / median["weak1"], 3),
        "strong_speedup": round(median["strong1"] / median["strong2"], 3),
        "seconds_1_class_1_rank": round(median["weak1"], 2),
        "seconds_2_classes_2_ranks": round(median["weak2"], 2),
        "seconds_10_classes_1_rank": round(median["strong1"], 2),
        "seconds_10_classes_2_ranks": round(median["strong2"], 2),
        "images_per_class_weak": per_class,
    }
    emit("per_class_scaling", results, args)


if __name__ == "__main__":
    main()
