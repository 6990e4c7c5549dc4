"""Data-parallel training of the two systems of seeds 003 and 004 on this machine: strong scaling from 1
to 2 ranks (1 torch thread each) of calo3d (3DGAN's networks at their size: 25x25x25 showers, latent 200,
hidden_units 8) and pix2pix (ngf = ndf = 64) at 64x64 (six U-Net levels) and at facades' 256x256 (eight,
seed 004's size), on data the benchmark makes. Full: 2 global batches per epoch, 3 epochs, 3 repeats;
--quick: the same image sizes and U-Net depths with a global batch of 4 and thinner networks (calo3d
hidden_units 2, pix2pix ngf = ndf = 8), 2 epochs, 1 repeat.

<case>_efficiency: epoch seconds on 1 rank / (2 x epoch seconds on 2 ranks) (ideal 1.0; seed 003
  reached 0.989 from 1 to 12 GPUs). The global batch is the same on both rank counts, large enough that
  each rank's share keeps a core busy (pix2pix at 64x64 and a global batch of 8 measured 0.51 here: its
  512-channel inner layers cost about the same for 4 rows as for 8).
<case>_epoch_seconds_1, <case>_epoch_seconds_2: the medians behind it; <case>_global_batch: the batch;
<case>_d_loss, <case>_g_loss: the losses of the last epoch on 2 ranks (the same data and seeds in every
case of a network, so pix2pix_bf16's compare with pix2pix's).
device: where every case trained: cuda with two GPUs or more (nccl needs one per rank), else cpu.
Case pix2pix_bf16 is pix2pix under bf16 autocast (Conjevaram Sai Narayan et al.'s AMP row on a CPU;
their fp16 needs a GPU): one repeat, since on CPUs without AVX512-BF16/AMX its kernels are emulated.
An epoch's seconds are the median over its epochs after the first (losses.csv, the training loop's own
clock, without start-up); each figure is the median of interleaved repeats. Prints one JSON record last
(benchmarks/common.py).

    python benchmarks/data_parallel_networks.py [--quick] [CASE ...]     (all cases by default)
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from common import data_parallel_device, emit, interleaved_medians, median_seconds, parser, setup, train
from ganstudy.data.arrays import Split, save_split

FULL = {"iterations": 3, "repeats": 3, "network_keys": {}}
# Thinner networks (calo3d hidden_units 2, pix2pix ngf = ndf = 8), a global batch of 4.
QUICK = {
    "iterations": 2,
    "repeats": 1,
    "network_keys": {"calo3d": {"hidden_units": 2, "batch_size": 4}, "pix2pix": {"hidden_units": 8, "batch_size": 4}},
}
# case -> (network, set-up keys, image side); an epoch is 2 global batches.
CASES = {
    "calo3d": ("calo3d", {"latent_dim": 200, "hidden_units": 8, "batch_size": 32}, 25),
    "pix2pix": ("pix2pix", {"latent_dim": 1, "hidden_units": 64, "batch_size": 32}, 64),
    "pix2pix256": ("pix2pix", {"latent_dim": 1, "hidden_units": 64, "batch_size": 8}, 256),
    "pix2pix_bf16": (
        "pix2pix",
        {"latent_dim": 1, "hidden_units": 64, "batch_size": 32, "data_parallel": {"amp": "bf16"}},
        64,
    ),
}


def data(case: str, rows: int, folder: Path) -> Path:
    """Showers whose voxel sum grows with the primary energy, or random image pairs in [-1, 1]."""
    network, _, side = CASES[case]
    rng = np.random.default_rng(0)
    if network == "calo3d":
        energy = rng.uniform(1, 5, (rows, 1)).astype(np.float32)
        images = (rng.exponential(1.0, (rows, 1, side, side, side)) * energy[:, :, None, None, None] / 50).astype(
            np.float32
        )
        split = Split(images, np.zeros(rows, np.int64), conditions=energy)
    else:
        inputs = rng.uniform(-1, 1, (rows, 3, side, side)).astype(np.float32)
        split = Split(np.flip(inputs, 3).copy(), np.zeros(rows, np.int64), conditions=inputs)
    path = folder / f"{case}.npz"
    save_split(path, split)
    return path


def settings(case: str, size: dict) -> dict:
    network, keys, _ = CASES[case]
    keys = {**keys, **size["network_keys"].get(network, {})}
    return setup({"mode": "data_parallel", "network": network, "iterations": size["iterations"], **keys})


def main() -> None:
    arguments = parser(__doc__)
    arguments.add_argument("cases", nargs="*", metavar="CASE", help=f"cases to run (default: all of {list(CASES)})")
    args = arguments.parse_args()
    cases = args.cases or list(CASES)
    unknown = set(cases) - set(CASES)
    if unknown:
        raise SystemExit(f"unknown case(s) {sorted(unknown)}; the cases are {list(CASES)}")
    size = QUICK if args.quick else FULL
    device = data_parallel_device()
    results: dict[str, float | str] = {"device": device}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for case in cases:
            case_settings = settings(case, size)
            train_split = data(case, 2 * case_settings["batch_size"], folder)

            def epoch_seconds(
                ranks: str, repeat: int, case: str = case, case_settings: dict = case_settings, train_split=train_split
            ) -> float:
                return median_seconds(
                    train(int(ranks), case_settings, train_split, folder / f"{case}-{ranks}-{repeat}", device)
                )

            amp = case_settings["data_parallel"]["amp"] != "none"
            median = interleaved_medians(epoch_seconds, ("1", "2"), 1 if amp else size["repeats"])
            one, two = median["1"], median["2"]
            last = pd.read_csv(folder / f"{case}-2-0" / "losses.csv").iloc[-1]
            results |= {
                f"{case}_efficiency": round(one / (2 * two), 3),
                f"{case}_epoch_seconds_1": round(one, 3),
                f"{case}_epoch_seconds_2": round(two, 3),
                f"{case}_global_batch": case_settings["batch_size"],
                f"{case}_d_loss": round(float(last.d_loss), 4),
                f"{case}_g_loss": round(float(last.g_loss), 4),
            }
    emit("data_parallel_networks", results, args)


if __name__ == "__main__":
    main()
