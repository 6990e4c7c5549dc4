"""Host work per grid iteration, counted instead of timed: what makes a GPU wait on Python (issue 46).

A GPU runs one kernel per torch operator and stops the host at every read of a value on the device. A
rank's grid iteration that dispatches thousands of small operators per cell, or reads a loss back per
cell, is launch-bound on a GPU however fast the GPU is. Both are counted here on any device, the CPU
included, so that the figures that decide GPU speed can be measured where no GPU is:

- operators: every aten operator call that reaches torch's dispatcher (a TorchDispatchMode counts them;
  views and in-place updates included), i.e. a kernel launch on a GPU;
- host_reads: every call that copies a tensor's value to the host (Tensor.item, .tolist, .cpu,
  float(), int(), bool(), index()). On a GPU each one waits for the device; on a CPU they are where a
  GPU run would wait.

One iteration's counts are a run of 2 iterations minus a run of 1 (same start, same end: set-up, the
first exchange and the final scoring cancel out), each run in this process on one MPI rank and one torch
thread, with stacked cells (grid.batch_cells, the default), in each layout of their work
(compute.stack_layout): ``cache``, the CPU's, and ``whole``, the GPU's, counted here on the CPU: the
operators a GPU would launch and the reads it would wait for. The perceptron is stacked in either
layout (``StackedMLP``); dcgan trains cell by cell in the cache layout and stacked in the whole one
(``StackedNetwork``, its dropout masks keyed per row).

Cases: the thesis's four-layer perceptron on digits in 2x2, 6x6 and 18x18 grids, and 2x2 and 6x6 grids
(dcgan_cells 36) of the convolutional dcgan, with the default study's cell settings (batch 50, fitness and
scores on 250 samples, the whole training split per cell). For each: per iteration and per cell, and the
growth from 2x2 to 18x18 (operators_growth_18x18_<layout>, host_reads_growth_18x18_<layout>: 81 times the
cells; 1.0 would be work that does not grow with the cells; with both grids counted), and the operators
that grow most in the whole layout (top_operators_per_cell_18x18_whole: the extra operators per extra
cell, by name). For dcgan, the operators and host reads that each cell past the small grid's adds
(operators_added_per_cell_dcgan_<layout>, reads_added_per_cell_dcgan_<layout>;
top_operators_added_per_cell_dcgan_whole). --quick: the same 4LP grids and 1x2 and 2x2 dcgan grids, one
batch per cell (grid.data_ratio 0.01), 50 samples, 4LP networks of 16 hidden units, a 1-epoch classifier.
``CASE ...`` and ``--layouts`` count a part (full mode takes hours on a busy 2-core machine). Prints one
JSON record last.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from common import SETUP, cell_count, emit, parser, setup
from ganstudy.data.prepare import prepare_dataset
from ganstudy.parallel.dispatch import OperatorCounter, counting_host_reads
from ganstudy.train.job import job_description, read_job, write_job
from ganstudy.train.run import run_training
from grid_scaling import score_inputs

# The convolutional grid's shape is the size's (its cells train one after another: minutes per iteration).
CASES = {
    "4lp_2x2": ("perceptron4", "2x2"),
    "4lp_6x6": ("perceptron4", "6x6"),
    "4lp_18x18": ("perceptron4", "18x18"),
    "dcgan": ("dcgan", None),
    "dcgan_small": ("dcgan", None),
}
FULL = {
    "samples": 250,
    "data_ratio": 1.0,
    "network": {},
    "classifier_epochs": 5,
    "dcgan_shape": "6x6",
    "dcgan_small_shape": "2x2",
}
LAYOUTS = ("cache", "whole")
QUICK = {
    "samples": 50,
    "data_ratio": 0.01,
    "network": {"hidden_units": 16, "latent_dim": 8},
    "classifier_epochs": 1,
    "dcgan_shape": "2x2",
    "dcgan_small_shape": "1x2",
}


@dataclass(frozen=True)
class Counts:
    operators: int
    host_reads: int
    flops: int  # of matrix products and convolutions (torch.utils.flop_counter)

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.operators - other.operators, self.host_reads - other.host_reads, self.flops - other.flops)


def grid_keys(network: str, shape: str, iterations: int, size: dict) -> dict:
    """A grid set-up with the default study's cell settings (batch 50) on ``size``'s samples and data."""
    return {
        "mode": "grid",
        "network": network,
        "iterations": iterations,
        "batch_size": 50,
        "lr": 5e-4,
        **size["network"],
        "grid": {
            "shape": shape,
            "data_ratio": size["data_ratio"],
            "fitness_sample_size": size["samples"],
            "score_sample_size": size["samples"],
        },
    }


def run_files(folder: Path) -> dict[str, str]:
    """A grid run's input files in ``folder``: its training split, classifier and reference statistics."""
    return {
        "train": str(folder / "train.npz"),
        "classifier": str(folder / "classifier.pt"),
        "reference": str(folder / "reference.npz"),
    }


def job_file(
    keys: dict,
    files: dict[str, str],
    out: Path,
    device: str,
    tf32: bool = False,
    layout: str = "auto",
    graphs: str | bool = "auto",
) -> Path:
    """The job file of a one-rank run of set-up ``keys`` on ``device`` (compute.tf32, compute.stack_layout,
    compute.cuda_graphs), written beside ``out``."""
    job = out.parent / f"{out.name}.job.json"
    compute = {"threads": 1, "device": device, "tf32": tf32, "stack_layout": layout, "cuda_graphs": graphs}
    write_job(job, job_description(SETUP, setup(keys), 1, files, compute))
    return job


