"""Stage 5's figures."""

from __future__ import annotations

import argparse

from ganstudy.cli.options import (
    Commands,
    baselines,
    baselines_option,
)


def _grid_plot(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import grid_size_plot

    grid_size_plot(args.scores, args.metrics, args.setups, args.out)


def _grid_plot_command(commands: Commands) -> None:
    sub = commands.step("grid-plot", _grid_plot, "scores against grid size, a panel per metric")
    sub.add_argument("--scores", required=True)
    sub.add_argument("--metrics", nargs="+", required=True)
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)


def _routine_plot(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import routine_bars

    routine_bars(args.timings, args.setups, args.out)


def _routine_plot_command(commands: Commands) -> None:
    sub = commands.step("routine-plot", _routine_plot, "seconds per routine, stacked per set-up")
    sub.add_argument("--timings", required=True)
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)


def _speedup_plot(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import speedup_plot

    speedup_plot(args.timings, args.setups, baselines(args.baselines), args.out)


def _speedup_plot_command(commands: Commands) -> None:
    sub = commands.step("speedup-plot", _speedup_plot, "speed-up over one rank, per set-up and per routine")
    sub.add_argument("--timings", required=True)
    sub.add_argument("--setups", nargs="+", required=True)
    baselines_option(sub)
    sub.add_argument("--out", required=True)


def _curves(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import training_curves

    training_curves(args.losses, args.setups, args.out)


def _curves_command(commands: Commands) -> None:
    sub = commands.step("curves", _curves, "training curves: mean losses per iteration and set-up")
    sub.add_argument("--losses", nargs="+", required=True, help="losses.csv of the runs")
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)


def _box_plot(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import box_plot

    box_plot(args.scores, args.metric, args.setups, args.out)


def _box_plot_command(commands: Commands) -> None:
    sub = commands.step("box-plot", _box_plot, "box plot of one metric per set-up")
    sub.add_argument("--scores", required=True)
    sub.add_argument("--metric", required=True)
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)


def _cost_plot(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import cost_plot

    cost_plot(args.scores, args.summary, args.metric, args.setups, args.out)


def _cost_plot_command(commands: Commands) -> None:
    sub = commands.step(
        "cost-plot", _cost_plot, "one metric against each trial's core- or GPU-hours, with the Pareto front"
    )
    sub.add_argument("--scores", required=True)
    sub.add_argument("--summary", required=True, help="tables/summary_<metric>.csv (the medians, costs and front)")
    sub.add_argument("--metric", required=True)
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)


def _kind_figure(args: argparse.Namespace) -> None:
    from ganstudy.contracts import KindFigureDraw
    from ganstudy.data.kinds import get_kind

    kind = get_kind(args.kind)
    kind.part(kind.figure(args.figure).draw, KindFigureDraw)(args.scores, args.setups, args.out)


def _kind_figure_command(commands: Commands) -> None:
    sub = commands.step(
        "kind-figure", _kind_figure, "a figure the study's data kind adds (showers: profiles and sampling fraction)"
    )
    sub.add_argument("--kind", required=True, help="the study's data kind")
    sub.add_argument("--figure", required=True, help="the figure's name (DataKind.figures)")
    sub.add_argument("--scores", nargs="+", required=True, help="evaluate outputs of each set-up's first trial")
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)


def _montage(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import sample_montage

    sample_montage(args.grids, args.setups, args.out)


def _montage_command(commands: Commands) -> None:
    sub = commands.step("montage", _montage, "the set-ups' sample grids side by side")
    sub.add_argument("--grids", nargs="+", required=True)
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)


def register(commands: Commands) -> None:
    """Steps of the figures."""
    _grid_plot_command(commands)
    _routine_plot_command(commands)
    _speedup_plot_command(commands)
    _curves_command(commands)
    _box_plot_command(commands)
    _cost_plot_command(commands)
    _kind_figure_command(commands)
    _montage_command(commands)
