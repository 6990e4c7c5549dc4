"""Stage 4's steps: stats, look, sweep-stats, summary."""

from __future__ import annotations

import argparse

from ganstudy.cli.options import (
    Commands,
    digits_option,
    schedule_argument,
    statistics_option,
)


def _stats(args: argparse.Namespace) -> None:
    import os
    import sys

    from ganstudy.core.atomic import read_json
    from ganstudy.stats.looks import judged_pairs, write_looks
    from ganstudy.stats.settings import StatisticsSettings
    from ganstudy.stats.summary import write_stats
    from ganstudy.study.folder import StudyFolder

    settings = StatisticsSettings.of(args.settings, "--settings")
    design = None
    if args.looks:
        record = read_json(args.looks)
        design = {record["metric"]: judged_pairs(record)}
        write_looks(record, args.out_dir, settings.digits)
    else:
        decision = StudyFolder.at(os.path.dirname(args.scores) or ".").decision()
        if os.path.isfile(decision):
            # Run by hand on a scheduled study's scores, the tables would differ from the study's without a word.
            print(
                f"ganstudy stats: the study took its trials on a schedule ({decision}); without --looks {decision} "
                "these tables test every pair as a fixed design (Holm p-values), not at the looks that decided it "
                "(design p-values), so they may differ from the study's own tables",
                file=sys.stderr,
            )
    write_stats(args.scores, args.setups, args.metrics, args.out_dir, settings, args.convergence, design)
    print(f"ganstudy stats: the tables of {', '.join(args.metrics)} are in {args.out_dir}")


def _stats_command(commands: Commands) -> None:
    sub = commands.step("stats", _stats, "summary tables and rank-sum p-value matrices per metric")
    sub.add_argument("--scores", required=True)
    sub.add_argument("--setups", nargs="+", required=True, help="set-ups in table order")
    sub.add_argument("--metrics", nargs="+", required=True)
    statistics_option(sub)
    sub.add_argument("--convergence", help="convergence.csv: flag set-ups whose training had not converged")
    sub.add_argument(
        "--looks", help="trials on a schedule: the study's last look (looks/decision.json), whose decisions it reports"
    )
    sub.add_argument("--out-dir", required=True)


def _look(args: argparse.Namespace) -> None:
    from ganstudy.stats.aggregate import read_scores
    from ganstudy.stats.looks import write_look
    from ganstudy.stats.settings import StatisticsSettings

    settings = StatisticsSettings.of(args.settings, "--settings")
    schedule = args.schedule
    scores = read_scores("", args.scores)
    write_look(scores, args.setups, settings.primary(args.metrics), schedule, args.look, settings, args.seed, args.out)


def _look_command(commands: Commands) -> None:
    sub = commands.step(
        "look",
        _look,
        "one look of a study whose trials are a schedule: the primary metric's comparisons tested group-sequentially "
        "on the trials of every look so far, and whether another round is needed",
    )
    sub.add_argument("--scores", nargs="+", required=True, help="evaluate outputs of (at least) this look's trials")
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--metrics", nargs="+", required=True, help="the study's metrics (the primary one is tested)")
    sub.add_argument(
        "--schedule",
        type=schedule_argument,
        required=True,
        metavar="JSON",
        help="the study's trials: its schedule as JSON",
    )
    sub.add_argument("--look", type=int, required=True, help="which look, from 1")
    sub.add_argument(
        "--seed",
        type=int,
        required=True,
        help="the study's seed: draws the relabellings where they are too many to count",
    )
    statistics_option(sub)
    sub.add_argument("--out", required=True)


def _sweep_stats(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import sweep_plots
    from ganstudy.stats.sweeps import write_sweep_stats

    write_sweep_stats(args.scores, args.sweeps, args.metrics, args.out_dir, args.digits, args.failures)
    sweep_plots(args.scores, args.sweeps, args.metrics, args.figures, args.out_dir)


def _sweep_stats_command(commands: Commands) -> None:
    sub = commands.step(
        "sweep-stats", _sweep_stats, "per sweep: main effects, Kruskal-Wallis per key, interactions, pairwise Holm p"
    )
    sub.add_argument("--scores", required=True)
    sub.add_argument(
        "--sweeps", required=True, help="JSON: each sweep's set-ups and their values (the study's specs/sweeps.json)"
    )
    sub.add_argument("--metrics", nargs="+", required=True)
    digits_option(sub)
    sub.add_argument(
        "--failures", default="worst", help="statistics.failures: what a failed trial counts as (worst or exclude)"
    )
    sub.add_argument(
        "--out-dir", required=True, help="folder of the tables; the study's pairs_<metric>.csv are read there"
    )
    sub.add_argument("--figures", required=True, help="folder of the figures")


def _summary(args: argparse.Namespace) -> None:
    from ganstudy.report.summary_page import write_summary
    from ganstudy.stats.settings import StatisticsSettings

    write_summary(
        args.study_dir,
        args.study,
        args.setups,
        args.metrics,
        args.figures,
        args.out,
        StatisticsSettings.of(args.settings, "--settings"),
        args.looks,
    )


def _summary_command(commands: Commands) -> None:
    sub = commands.step(
        "summary",
        _summary,
        "the study's answer on one page, from its tables: per metric the set-ups ranked, "
        "the best one's tests against each, convergence, the papers' numbers, the protocol, the figures",
    )
    sub.add_argument(
        "--study-dir", required=True, help="results/<study>: scores.csv, convergence.csv and tables/ are read there"
    )
    sub.add_argument("--study", required=True)
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--metrics", nargs="+", required=True)
    sub.add_argument("--figures", nargs="*", default=[], help="the study's figures, to link")
    statistics_option(sub)
    sub.add_argument("--looks", help="trials on a schedule: the study's last look (looks/decision.json)")
    sub.add_argument("--out", required=True)


def register(commands: Commands) -> None:
    """Steps of the score tables and of the page that sums them up."""
    _stats_command(commands)
    _look_command(commands)
    _sweep_stats_command(commands)
    _summary_command(commands)
