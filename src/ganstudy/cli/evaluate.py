"""Stage 3's steps: evaluate, and the aggregation of scores and timings."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ganstudy.cli.options import (
    Commands,
    device_option,
    spec_option,
    threads_option,
)
from ganstudy.errors import GanstudyError

if TYPE_CHECKING:
    from ganstudy.evaluate.settings import EvaluationSettings


def _evaluate(args: argparse.Namespace) -> None:
    from ganstudy.core.atomic import read_json
    from ganstudy.evaluate.scores import diverged_scores, draw_seed, write_scores
    from ganstudy.evaluate.settings import EvaluationSettings
    from ganstudy.study.outcomes import diverged, divergence_text

    settings = EvaluationSettings.of(args.spec.settings, args.spec.path)
    run = read_json(args.run_record)
    if diverged(run):
        why = f"training diverged ({divergence_text(run)})"
        seed = draw_seed(args.spec.seed, args.trial, 0)
        record = write_scores(args.out, settings, run, args.trial, seed, **diverged_scores(settings, why))
    else:
        record = _score_generator(args, settings)
    print(json.dumps(record["scores"]))


def _evaluate_command(commands: Commands) -> None:
    sub = commands.step(
        "evaluate", _evaluate, "score one trained generator (FID, IS; L1, PSNR, SSIM of a paired one; shower physics)"
    )
    spec_option(sub, "evaluation")
    sub.add_argument("--generator", required=True)
    sub.add_argument("--run-record", required=True, help="the training run's run.json")
    sub.add_argument("--classifier", help="the data set's classifier (kind images)")
    sub.add_argument("--reference", help="reference statistics of the real images (kind images)")
    sub.add_argument(
        "--quality-reference", help="reference statistics of evaluation.extractor when it is not the classifier"
    )
    sub.add_argument(
        "--real", help="the reference split, for metrics that read the real images themselves (kind images)"
    )
    sub.add_argument("--kind", default="images", help="the study's data kind (images, pairs, showers or a plugin's)")
    sub.add_argument(
        "--held-out", help="the prepared test split that generators of a held-out kind (pairs, showers) are scored on"
    )
    sub.add_argument("--trial", type=int, required=True)
    sub.add_argument("--out", required=True)
    threads_option(sub)
    device_option(sub)


def _score_generator(args: argparse.Namespace, settings: EvaluationSettings) -> dict[str, Any]:
    from ganstudy.contracts import HeldOutEvaluation, HeldOutJob
    from ganstudy.data.kinds import get_kind
    from ganstudy.evaluate.extractor import scoring_device
    from ganstudy.evaluate.scores import evaluate_generator

    kind = get_kind(args.kind)
    device = scoring_device(args.device)
    if kind.held_out is not None:
        if not args.held_out:
            raise GanstudyError(
                f"evaluate of data kind '{kind.name}' scores {kind.held_out.what}: pass --held-out (the "
                "prepared test split)"
            )
        evaluate = kind.part(kind.held_out.evaluate, HeldOutEvaluation)
        record = evaluate(
            HeldOutJob(
                args.generator,
                args.run_record,
                args.held_out,
                settings,
                args.spec.seed,
                args.trial,
                args.out,
                args.threads,
                device,
            )
        )
    elif (args.classifier and args.reference) or args.quality_reference:
        record = evaluate_generator(
            args.generator,
            args.run_record,
            args.classifier,
            args.reference,
            settings,
            args.spec.seed,
            args.trial,
            args.out,
            args.threads,
            args.quality_reference,
            args.real,
            device,
        )
    else:
        raise GanstudyError(
            f"evaluate of data kind '{kind.name}' scores with the data set's classifier or a pretrained "
            "network: pass --classifier and --reference, or --quality-reference (evaluation.extractor "
            "inception, dinov2 or clip)"
        )
    return record


def _aggregate(args: argparse.Namespace) -> None:
    from ganstudy.stats.aggregate import aggregate_scores

    aggregate_scores(args.study, args.scores, args.out)


def _aggregate_command(commands: Commands) -> None:
    sub = commands.step("aggregate", _aggregate, "collect every score into one tidy CSV")
    sub.add_argument("--study", required=True)
    sub.add_argument("--out", required=True)
    sub.add_argument("scores", nargs="+", help="evaluate outputs")


def _aggregate_timings(args: argparse.Namespace) -> None:
    from ganstudy.stats.timing import aggregate_timings

    aggregate_timings(args.runs, args.out, args.runs_out)


def _aggregate_timings_command(commands: Commands) -> None:
    sub = commands.step(
        "aggregate-timings",
        _aggregate_timings,
        "collect every run's seconds per rank and routine, and its epoch time and final losses, into two CSVs",
    )
    sub.add_argument("--out", required=True, help="seconds per run, rank and routine")
    sub.add_argument("--runs-out", required=True, help="one row per run: epoch seconds and final losses")
    sub.add_argument("runs", nargs="+", help="run folders (run.json, profile.csv, losses.csv)")


def register(commands: Commands) -> None:
    """Steps of scores of the trained generators and the runs' timings, collected."""
    _evaluate_command(commands)
    _aggregate_command(commands)
    _aggregate_timings_command(commands)
