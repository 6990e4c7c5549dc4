"""Grid training over MPI: how the grid scales over ranks, share of time in the neighbour exchange,
batched (stacked) cells vs the per-cell loop, and seconds per iteration of the thesis's work. Every
figure is the median of a run's iteration seconds after the first (losses.csv), 1 torch thread per rank.

1. digits (8x8), the default cell settings with fitness and scores on 500 samples, 12 iterations, grids
   of at least 3 rows and columns, whose every cell has the full neighbourhood of 5 (a 2x2 cell has 3,
   a 4x2 cell 4: grids smaller than 3x3 in a direction do different work per cell):
   - speedup: a 3x3 grid on 1 rank / on 2 ranks (iteration_seconds_1_rank_digits,
     iteration_seconds_2_ranks_digits). Not what scaling out gives: on 1 rank all nine cells are
     batched into stacked networks, on 2 ranks four or five per rank, and batching makes the 1-rank
     reference faster, so this ratio falls whenever batching improves, without anything getting slower.
   - weak_efficiency: constant cells per rank, a user growing the grid with the ranks: a 3x3 grid on 1
     rank / a 3x6 grid on 2 ranks (iteration_seconds_3x6_2_ranks_digits; 9 cells per rank in both, the
     same work per cell; ideal 1.0).
2. digits, 6x6 and 18x18 grids on 2 ranks (18 and 162 cells per rank), the default study's cell settings
   (batch 50, fitness and scores on 250 samples): iteration seconds with grid.batch_cells true and
   false in the same run; batched_speedup_<shape> = loop seconds / batched seconds.
   A 6x6 grid (--quick 2x2) of the convolutional dcgan on 2 ranks, cells stacked in its general form
   (compute.stack_layout whole) and cell by cell (cache, a CPU's default): cnn_batched_speedup = loop
   seconds / stacked seconds (iteration_seconds_cnn_stacked, iteration_seconds_cnn_loop; cnn_grid_cells).
   The 4LP's hand-stacked form (StackedMLP) against the general one (StackedNetwork) on the same 36
   rows (--quick 4) of the thesis's digits networks, in one process: a training pass of generator and
   discriminator on batches of 50; hand_stacked_speedup = general seconds / hand seconds
   (seconds_per_pass_hand_stacked, seconds_per_pass_general_stacked).
3. 28x28 images (60,000, upscaled digits made in memory), 4LP, batch 100, the per-cell work of the
   thesis's MNIST runs: 600 generator and 300 discriminator updates, lr mutation at each update, fitness
   on 1,000 samples, two FIDs of a 1,000-sample mixture per iteration:
   - strong_speedup_28x28: a 2x2 grid on 1 rank / on 2 ranks at this per-cell work
     (iteration_seconds_2x2_1_rank, iteration_seconds_2x2; ideal 2.0), what a user gets by giving a
     grid of the thesis's work twice the ranks;
   - exchange_fraction: exchange seconds / iteration seconds per rank, of the 2x2 grid on 2 ranks;
   - the thesis's grid (--thesis-shape, 18x18 on a GPU; 4x4 on a CPU, where 18x18 takes a quarter of an
     hour per iteration, and with --quick) on --thesis-ranks ranks with the device found:
     iteration_seconds_thesis_<shape> and, per cell, cell_iteration_seconds_thesis (iteration seconds x
     ranks / cells); thesis_ranks, device.
--quick runs the same grids and rank counts with 2 iterations each, 4LP networks of 16 hidden units and
latent 8, one batch of data per cell (grid.data_ratio 0.01), 50 to 100 samples for fitness and scores,
200 28x28 images and 1-epoch classifiers. Prints one JSON record last (benchmarks/common.py).
"""

from __future__ import annotations

import csv
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from common import cell_count, emit, iterations_logged, median_seconds, parser, setup, train
from ganstudy.data.arrays import Split, save_split
from ganstudy.data.prepare import prepare_dataset
from ganstudy.evaluate.classifier import train_classifier
from ganstudy.evaluate.extractor import classifier_extractor
from ganstudy.evaluate.scores import reference_statistics
from ganstudy.evaluate.settings import ClassifierSettings
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.stacked_network import StackedNetwork

