"""Stage 4's tables of the training runs: convergence, reproduction, timing."""

from __future__ import annotations

import argparse

from ganstudy.cli.options import (
    Commands,
    baselines,
    baselines_option,
    digits_option,
    json_object,
    statistics_option,
)


def _convergence(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import score_curves
    from ganstudy.stats.convergence import write_convergence

    write_convergence(args.losses, args.setups, args.tolerance, args.degradation, args.out, args.window)
    score_curves(args.losses, args.setups, args.figure, args.window, args.tolerance, args.degradation)


def _convergence_command(commands: Commands) -> None:
    sub = commands.step("convergence", _convergence, "in-training score curves: the convergence table and figure")
    sub.add_argument("--losses", nargs="+", required=True, help="losses.csv of the runs")
    sub.add_argument("--setups", nargs="+", required=True, help="set-ups in figure order")
    sub.add_argument(
        "--window", type=float, required=True, help="last fraction of the iterations whose trend and level are judged"
    )
    sub.add_argument(
        "--tolerance",
        type=float,
        required=True,
        help="projected relative improvement over the window that counts as not converged",
    )
    sub.add_argument(
        "--degradation",
        type=float,
        required=True,
        help="relative worsening of the window's median vs the best level before it that counts as degraded",
    )
    sub.add_argument("--out", required=True, help="convergence.csv")
    sub.add_argument("--figure", required=True, help="score curves (PNG)")


def _reproduction(args: argparse.Namespace) -> None:
    from ganstudy.stats.reproduction import write_reproduction
    from ganstudy.stats.settings import StatisticsSettings

    write_reproduction(
        args.scores, args.references, args.setups, args.out_dir, StatisticsSettings.of(args.settings, "--settings")
    )


def _reproduction_command(commands: Commands) -> None:
    sub = commands.step(
        "reproduction", _reproduction, "the papers' published results beside ours, and the directions between set-ups"
    )
    sub.add_argument("--scores", required=True)
    sub.add_argument("--references", type=json_object, required=True, help="set-up -> metric -> reference, as JSON")
    sub.add_argument("--setups", nargs="+", required=True, help="set-ups in table order")
    statistics_option(sub)
    sub.add_argument("--out-dir", required=True)


def _timing(args: argparse.Namespace) -> None:
    from ganstudy.stats.timing import write_timing

    write_timing(
        args.timings, args.runs, args.setups, baselines(args.baselines), args.out_dir, args.digits, args.references
    )


def _timing_command(commands: Commands) -> None:
    sub = commands.step(
        "timing",
        _timing,
        "training time, speed-up and seconds-per-routine tables (Pérez et al. (2020)), epoch times (Conjevaram Sai "
        "Narayan et al.)",
    )
    sub.add_argument("--timings", required=True, help="aggregate-timings --out")
    sub.add_argument("--runs", required=True, help="aggregate-timings --runs-out")
    sub.add_argument("--setups", nargs="+", required=True, help="set-ups in table order")
    sub.add_argument(
        "--references", type=json_object, default={}, help="set-up -> epoch_seconds/d_loss/g_loss -> reference, as JSON"
    )
    baselines_option(sub)
    digits_option(sub)
    sub.add_argument("--out-dir", required=True)


def register(commands: Commands) -> None:
    """Steps of the tables of the runs' training: convergence, the papers' numbers, timing."""
    _convergence_command(commands)
    _reproduction_command(commands)
    _timing_command(commands)
