"""The commands a person types about a study's config and design: config-reference, validate-config,
plan-trials, scoring-noise; and fetch."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ganstudy.cli import evaluate
from ganstudy.cli.options import (
    Commands,
    command_parser,
    directory_argument,
    schedule_argument,
    threads_option,
)
from ganstudy.errors import GanstudyError

if TYPE_CHECKING:
    from ganstudy.evaluate.rescoring import ScoringJob


def _config_reference(args: argparse.Namespace) -> None:
    from ganstudy.config.reference import write_reference
    from ganstudy.config.schema import SCHEMAS_DIR
    from ganstudy.core.code_version import ROOT

    out = args.out or ROOT / "docs" / "config-reference.md"
    gaps = write_reference(args.schemas or SCHEMAS_DIR, out)
    if gaps:
        raise GanstudyError("the schemas leave keys undocumented: " + "; ".join(gaps) + "; add them to the schema")
    print(f"wrote {out}")


def _config_reference_command(commands: Commands) -> None:
    sub = commands.person(
        "config-reference", _config_reference, "write the configuration reference from the schemas", " (Markdown)"
    )
    sub.add_argument("--schemas", help="the schemas' folder (default: the package's, to which workflow/schemas links)")
    sub.add_argument("--out", help="default: the checkout's docs/config-reference.md")


def _validate_config(args: argparse.Namespace) -> None:
    from ganstudy.config.schema import CONFIG_SCHEMA
    from ganstudy.config.sweep_expansion import sweep_lines
    from ganstudy.config.validate import load_study_config
    from ganstudy.report.status import config_study_folder

    config = load_study_config(args.config, args.schema or CONFIG_SCHEMA)
    folder = config_study_folder(args.config, args.directory)
    assert folder is not None  # load_study_config has read a YAML file
    notices = _planned_notices(args.config, config, _workdir(folder, config))
    print(f"{args.config}: valid; study '{config['study']}' with set-ups {', '.join(config['setups'])}")
    for line in sweep_lines(config["setups"]):
        print(f"  {line}")
    for level, line in notices:
        print(f"  warning: {line}" if level == "warning" else f"  {line}")


def _planned_notices(path: str, config: dict[str, Any], workdir: Path) -> list[tuple[str, str]]:
    """The notices of the plan that ``snakemake -n`` would make of the study in ``workdir``, and what a run
    would change in its folder: every check the plan runs (the site, plugins, ranks against cells or classes,
    batch against the split, ...) raises as it would there. Data whose classes the plan knows only once they
    are prepared are read for them here."""
    import contextlib
    import os

    from ganstudy.core.code_version import ROOT
    from ganstudy.data.loaders import get_dataset
    from ganstudy.plan.classes import class_problems
    from ganstudy.plan.invocation import Invocation
    from ganstudy.plan.study_plan import PlanRefused, StudyPlan

    invocation = Invocation(str(ROOT), (os.path.abspath(path),), dry_run=True, environ=os.environ)
    with contextlib.chdir(workdir):
        try:
            plan = StudyPlan(config, invocation)
        except PlanRefused as refusal:
            raise GanstudyError(f"{path}: {refusal}") from None
    if plan.known_data.classes is None:
        dataset = config["dataset"]
        classes = get_dataset(dataset["name"]).classes_at(dataset["path"])
        if problems := class_problems(config, plan.kind, classes):
            raise GanstudyError(f"{path}: " + "; ".join(problems))
    changes = [plan.files.changed_warning(), plan.files.stale_warning()]
    return plan.notices + [("warning", line) for line in changes if line]


def _workdir(folder: Path, config: dict[str, Any]) -> Path:
    """The workflow's working directory of a study in ``folder``: the paths of its files are relative to it."""
    relative = Path(config["results_dir"]) / config["study"]
    if relative.is_absolute():
        return Path.cwd()
    return Path(*folder.parts[: len(folder.parts) - len(relative.parts)])


def _validate_config_command(commands: Commands) -> None:
    sub = commands.person(
        "validate-config",
        _validate_config,
        "check a study config, its plugins and its data",
        " against the schema and every check of the plan that `snakemake -n` makes (the site, ranks, batches); "
        "list its sweeps' set-ups and what a run would change in its folder",
    )
    sub.add_argument("config")
    directory_argument(sub)
    sub.add_argument("--schema", help="default: the package's config.schema.yaml (workflow/schemas links to it)")