FULL = {
    "digits_iterations": 12,
    "digits_samples": 500,
    "batched_iterations": {"6x6": 5, "18x18": 4},
    "batched_samples": 250,
    "cnn_shape": "6x6",
    "cnn_iterations": 3,
    "stack_rows": 36,
    "large_images": 60_000,
    "large_test_images": 2000,
    "large_iterations": 4,
    "thesis_iterations": 2,
    "thesis_samples": 1000,
    "classifier_epochs": {"digits": 20, "large": 2},
    "data_ratio": 1.0,
    "network": {},
}
QUICK = {
    "digits_iterations": 2,
    "digits_samples": 50,
    "batched_iterations": {"6x6": 2, "18x18": 2},
    "batched_samples": 50,
    "cnn_shape": "2x2",
    "cnn_iterations": 2,
    "stack_rows": 4,
    "large_images": 200,
    "large_test_images": 200,
    "large_iterations": 2,
    "thesis_iterations": 2,
    "thesis_samples": 100,
    "classifier_epochs": {"digits": 1, "large": 1},
    "data_ratio": 0.01,
    "network": {"hidden_units": 16, "latent_dim": 8},
}


def grid_setup(iterations: int, size: dict, cell: dict | None = None, **grid) -> dict:
    grid = {"shape": "2x2", "data_ratio": size["data_ratio"], **grid}
    return setup({"mode": "grid", "iterations": iterations, **size["network"], **(cell or {}), "grid": grid})


def run(ranks: int, settings: dict, folder: Path, out: Path) -> Path:
    """A grid run on ``folder``'s training split, scored with its classifier (the grid always scores)."""
    return train(
        ranks,
        settings,
        folder / "train.npz",
        out,
        classifier=folder / "classifier.pt",
        reference=folder / "reference.npz",
    )


def exchange_fraction(out: Path, skip: int = 1) -> float:
    last = iterations_logged(out)
    per_rank = defaultdict(float)
    for row in csv.DictReader((out / "profile.csv").open()):
        if row["routine"] == "exchange" and row["cell"] == "*" and 1 + skip <= int(row["iteration"]) <= last:
            per_rank[row["rank"]] += float(row["seconds"])
    wall = median_seconds(out, skip) * (last - skip)
    return statistics.mean(seconds / wall for seconds in per_rank.values())


def score_inputs(folder: Path, epochs: int) -> None:
    """The classifier and reference statistics the grid scores its cells with."""
    settings = ClassifierSettings(epochs=epochs, batch_size=100, lr=1e-3, min_accuracy=0.0)
    classifier, train_split = folder / "classifier.pt", folder / "train.npz"
    train_classifier(train_split, folder / "test.npz", settings, 1, classifier, folder / "classifier.json", 2)
    reference_statistics(train_split, classifier_extractor(classifier), "logits", 1000, folder / "reference.npz", 2)


def mnist_like(source: Path, target: Path, count: int, test_count: int) -> None:
    """``count`` 28x28 images: digits upscaled to 24x24, placed at random offsets in a 28x28 frame."""
    rng = np.random.default_rng(0)
    for split, n in (("train", count), ("test", test_count)):
        with np.load(source / f"{split}.npz") as arrays:
            images, labels = torch.from_numpy(arrays["images"]), arrays["labels"]
        pick = rng.integers(len(images), size=n)
        big = F.interpolate(images[pick], size=(24, 24), mode="bilinear", align_corners=False).clamp(-1, 1)
        frame = torch.full((n, 1, 28, 28), -1.0)
        offsets = rng.integers(0, 5, size=(n, 2))
        for i, (dy, dx) in enumerate(offsets):
            frame[i, :, dy : dy + 24, dx : dx + 24] = big[i]
        save_split(target / f"{split}.npz", Split(frame.numpy(), labels[pick]))


