"""Data-parallel DC-GAN training (seeds 003 and 004) on this machine: digits brought to MNIST's 28x28,
1 torch thread per rank. Full: 640 images, global batch 128 (5 steps per epoch), 3 epochs, 3 repeats;
--quick: 8 images, global batch 8 (1 step), 2 epochs, 1 repeat.

efficiency: strong scaling from 1 to 2 ranks, epoch seconds on 1 rank / (2 x epoch seconds on 2 ranks)
  (ideal 1.0; seed 003 reached 0.989 from 1 to 12 GPUs).
<option>_ratio (accumulation_4, clip_2, zero, zero3_offload, amp_bf16): epoch seconds of data
  parallelism on 2 ranks with one option (4 micro-batches, clipping to norm 2, ZeRO-1, ZeRO-3 with CPU
  offload, bf16 autocast) / without it (seed 004's table 1 as ratios). On a CPU, offload moves nothing:
  zero3_offload is the cost of sharding (gathering weights per layer, reduce-scattering gradients).
epoch_seconds_<run> (ranks1, ranks2, the options): the medians behind them; steps_per_epoch: global
  batches per epoch.
device: where both rank counts trained: cuda with two GPUs or more (nccl needs one per rank), else cpu.
An epoch's seconds are the median over its epochs after the first (losses.csv, the training loop's own
clock, without start-up); each figure is the median of interleaved repeats, except bf16: on a CPU
without AVX512-BF16/AMX its kernels are emulated and one run of one timed epoch has to do. Prints one
JSON record last (benchmarks/common.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from common import data_parallel_device, emit, interleaved_medians, median_seconds, parser, setup, train
from ganstudy.data.arrays import Split, load_split, save_split
from ganstudy.data.conform import conform
from ganstudy.data.prepare import prepare_dataset

FULL = {"images": 640, "batch_size": 128, "iterations": 3, "repeats": 3}
QUICK = {"images": 8, "batch_size": 8, "iterations": 2, "repeats": 1}
OPTIONS = {
    "accumulation_4": {"accumulation_steps": 4},
    "clip_2": {"clip_norm": 2.0},
    "zero": {"zero": True},
    "zero3_offload": {"zero": 3, "offload": "cpu"},
}


def settings(options: dict, size: dict, iterations: int) -> dict:
    return setup(
        {
            "mode": "data_parallel",
            "network": "dcgan",
            "latent_dim": 100,
            "batch_size": size["batch_size"],
            "iterations": iterations,
            "data_parallel": options,
        }
    )


def main() -> None:
    args = parser(__doc__).parse_args()
    size = QUICK if args.quick else FULL
    device = data_parallel_device()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        prepare_dataset("digits", None, 0.2, 1, folder)
        digits = load_split(folder / "train.npz")
        data = folder / "mnist_size.npz"
        save_split(data, Split(conform(digits.images[: size["images"]], 28, 1), digits.labels[: size["images"]]))
        plain = settings({}, size, size["iterations"])
        runs = {"ranks1": (1, plain), "ranks2": (2, plain)}
        runs |= {name: (2, settings(options, size, size["iterations"])) for name, options in OPTIONS.items()}

        def epoch_seconds(name: str, repeat: int) -> float:
            ranks, run_settings = runs[name]
            return median_seconds(train(ranks, run_settings, data, folder / f"{name}-{repeat}", device))

        median = interleaved_medians(epoch_seconds, runs, size["repeats"])
        median["amp_bf16"] = median_seconds(
            train(2, settings({"amp": "bf16"}, size, 2), data, folder / "amp_bf16", device)
        )
    results = {"efficiency": round(median["ranks1"] / (2 * median["ranks2"]), 3)}
    results |= {f"{name}_ratio": round(median[name] / median["ranks2"], 3) for name in [*OPTIONS, "amp_bf16"]}
    results |= {f"epoch_seconds_{name}": round(seconds, 3) for name, seconds in median.items()}
    results["steps_per_epoch"] = size["images"] // size["batch_size"]
    results["device"] = device
    emit("data_parallel", results, args)


if __name__ == "__main__":
    main()