def _plan_trials(args: argparse.Namespace) -> None:
    from ganstudy.config.schema import CONFIG_SCHEMA
    from ganstudy.config.validate import load_study_config
    from ganstudy.report.status import config_study_folder
    from ganstudy.stats.design import schedule_plan, study_design, trials_plan
    from ganstudy.stats.settings import StatisticsSettings
    from ganstudy.stats.summary import markdown_table
    from ganstudy.study.folder import StudyFolder
    from ganstudy.study.trials import StudyTrials

    config = load_study_config(args.config, CONFIG_SCHEMA)
    statistics = config["statistics"]
    info, warnings = study_design(config)
    print("\n".join([*info, *(f"warning: {line}" for line in warnings)]))
    tables = Path(StudyFolder.at(config_study_folder(args.config, args.directory)).tables())
    if not (tables / f"pairs_{config['evaluation']['metrics'][0]}.csv").is_file():
        print(
            f"{tables}: no pairs tables yet; after a run this also gives, per comparison not decided, the trials "
            "per set-up for power 0.8 at the measured effect and their core- or GPU-hours"
        )
        return
    print(
        f"\nAfter the run ({tables}): decided = Holm p < {statistics['alpha']}; cannot = no outcome of these trials "
        "could be; trials_for_power: per set-up, for power 0.8, the median and 80% range over bootstrap copies of "
        "the trials (simulated from each set-up's outcomes); hours_more: what the median adds\n"
    )
    print(markdown_table(trials_plan(tables, statistics["alpha"]), False, statistics["digits"]), end="")
    # The study's own schedule unless another is asked for.
    schedule = args.schedule or StudyTrials.of(config).schedule
    if schedule is not None:
        settings = StatisticsSettings.of(statistics)
        metric = settings.primary(config["evaluation"]["metrics"])
        print(
            f"\nA sequential schedule on {metric} (looks at {', '.join(map(str, schedule.looks))} trials per set-up; "
            f"O'Brien-Fleming spending, group-sequential Holm at {settings.alpha}) against the fixed design of "
            f"{schedule.most}, simulated from each set-up's measured outcomes (2,000 studies each):\n"
        )
        plan = schedule_plan(tables.parent, schedule, metric, settings)
        print(markdown_table(plan, False, statistics["digits"]), end="")
    print(
        f"\nBefore adding trials: ganstudy scoring-noise {args.config} measures how much of the trials' spread is the "
        "scoring's own noise, which more evaluation.samples (rescoring, no training) removes"
    )


def _plan_trials_command(commands: Commands) -> None:
    sub = commands.person(
        "plan-trials",
        _plan_trials,
        "what a study's trials can decide and what a decision needs",
        ": the smallest Holm p of its design and, after a run, the trials and core- or GPU-hours each "
        "undecided comparison needs for power 0.8",
    )
    sub.add_argument("config", help="the study config (its results_dir/study is read after a run)")
    sub.add_argument(
        "--schedule",
        type=schedule_argument,
        metavar="FIRST,STEP,MOST",
        help="after a run: what a sequential schedule (looks at FIRST, FIRST+STEP, ... trials per set-up, up to MOST) "
        "would give on the primary metric against a fixed MOST, simulated from the measured outcomes (default: the "
        "study's own trials, where they are a schedule)",
    )
    directory_argument(sub)


def _scoring_noise(args: argparse.Namespace) -> None:
    import pandas as pd

    from ganstudy.config.schema import CONFIG_SCHEMA
    from ganstudy.config.validate import load_study_config
    from ganstudy.report.status import config_study_folder
    from ganstudy.stats.scoring_noise import comparison_table, noise_lines, noise_table
    from ganstudy.stats.settings import StatisticsSettings
    from ganstudy.stats.summary import markdown_table

    config = load_study_config(args.config, CONFIG_SCHEMA)
    folder = config_study_folder(args.config, args.directory)
    rows, differ = _rescored(args, config, folder)
    draws = pd.DataFrame(rows)
    if args.out:
        draws.to_csv(args.out, index=False)
    metrics, setups = config["evaluation"]["metrics"], list(config["setups"])
    statistics = StatisticsSettings.of(config["statistics"])
    samples = args.samples or config["evaluation"]["samples"]
    noise = noise_table(draws, metrics, setups)
    print(
        f"{folder}: each trial's generator scored on {args.draws + 1} sample sets of {samples} (draw 0: the evaluate "
        "step's noise; scoring_sd: the pooled sd between a trial's sample sets; trial_sd: the sd between the trials' "
        "draw-0 scores; noise_share: scoring_sd^2 / trial_sd^2)\n"
    )
    print(markdown_table(noise, False, statistics.digits), end="")
    print(
        f"\nComparisons by the study's test, Holm over each metric's pairs, with the trials per set-up for power 0.8 "
        f"at the measured effect: on the draw-0 scores and on each trial's mean over its {args.draws + 1} draws "
        "(_means)\n"
    )
    print(markdown_table(comparison_table(draws, metrics, setups, statistics), False, statistics.digits), end="")
    for line in noise_lines(noise, samples):
        print(line)
    if differ:
        print(
            f"draw 0 differs from the score file for {', '.join(differ)}: scored on another machine kind or device "
            "(float results differ), so draw 0 is this machine's"
        )