def digits_scaling(size: dict, folder: Path, tmp: str) -> dict:
    """Part 1: a 3x3 grid on 1 and 2 ranks, and a 3x6 grid on 2 ranks."""
    samples = size["digits_samples"]
    seconds = {}
    for shape, ranks in (("3x3", 1), ("3x3", 2), ("3x6", 2)):
        settings = grid_setup(
            size["digits_iterations"], size, shape=shape, fitness_sample_size=samples, score_sample_size=samples
        )
        seconds[shape, ranks] = median_seconds(run(ranks, settings, folder, Path(tmp, f"digits-{shape}-{ranks}")))
    one = seconds["3x3", 1]
    return {
        "speedup": round(one / seconds["3x3", 2], 3),
        "iteration_seconds_1_rank_digits": round(one, 3),
        "iteration_seconds_2_ranks_digits": round(seconds["3x3", 2], 3),
        "weak_efficiency": round(one / seconds["3x6", 2], 3),
        "iteration_seconds_3x6_2_ranks_digits": round(seconds["3x6", 2], 3),
    }


def batched_vs_loop(shape: str, size: dict, folder: Path, tmp: str) -> dict:
    """Part 2: iteration seconds of a digits grid on 2 ranks, stacked cells vs the per-cell loop."""
    cell = {"batch_size": 50, "lr": 5e-4}
    samples = size["batched_samples"]
    seconds = {}
    for batched in (True, False):
        settings = grid_setup(
            size["batched_iterations"][shape],
            size,
            cell,
            shape=shape,
            fitness_sample_size=samples,
            score_sample_size=samples,
            batch_cells=batched,
        )
        seconds[batched] = median_seconds(run(2, settings, folder, Path(tmp, f"{shape}-{batched}")))
    return {
        f"iteration_seconds_{shape}_batched": round(seconds[True], 3),
        f"iteration_seconds_{shape}_loop": round(seconds[False], 3),
        f"batched_speedup_{shape}": round(seconds[False] / seconds[True], 3),
    }


def cnn_batched_vs_loop(size: dict, folder: Path, tmp: str) -> dict:
    """Part 2, convolutional: iteration seconds of a dcgan grid on 2 ranks, stacked (the general form, in
    the whole layout) vs cell by cell (the cache layout)."""
    cell = {"network": "dcgan", "batch_size": 50, "lr": 5e-4}
    samples, shape = size["batched_samples"], size["cnn_shape"]
    settings = grid_setup(
        size["cnn_iterations"], size, cell, shape=shape, fitness_sample_size=samples, score_sample_size=samples
    )
    classifier = {"classifier": folder / "classifier.pt", "reference": folder / "reference.npz"}
    seconds = {
        layout: median_seconds(
            train(2, settings, folder / "train.npz", Path(tmp, f"cnn-{layout}"), stack_layout=layout, **classifier)
        )
        for layout in ("whole", "cache")
    }
    return {
        "cnn_grid_cells": cell_count(shape),
        "iteration_seconds_cnn_stacked": round(seconds["whole"], 3),
        "iteration_seconds_cnn_loop": round(seconds["cache"], 3),
        "cnn_batched_speedup": round(seconds["cache"] / seconds["whole"], 3),
    }


