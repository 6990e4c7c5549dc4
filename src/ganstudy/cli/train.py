"""Stage 2's step: train."""

from __future__ import annotations

import argparse

from ganstudy.cli.options import Commands


def _train(args: argparse.Namespace) -> None:
    from ganstudy.train.job import read_job, with_compute
    from ganstudy.train.progress import configure_logging
    from ganstudy.train.run import run_training

    configure_logging()
    job = read_job(args.job)
    if args.compute is not None:
        job = with_compute(job, args.compute)
    run_training(job, args.trial, args.out_dir, args.checkpoint_dir, args.progress_seconds)


def _train_command(commands: Commands) -> None:
    sub = commands.step("train", _train, "train one set-up for one trial (run under mpiexec/srun/jsrun)")
    sub.add_argument(
        "job",
        help="the set-up's training job file (JSON: settings, seed, inputs, kind), as the workflow "
        "writes it to results/<study>/jobs/<set-up>.json",
    )
    sub.add_argument(
        "--compute",
        metavar="FILE",
        help="JSON: device, gpus_per_rank, node_gpus, deterministic, tf32, stack_layout, cuda_graphs, threads",
    )
    sub.add_argument("--trial", type=int, required=True)
    sub.add_argument("--out-dir", required=True)
    sub.add_argument("--checkpoint-dir", help="where to keep checkpoints and resume from them")
    sub.add_argument(
        "--progress-seconds",
        type=float,
        default=30.0,
        help="most seconds between two progress lines of a trainer in the log (default 30; first and last "
        "iteration always)",
    )


def register(commands: Commands) -> None:
    """Steps of one training job."""
    _train_command(commands)