def _scoring_noise_command(commands: Commands) -> None:
    sub = commands.person(
        "scoring-noise",
        _scoring_noise,
        "how much of a finished study's spread between trials is its scoring's own noise",
        ": every scored trial's generator scored again, as its evaluate step scored it, on fresh sample sets; the "
        "scoring's sd against the trials' sd, and each comparison on the trials' mean scores",
    )
    sub.add_argument("config", help="the study config (its results_dir/study is read)")
    directory_argument(sub)
    sub.add_argument("--draws", type=int, default=5, help="fresh sample sets per trial, beside the evaluate step's")
    sub.add_argument("--samples", type=int, help="images per sample set (default: the study's evaluation.samples)")
    sub.add_argument("--out", help="a CSV of every score of every draw (setup, trial, draw, metric, value)")
    sub.add_argument("--device", choices=["cpu", "cuda"], help="where the extractors run (default: as the study's)")
    threads_option(sub)


def _rescored(args: argparse.Namespace, config: dict[str, Any], folder: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every scored trial's draws as rows (setup, trial, draw, metric, value), each scored as its evaluate step's
    arguments file says; and the trials whose draw 0 is not their score file's score here."""
    import contextlib

    from ganstudy.core.atomic import read_json
    from ganstudy.evaluate.rescoring import scoring_draws
    from ganstudy.plan.study_files import ArgumentsFiles
    from ganstudy.report.export import finished_runs
    from ganstudy.report.status import study_runs
    from ganstudy.study.folder import StudyFolder
    from ganstudy.study.outcomes import diverged

    _, runs, missing = finished_runs(folder, study_runs(config))
    for line in missing:
        print(line)
    arguments = ArgumentsFiles(Path(StudyFolder.at(folder.resolve()).arguments_folder()), made_before=False)
    parser, rows, differ = command_parser([evaluate.register])[0], [], []
    # The arguments files name their paths relative to the workflow's working directory.
    with contextlib.chdir(_workdir(folder, config)):
        for run in runs:
            if run.score_file is None:
                print(f"{run.setup}/trial{run.trial}: not scored yet, left out")
                continue
            if diverged(read_json(run.score_file)):
                print(f"{run.setup}/trial{run.trial}: diverged in training, no generator to draw from: left out")
                continue
            step = parser.parse_args(["evaluate", f"@{arguments.path(f'evaluate/{run.setup}/trial{run.trial}')}"])
            if step.kind != "images":
                raise GanstudyError(
                    f"study {config['study']} is of data kind '{step.kind}': its generators are scored on the fixed "
                    "held-out split, which has no sampling noise to measure"
                )
            job = _scoring_job(step, args.device)
            scored = scoring_draws(job, args.draws, args.samples, args.threads)
            own = read_json(step.out)["scores"]
            if args.samples in (None, job.settings.samples) and any(scored[0][c] != own.get(c) for c in scored[0]):
                differ.append(f"{run.setup}/trial{run.trial}")
            rows += [
                {"setup": run.setup, "trial": run.trial, "draw": d, "metric": m, "value": v}
                for d, scores in enumerate(scored)
                for m, v in scores.items()
            ]
    if not rows:
        raise GanstudyError(f"{folder}: no scored trial yet; run the study first")
    return rows, differ


def _scoring_job(step: argparse.Namespace, device: str | None) -> ScoringJob:
    """The scoring of an evaluate step's generator as its arguments say, on ``device`` if given."""
    from ganstudy.evaluate.extractor import scoring_device
    from ganstudy.evaluate.rescoring import ScoringJob
    from ganstudy.evaluate.settings import EvaluationSettings

    return ScoringJob(
        step.generator,
        EvaluationSettings.of(step.spec.settings, step.spec.path),
        step.spec.seed,
        step.trial,
        step.classifier,
        step.reference,
        step.quality_reference,
        step.real,
        scoring_device(device or step.device),
    )


def _fetch(args: argparse.Namespace) -> None:
    from ganstudy.data.fetch import fetch_dataset

    for path in fetch_dataset(args.name, args.folder, args.mirror):
        print(path)


def _fetch_command(commands: Commands) -> None:
    sub = commands.person(
        "fetch", _fetch, "download a standard data set and verify its checksums", " (the published ones)"
    )
    sub.add_argument("--name", required=True)
    sub.add_argument("--folder", required=True)
    sub.add_argument("--mirror", help="base URL serving the files (default: the published mirrors)")


def register(commands: Commands) -> None:
    """The commands a person types about a study's config, its design and its data."""
    _config_reference_command(commands)
    _validate_config_command(commands)
    _plan_trials_command(commands)
    _scoring_noise_command(commands)
    _fetch_command(commands)