def hand_vs_general(size: dict, repeats: int = 20) -> dict:
    """Part 2, the perceptron: its hand-stacked form against the general one, same rows and inputs."""
    torch.set_num_threads(1)
    keys = setup({"mode": "grid", **size["network"]})  # the schema's defaults for the full size
    spec = NetworkSpec((1, 8, 8), keys["latent_dim"], keys["hidden_units"])
    torch.manual_seed(0)
    pairs = [build_pair("perceptron4", spec) for _ in range(size["stack_rows"])]
    z = torch.randn(len(pairs), 50, spec.latent_dim)
    seconds = {}
    for form, (g_net, d_net) in (
        ("hand", (pairs[0][0].stacked(), pairs[0][1].stacked())),
        ("general", (StackedNetwork(pairs[0][0]), StackedNetwork(pairs[0][1]))),
    ):
        g_params = [p.requires_grad_() for p in g_net.stack([g.state_dict() for g, _ in pairs], torch.device("cpu"))]
        d_params = [p.requires_grad_() for p in d_net.stack([d.state_dict() for _, d in pairs], torch.device("cpu"))]
        passes = []
        for _ in range(repeats + 3):
            started = time.perf_counter()
            d_net(d_params, g_net(g_params, z, True), True).sum().backward()
            passes.append(time.perf_counter() - started)
        seconds[form] = statistics.median(passes[3:])
    return {
        "seconds_per_pass_hand_stacked": round(seconds["hand"], 5),
        "seconds_per_pass_general_stacked": round(seconds["general"], 5),
        "hand_stacked_speedup": round(seconds["general"] / seconds["hand"], 3),
    }


def thesis_grid(samples: int) -> dict:
    """The grid keys of the thesis's per-cell work besides the data: fitness and scores on ``samples``, the
    discriminators trained every other update."""
    return {"fitness_sample_size": samples, "score_sample_size": samples, "discriminator_skip": 1}


def thesis_work(size: dict, folder: Path, tmp: str, thesis_shape: str, thesis_ranks: int) -> dict:
    """Part 3: the thesis's per-cell work on 28x28 images."""
    work = thesis_grid(size["thesis_samples"])
    settings = grid_setup(size["large_iterations"], size, **work)
    outs = {ranks: run(ranks, settings, folder, Path(tmp, f"large-{ranks}")) for ranks in (1, 2)}
    rows, cols = map(int, thesis_shape.split("x"))
    thesis_settings = grid_setup(size["thesis_iterations"], size, shape=thesis_shape, **work)
    thesis = median_seconds(run(thesis_ranks, thesis_settings, folder, Path(tmp, "thesis")))
    return {
        "strong_speedup_28x28": round(median_seconds(outs[1]) / median_seconds(outs[2]), 3),
        "iteration_seconds_2x2_1_rank": round(median_seconds(outs[1]), 3),
        "iteration_seconds_2x2": round(median_seconds(outs[2]), 3),
        "exchange_fraction": round(exchange_fraction(outs[2]), 4),
        f"iteration_seconds_thesis_{thesis_shape}": round(thesis, 3),
        "cell_iteration_seconds_thesis": round(thesis * thesis_ranks / (rows * cols), 4),
        "thesis_ranks": thesis_ranks,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
    }


def main() -> None:
    arguments = parser(__doc__)
    arguments.add_argument("--thesis-shape", help="the thesis's grid: 18x18 on a GPU, 4x4 on a CPU or with --quick")
    arguments.add_argument("--thesis-ranks", type=int, default=1, help="ranks for the thesis's grid (one per GPU)")
    args = arguments.parse_args()
    # --quick checks the code path in minutes on any device; the 18x18 grid's 324 cells are for the measurement.
    args.thesis_shape = args.thesis_shape or ("18x18" if torch.cuda.is_available() and not args.quick else "4x4")
    size = QUICK if args.quick else FULL
    with tempfile.TemporaryDirectory() as tmp:
        small, large = Path(tmp, "digits"), Path(tmp, "mnist_like")
        prepare_dataset("digits", None, 0.2, 1, small)
        score_inputs(small, size["classifier_epochs"]["digits"])
        results = digits_scaling(size, small, tmp)
        for shape in size["batched_iterations"]:
            results |= batched_vs_loop(shape, size, small, tmp)
        results |= cnn_batched_vs_loop(size, small, tmp) | hand_vs_general(size)
        large.mkdir()
        mnist_like(small, large, size["large_images"], size["large_test_images"])
        score_inputs(large, size["classifier_epochs"]["large"])
        results |= thesis_work(size, large, tmp, args.thesis_shape, args.thesis_ranks)
    emit("grid_scaling", results, args)


if __name__ == "__main__":
    main()