def counted_run(
    keys: dict,
    files: dict[str, str],
    out: Path,
    device: str = "cpu",
    layout: str = "auto",
    graphs: str | bool = "auto",
) -> tuple[Counts, Counter[str]]:
    """Operators dispatched, host reads and FLOPs of a whole training run of set-up ``keys`` on this
    process's one rank; and the operators by name."""
    job = job_file(keys, files, out, device, layout=layout, graphs=graphs)
    operators, reads, flops = OperatorCounter(), Counter(), FlopCounterMode(display=False)
    with flops, operators, counting_host_reads(reads):
        run_training(read_job(job), 0, out)
    return Counts(sum(operators.operators.values()), sum(reads.values()), flops.get_total_flops()), operators.operators


def iteration_counts(
    keys: dict,
    files: dict[str, str],
    tmp: str,
    name: str,
    device: str = "cpu",
    layout: str = "auto",
    graphs: str | bool = "auto",
) -> tuple[Counts, Counter[str]]:
    """One iteration's counts, and its operators by name: a run of 2 iterations minus a run of 1."""
    (one, one_names), (two, two_names) = (
        counted_run({**keys, "iterations": n}, files, Path(tmp, f"{name}-{n}"), device, layout, graphs) for n in (1, 2)
    )
    return two - one, two_names - one_names


def per_iteration(name: str, size: dict, folder: Path, tmp: str, layout: str) -> tuple[dict[str, float], Counter[str]]:
    """Case ``name``'s counts per iteration and per cell in ``layout``, and its operators by name."""
    network, shape = CASES[name]
    shape = shape or size[f"{name}_shape"]
    counts, names = iteration_counts(
        grid_keys(network, shape, 1, size), run_files(folder), tmp, f"{name}-{layout}", layout=layout
    )
    cells, case = cell_count(shape), f"{name}_{layout}"
    return {
        f"operators_per_iteration_{case}": counts.operators,
        f"operators_per_cell_{case}": round(counts.operators / cells, 1),
        f"host_reads_per_iteration_{case}": counts.host_reads,
        f"host_reads_per_cell_{case}": round(counts.host_reads / cells, 2),
    }, names


def growing_operators(small: Counter[str], large: Counter[str], extra_cells: int, top: int = 6) -> dict[str, float]:
    """The operators whose count grows most from ``small`` to ``large``: extra calls per extra cell."""
    growth = {name: (large[name] - small[name]) / extra_cells for name in large}
    return {name: round(per_cell, 1) for name, per_cell in sorted(growth.items(), key=lambda item: -item[1])[:top]}


def main() -> None:
    arguments = parser(__doc__)
    arguments.add_argument("cases", nargs="*", metavar="CASE", help=f"cases to count (default: all of {list(CASES)})")
    arguments.add_argument(
        "--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS), help="layouts to count in (default: both)"
    )
    args = arguments.parse_args()
    if unknown := sorted(set(args.cases) - set(CASES)):
        arguments.error(f"unknown case(s) {', '.join(unknown)}; the cases are {', '.join(CASES)}")
    cases = args.cases or list(CASES)
    size = QUICK if args.quick else FULL
    torch.set_num_threads(1)
    results: dict[str, float | str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp, "digits")
        prepare_dataset("digits", None, 0.2, 1, folder)
        score_inputs(folder, size["classifier_epochs"])
        names = {}
        for layout in args.layouts:
            for name in cases:
                counts, names[name, layout] = per_iteration(name, size, folder, tmp, layout)
                results |= counts
        if "dcgan" in cases:
            results["dcgan_cells"] = cell_count(size["dcgan_shape"])
    for layout in args.layouts:
        if ("4lp_2x2", layout) in names and ("4lp_18x18", layout) in names:
            for count in ("operators", "host_reads"):
                small, large = (results[f"{count}_per_iteration_4lp_{shape}_{layout}"] for shape in ("2x2", "18x18"))
                results[f"{count}_growth_18x18_{layout}"] = round(large / small, 2)
    if ("4lp_2x2", "whole") in names and ("4lp_18x18", "whole") in names:
        extra_cells = cell_count("18x18") - cell_count("2x2")
        results["top_operators_per_cell_18x18_whole"] = growing_operators(
            names["4lp_2x2", "whole"], names["4lp_18x18", "whole"], extra_cells
        )
    for layout in args.layouts:
        if ("dcgan_small", layout) in names and ("dcgan", layout) in names:
            extra_cells = cell_count(size["dcgan_shape"]) - cell_count(size["dcgan_small_shape"])
            for count, key in (("operators", "operators"), ("host_reads", "reads")):
                small, large = (results[f"{count}_per_iteration_{name}_{layout}"] for name in ("dcgan_small", "dcgan"))
                results[f"{key}_added_per_cell_dcgan_{layout}"] = round((large - small) / extra_cells, 1)
            if layout == "whole":
                results["top_operators_added_per_cell_dcgan_whole"] = growing_operators(
                    names["dcgan_small", layout], names["dcgan", layout], extra_cells
                )
    results["device"] = "cpu"
    emit("grid_dispatch", results, args)


if __name__ == "__main__":
    main()
