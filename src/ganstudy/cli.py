"""``ganstudy``: one sub-command per workflow step, every path explicit, nothing about Snakemake.

Set-up values come as one JSON argument (``--settings``) holding exactly the validated config
section the step needs, so the step's inputs are visible in the rule and in its provenance.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ganstudy.errors import GanstudyError
from ganstudy.parallel.stop import STOPPED_EXIT_CODE, TrainingStopped

if TYPE_CHECKING:
    from ganstudy.evaluate.scoring_noise import ScoringJob
    from ganstudy.evaluate.settings import EvaluationSettings

ABORT_GRACE_SECONDS = 1.0


def _settings(text: str) -> dict[str, Any]:
    """A JSON object argument (argparse names the option in its message)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _directory_argument(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "-d",
        "--directory",
        help="with a config file: the workflow's working directory (Snakemake's --directory); default: the current "
        "folder, else the nearest folder above the config file that holds the study",
    )


def _study_folder(args: argparse.Namespace) -> Path:
    """A study named by its folder, or by its name under --results-dir."""
    folder = Path(args.study)
    return folder if folder.is_dir() else Path(args.results_dir) / args.study


def _named_study(args: argparse.Namespace) -> tuple[Path, dict[str, Any] | None]:
    """The folder of the study that ``args.study`` names (a config file, a folder, or a name under
    --results-dir) and, for a config, the runs it plans (status.study_runs): those, not the runs of the
    plan that another config of the same study name may have written last."""
    from ganstudy.config import load_study_config
    from ganstudy.schema import CONFIG_SCHEMA
    from ganstudy.status import config_study_folder, study_runs

    folder = config_study_folder(args.study, args.directory)
    if folder is None:
        return _study_folder(args), None
    config = load_study_config(args.study, CONFIG_SCHEMA)
    return folder, study_runs(config["study"], config["setups"], config["trials"])


def _status(args: argparse.Namespace) -> None:
    from ganstudy.status import status_table, study_status
    from ganstudy.study.folder import StudyFolder

    folder, runs = _named_study(args)
    if runs is not None:
        print(f"{folder}:")
    print(status_table(study_status(folder, runs)))
    print(f"training logs: {StudyFolder.at(folder).train_log('<set-up>', '<k>')}")


def _placement(args: argparse.Namespace) -> None:
    from ganstudy.placement import placement_report

    text, problems = placement_report(_study_folder(args))
    print(text)
    if problems:
        raise SystemExit(f"ganstudy placement: {problems} problem(s) with where ranks ran (listed above)")


def _export(args: argparse.Namespace) -> None:
    from ganstudy.report.export import export_mlflow, export_tensorboard, finished_runs

    if not (args.mlflow or args.mlflow_uri or args.tensorboard):
        raise GanstudyError("say where to: --mlflow DIR, --mlflow-uri URI and/or --tensorboard DIR")
    if args.mlflow and args.mlflow_uri:
        raise GanstudyError("--mlflow DIR and --mlflow-uri URI name two MLflow stores; give one")
    study, runs, missing = finished_runs(*_named_study(args))
    for line in missing:
        print(line)
    if args.mlflow or args.mlflow_uri:
        folder = Path(args.mlflow).resolve() if args.mlflow else None
        uri = f"sqlite:///{folder / 'mlflow.db'}" if folder else args.mlflow_uri
        if folder:
            folder.mkdir(parents=True, exist_ok=True)
        counts = export_mlflow(study, runs, uri, (folder / "artifacts").as_uri() if folder else None)
        print(
            f"MLflow ({uri}), experiment ganstudy/{study}: {_counted(counts)}; browse: mlflow ui --backend-store-uri "
            f"{uri}"
        )
    if args.tensorboard:
        counts = export_tensorboard(study, runs, args.tensorboard)
        print(
            f"TensorBoard ({args.tensorboard}/{study}): {_counted(counts)}; browse: tensorboard --logdir "
            f"{args.tensorboard}"
        )


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{number} run(s) {what}" for what, number in counts.items())


def _config_reference(args: argparse.Namespace) -> None:
    from ganstudy.code_version import ROOT
    from ganstudy.config_reference import write_reference
    from ganstudy.schema import SCHEMAS_DIR

    out = args.out or ROOT / "docs" / "config-reference.md"
    gaps = write_reference(args.schemas or SCHEMAS_DIR, out)
    if gaps:
        raise GanstudyError("the schemas leave keys undocumented: " + "; ".join(gaps) + "; add them to the schema")
    print(f"wrote {out}")


def _validate_config(args: argparse.Namespace) -> None:
    from ganstudy.config import load_study_config
    from ganstudy.data.loaders import get_dataset
    from ganstudy.plan.classes import class_problems
    from ganstudy.plan.parts import part_problems, study_kind
    from ganstudy.schema import CONFIG_SCHEMA
    from ganstudy.stats.design import study_design
    from ganstudy.sweeps import sweep_lines

    config = load_study_config(args.config, args.schema or CONFIG_SCHEMA)
    problems = part_problems(config)
    if not problems:
        dataset = config["dataset"]
        problems = class_problems(config, study_kind(config), get_dataset(dataset["name"]).classes_at(dataset["path"]))
    if problems:
        raise GanstudyError(f"{args.config}: " + "; ".join(problems))
    print(f"{args.config}: valid; study '{config['study']}' with set-ups {', '.join(config['setups'])}")
    for line in sweep_lines(config["setups"]):
        print(f"  {line}")
    info, warnings = study_design(config)
    for line in info:
        print(f"  {line}")
    for line in warnings:
        print(f"  warning: {line}")


def _schedule(text: str) -> tuple[int, int, int]:
    """FIRST,STEP,MOST as three whole numbers, 2 <= FIRST <= MOST and STEP >= 1."""
    parts = text.split(",")
    if len(parts) != 3 or not all(part.strip().isdigit() for part in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not FIRST,STEP,MOST (three whole numbers, e.g. 8,4,24)")
    first, step, most = (int(part) for part in parts)
    if not (2 <= first <= most and step >= 1):
        raise argparse.ArgumentTypeError(f"{text!r}: needs 2 <= FIRST <= MOST and STEP >= 1 (e.g. 8,4,24)")
    return first, step, most


def _plan_trials(args: argparse.Namespace) -> None:
    from ganstudy.config import load_study_config
    from ganstudy.schema import CONFIG_SCHEMA
    from ganstudy.stats.design import schedule_plan, study_design, trials_plan
    from ganstudy.stats.sequential import Schedule
    from ganstudy.stats.settings import StatisticsSettings
    from ganstudy.stats.summary import markdown_table
    from ganstudy.status import config_study_folder
    from ganstudy.study.folder import StudyFolder

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
    schedule = Schedule(*args.schedule) if args.schedule else Schedule.of(config["trials"])
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


def _scoring_noise(args: argparse.Namespace) -> None:
    import pandas as pd

    from ganstudy.config import load_study_config
    from ganstudy.schema import CONFIG_SCHEMA
    from ganstudy.stats.scoring_noise import comparison_table, noise_lines, noise_table
    from ganstudy.stats.settings import StatisticsSettings
    from ganstudy.stats.summary import markdown_table
    from ganstudy.status import config_study_folder

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


def _rescored(args: argparse.Namespace, config: dict[str, Any], folder: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every scored trial's draws as rows (setup, trial, draw, metric, value), each scored as its evaluate step's
    arguments file says; and the trials whose draw 0 is not their score file's score here."""
    import contextlib

    from ganstudy.atomic import read_json
    from ganstudy.evaluate.scoring_noise import scoring_draws
    from ganstudy.outcomes import diverged
    from ganstudy.plan.study_files import ArgumentsFiles
    from ganstudy.report.export import finished_runs
    from ganstudy.status import study_runs
    from ganstudy.study.folder import StudyFolder

    _, runs, missing = finished_runs(folder, study_runs(config["study"], config["setups"], config["trials"]))
    for line in missing:
        print(line)
    # The arguments files name their paths relative to the workflow's working directory.
    relative = Path(config["results_dir"]) / config["study"]
    workdir = Path(*folder.parts[: len(folder.parts) - len(relative.parts)]) if not relative.is_absolute() else None
    arguments = ArgumentsFiles(Path(StudyFolder.at(folder.resolve()).arguments_folder()), made_before=False)
    parser, rows, differ = build_parser(), [], []
    with contextlib.chdir(workdir or Path.cwd()):
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
    from ganstudy.evaluate.scoring_noise import ScoringJob
    from ganstudy.evaluate.settings import EvaluationSettings

    return ScoringJob(
        step.generator,
        EvaluationSettings.of(step.settings, "--settings"),
        step.seed,
        step.trial,
        step.classifier,
        step.reference,
        step.quality_reference,
        step.real,
        scoring_device(device or step.device),
    )


def _prepare(args: argparse.Namespace) -> None:
    from ganstudy.data.prepare import prepare_dataset
    from ganstudy.data.settings import DatasetSettings

    s = DatasetSettings.of(args.settings, "--settings")
    manifest = prepare_dataset(
        s.name, s.path, s.test_fraction, args.seed, args.out_dir, s.load_options(), s.smote, args.settings
    )
    print(json.dumps(manifest["class_counts"]))


def _fetch(args: argparse.Namespace) -> None:
    from ganstudy.data.fetch import fetch_dataset

    for path in fetch_dataset(args.name, args.folder, args.mirror):
        print(path)


def _train_classifier(args: argparse.Namespace) -> None:
    from ganstudy.evaluate.classifier import train_classifier
    from ganstudy.evaluate.settings import ClassifierSettings

    settings = ClassifierSettings.of(args.settings, "--settings")
    record = train_classifier(args.train, args.test, settings, args.seed, args.model, args.metrics, args.threads)
    if record["test_accuracy"] is None:
        shares = ", ".join(f"{share:.3f}" for share in record["test_predicted_shares"])
        print(
            f"classifier {record['weights']}: its classes are not the data's; test images per class it assigns: "
            f"{shares}"
        )
    else:
        print(f"classifier test accuracy {record['test_accuracy']:.4f}")


def _reference_stats(args: argparse.Namespace) -> None:
    from ganstudy.evaluate.extractor import classifier_extractor, scoring_device
    from ganstudy.evaluate.scores import reference_statistics
    from ganstudy.evaluate.scoring import quality_extractor
    from ganstudy.evaluate.settings import EvaluationSettings

    settings = EvaluationSettings.of(args.settings, "--settings")
    device = scoring_device(args.device)
    if args.extractor == "classifier":
        if not args.classifier:
            raise GanstudyError("reference-stats --extractor classifier needs --classifier: the data set's classifier")
        extractor, layer = classifier_extractor(args.classifier), settings.fid_features
    else:
        extractor, layer, _ = quality_extractor(settings, args.classifier)
    reference_statistics(args.split, extractor, layer, settings.batch_size, args.out, args.threads, device)


def _train(args: argparse.Namespace) -> None:
    from ganstudy.train.job import read_job, with_compute
    from ganstudy.train.progress import configure_logging
    from ganstudy.train.run import run_training

    configure_logging()
    job = read_job(args.job)
    if args.compute is not None:
        job = with_compute(job, args.compute)
    run_training(job, args.trial, args.out_dir, args.checkpoint_dir, args.progress_seconds)


def _evaluate(args: argparse.Namespace) -> None:
    from ganstudy.atomic import read_json
    from ganstudy.evaluate.scores import diverged_scores, draw_seed, write_scores
    from ganstudy.evaluate.settings import EvaluationSettings
    from ganstudy.outcomes import diverged, divergence_text

    settings = EvaluationSettings.of(args.settings, "--settings")
    run = read_json(args.run_record)
    if diverged(run):
        why = f"training diverged ({divergence_text(run)})"
        seed = draw_seed(args.seed, args.trial, 0)
        record = write_scores(args.out, settings, run, args.trial, seed, **diverged_scores(settings, why))
    else:
        record = _score_generator(args, settings)
    print(json.dumps(record["scores"]))


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
                args.seed,
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
            args.seed,
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


def _aggregate_timings(args: argparse.Namespace) -> None:
    from ganstudy.stats.timing import aggregate_timings

    aggregate_timings(args.runs, args.out, args.runs_out)


def _baselines(pairs: list[str]) -> dict[str, str]:
    try:
        return dict(pair.split("=", 1) for pair in pairs)
    except ValueError:
        raise GanstudyError(f"--baselines takes SETUP=BASELINE pairs, got {pairs}") from None


def _timing(args: argparse.Namespace) -> None:
    from ganstudy.stats.timing import write_timing

    write_timing(
        args.timings, args.runs, args.setups, _baselines(args.baselines), args.out_dir, args.digits, args.references
    )


def _grid_plot(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import grid_size_plot

    grid_size_plot(args.scores, args.metrics, args.setups, args.out)


def _routine_plot(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import routine_bars

    routine_bars(args.timings, args.setups, args.out)


def _speedup_plot(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import speedup_plot

    speedup_plot(args.timings, args.setups, _baselines(args.baselines), args.out)


def _bsub(args: argparse.Namespace) -> None:
    from ganstudy.lsf import Request, submit

    request = Request(
        args.name,
        args.nodes,
        args.minutes,
        args.log_dir,
        args.project,
        args.queue,
        args.alloc_flags,
        args.warning_minutes,
        args.select,
    )
    print(submit(args.jobscript, request))


def _bjobs_status(args: argparse.Namespace) -> None:
    from ganstudy.lsf import status

    print(status(args.job_id))


def _curves(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import training_curves

    training_curves(args.losses, args.setups, args.out)


def _smote_samples(args: argparse.Namespace) -> None:
    from ganstudy.report.images import real_vs_smote

    real_vs_smote(args.train, args.out)


def _anova(args: argparse.Namespace) -> None:
    from ganstudy.stats.anova import write_anova

    print(write_anova(args.split, args.csv, args.markdown).to_string(index=False))


def _stats(args: argparse.Namespace) -> None:
    from ganstudy.atomic import read_json
    from ganstudy.stats.looks import design_pvalues, write_looks
    from ganstudy.stats.settings import StatisticsSettings
    from ganstudy.stats.summary import write_stats

    settings = StatisticsSettings.of(args.settings, "--settings")
    design = None
    if args.looks:
        record = read_json(args.looks)
        design = {record["metric"]: design_pvalues(record)}
        write_looks(record, args.out_dir, settings.digits)
    write_stats(args.scores, args.setups, args.metrics, args.out_dir, settings, args.convergence, design)


def _look(args: argparse.Namespace) -> None:
    from ganstudy.stats.aggregate import read_scores
    from ganstudy.stats.looks import write_look
    from ganstudy.stats.sequential import Schedule
    from ganstudy.stats.settings import StatisticsSettings

    settings = StatisticsSettings.of(args.settings, "--settings")
    schedule = Schedule(*args.schedule)
    scores = read_scores("", args.scores)
    write_look(scores, args.setups, settings.primary(args.metrics), schedule, args.look, settings, args.out)


def _sweep_stats(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import sweep_plots
    from ganstudy.stats.sweeps import write_sweep_stats

    write_sweep_stats(args.scores, args.sweeps, args.metrics, args.out_dir, args.digits, args.failures)
    sweep_plots(args.scores, args.sweeps, args.metrics, args.figures, args.out_dir)


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


def _convergence(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import score_curves
    from ganstudy.stats.convergence import write_convergence

    write_convergence(args.losses, args.setups, args.tolerance, args.degradation, args.out, args.window)
    score_curves(args.losses, args.setups, args.figure, args.window, args.tolerance, args.degradation)


def _reproduction(args: argparse.Namespace) -> None:
    from ganstudy.stats.reproduction import write_reproduction
    from ganstudy.stats.settings import StatisticsSettings

    write_reproduction(
        args.scores, args.references, args.setups, args.out_dir, StatisticsSettings.of(args.settings, "--settings")
    )


def _box_plot(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import box_plot

    box_plot(args.scores, args.metric, args.setups, args.out)


def _cost_plot(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import cost_plot

    cost_plot(args.scores, args.summary, args.metric, args.setups, args.out)


def _kind_figure(args: argparse.Namespace) -> None:
    from ganstudy.contracts import KindFigureDraw
    from ganstudy.data.kinds import get_kind

    kind = get_kind(args.kind)
    kind.part(kind.figure(args.figure).draw, KindFigureDraw)(args.scores, args.setups, args.out)


def _montage(args: argparse.Namespace) -> None:
    from ganstudy.report.figures import sample_montage

    sample_montage(args.grids, args.setups, args.out)


class _Version(argparse.Action):
    """--version: asks git only when given, not at every step's start."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, help="the version and the git commit of this checkout")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from ganstudy.code_version import version_text

        print(version_text())
        parser.exit()


class _Commands:
    """Adds sub-commands: a person's are listed by ``ganstudy --help``, the workflow's steps in its epilog."""

    def __init__(self, parser: argparse.ArgumentParser):
        self._sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
        self.steps: list[str] = []

    def person(
        self, name: str, handler: Callable[[argparse.Namespace], None], help: str, details: str = ""
    ) -> argparse.ArgumentParser:
        """``help``: its line in ``ganstudy --help``; ``details``: the rest of its own --help's description."""
        sub = self._sub.add_parser(name, help=help, description=f"{help}{details}")
        sub.set_defaults(handler=handler)
        return sub

    def step(self, name: str, handler: Callable[[argparse.Namespace], None], help: str) -> argparse.ArgumentParser:
        # No help= : argparse lists only the sub-commands given one.
        sub = self._sub.add_parser(name, description=help)
        sub.set_defaults(handler=handler)
        self.steps.append(name)
        return sub


def _settings_option(sub: argparse.ArgumentParser, section: str) -> None:
    sub.add_argument("--settings", type=_settings, required=True, help=f"the study config's {section} as JSON")


def _digits_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--digits", type=int, default=4, help="significant digits in the Markdown and LaTeX tables")


def _threads_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--threads", type=int, default=1, help="CPU threads for torch")


def _device_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="where the feature extractors run: cpu, or cuda (the job's GPU; the workflow asks for one where "
        "evaluation.extractor is a network and the site has GPUs)",
    )


def _baselines_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--baselines",
        nargs="*",
        default=[],
        metavar="SETUP=BASELINE",
        help="each multi-rank set-up's one-rank run of the same work",
    )


def build_parser() -> argparse.ArgumentParser:
    # @FILE reads arguments from FILE, one per line: how the workflow passes a step its arguments
    # (results/<study>/arguments/<job>.args), so that a rule's command stays short.
    parser = argparse.ArgumentParser(
        prog="ganstudy",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        fromfile_prefix_chars="@",
        description="A GAN study's tools. Run a study with Snakemake (README.md); these commands look at it.",
    )
    parser.add_argument("--version", action=_Version)
    commands = _Commands(parser)
    _study_commands(commands)
    _config_commands(commands)
    _data_steps(commands)
    _train_steps(commands)
    _evaluate_steps(commands)
    _statistics_steps(commands)
    _training_table_steps(commands)
    _figure_steps(commands)
    _lsf_steps(commands)
    parser.epilog = (
        "workflow steps (each one rule of the Snakemake workflow; `ganstudy STEP --help`):\n"
        + textwrap.fill(
            ", ".join(commands.steps), width=100, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False
        )
    )
    return parser


def _study_commands(commands: _Commands) -> None:
    """The commands a person types about a study's results."""
    sub = commands.person(
        "status",
        _status,
        "where a study stands: each trial's state, iteration, score, ETA",
        " (done, running, stopped, failed or waiting; reads only results/<study>/ and the config given)",
    )
    sub.add_argument(
        "study",
        help="the study's name (under --results-dir), its folder or its config file (.yaml: its results_dir/study)",
    )
    sub.add_argument("--results-dir", default="results")
    _directory_argument(sub)

    sub = commands.person(
        "placement",
        _placement,
        "where each rank of a study's finished runs ran",
        ": host, node rank, GPUs given, device; exits non-zero naming what is wrong (reads only results/<study>/runs)",
    )
    sub.add_argument("study", help="the study's name (under --results-dir) or its folder")
    sub.add_argument("--results-dir", default="results")

    sub = commands.person(
        "export",
        _export,
        "a study's finished runs into MLflow and/or TensorBoard",
        " (an SQLite store or a server; event files), to browse them there; a rerun mirrors the study "
        "(needs pip install -e '.[export]')",
    )
    sub.add_argument("study", help="the study's name (under --results-dir), its folder or its config file (.yaml)")
    sub.add_argument("--results-dir", default="results")
    _directory_argument(sub)
    sub.add_argument("--mlflow", metavar="DIR", help="MLflow store in DIR (DIR/mlflow.db, artifacts in DIR/artifacts)")
    sub.add_argument(
        "--mlflow-uri", metavar="URI", help="an MLflow tracking server (http://host:5000) or store URI instead"
    )
    sub.add_argument("--tensorboard", metavar="DIR", help="TensorBoard event files under DIR/<study>/<set-up>/trial<k>")


def _config_commands(commands: _Commands) -> None:
    """The commands a person types about a study's config, its design and its data."""
    sub = commands.person(
        "config-reference", _config_reference, "write the configuration reference from the schemas", " (Markdown)"
    )
    sub.add_argument("--schemas", help="the schemas' folder (default: the package's, to which workflow/schemas links)")
    sub.add_argument("--out", help="default: the checkout's docs/config-reference.md")

    sub = commands.person(
        "validate-config",
        _validate_config,
        "check a study config, its plugins and its data",
        " against the schema; list its sweeps' set-ups",
    )
    sub.add_argument("config")
    sub.add_argument("--schema", help="default: the package's config.schema.yaml (workflow/schemas links to it)")

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
        type=_schedule,
        metavar="FIRST,STEP,MOST",
        help="after a run: what a sequential schedule (looks at FIRST, FIRST+STEP, ... trials per set-up, up to MOST) "
        "would give on the primary metric against a fixed MOST, simulated from the measured outcomes (default: the "
        "study's own trials, where they are a schedule)",
    )
    _directory_argument(sub)

    sub = commands.person(
        "scoring-noise",
        _scoring_noise,
        "how much of a finished study's spread between trials is its scoring's own noise",
        ": every scored trial's generator scored again, as its evaluate step scored it, on fresh sample sets; the "
        "scoring's sd against the trials' sd, and each comparison on the trials' mean scores",
    )
    sub.add_argument("config", help="the study config (its results_dir/study is read)")
    _directory_argument(sub)
    sub.add_argument("--draws", type=int, default=5, help="fresh sample sets per trial, beside the evaluate step's")
    sub.add_argument("--samples", type=int, help="images per sample set (default: the study's evaluation.samples)")
    sub.add_argument("--out", help="a CSV of every score of every draw (setup, trial, draw, metric, value)")
    sub.add_argument("--device", choices=["cpu", "cuda"], help="where the extractors run (default: as the study's)")
    _threads_option(sub)

    sub = commands.person(
        "fetch", _fetch, "download a standard data set and verify its checksums", " (the published ones)"
    )
    sub.add_argument("--name", required=True)
    sub.add_argument("--folder", required=True)
    sub.add_argument("--mirror", help="base URL serving the files (default: the published mirrors)")


def _data_steps(commands: _Commands) -> None:
    """Steps of the data set: prepared splits, the classifier and the real images' statistics."""
    sub = commands.step("prepare", _prepare, "load a data set, normalise it and split it into train/test")
    _settings_option(sub, "dataset section")
    sub.add_argument("--seed", type=int, required=True, help="study seed")
    sub.add_argument("--out-dir", required=True)

    sub = commands.step("train-classifier", _train_classifier, "train the dataset's CNN classifier (FID/IS features)")
    _settings_option(sub, "classifier section")
    sub.add_argument("--train", required=True)
    sub.add_argument("--test", required=True)
    sub.add_argument("--seed", type=int, required=True, help="study seed")
    sub.add_argument("--model", required=True, help="output: classifier weights")
    sub.add_argument("--metrics", required=True, help="output: accuracy and provenance JSON")
    _threads_option(sub)

    sub = commands.step("reference-stats", _reference_stats, "FID statistics of the real images")
    _settings_option(sub, "evaluation section")
    sub.add_argument("--split", required=True)
    sub.add_argument(
        "--classifier", help="the data set's classifier (needed unless --extractor quality is a pretrained network)"
    )
    sub.add_argument(
        "--extractor",
        choices=["classifier", "quality"],
        default="classifier",
        help="classifier: the classifier's statistics (per-class scores, in-training FID); quality: those of "
        "evaluation.extractor (FID, IS, KID, precision, recall)",
    )
    sub.add_argument("--out", required=True)
    _threads_option(sub)
    _device_option(sub)

    sub = commands.step("smote-samples", _smote_samples, "grid of real vs SMOTE training images, a row pair per class")
    sub.add_argument("--train", required=True, help="prepared training split")
    sub.add_argument("--out", required=True)

    sub = commands.step("anova", _anova, "ANOVA of pixel intensity between vs within classes, per channel")
    sub.add_argument("--split", required=True, help="prepared split")
    sub.add_argument("--csv", required=True)
    sub.add_argument("--markdown", required=True)


def _train_steps(commands: _Commands) -> None:
    """Steps of one training job."""
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


def _evaluate_steps(commands: _Commands) -> None:
    """Steps of scores of the trained generators and the runs' timings, collected."""
    sub = commands.step(
        "evaluate", _evaluate, "score one trained generator (FID, IS; L1, PSNR, SSIM of a paired one; shower physics)"
    )
    _settings_option(sub, "evaluation section")
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
    sub.add_argument("--seed", type=int, required=True, help="study seed")
    sub.add_argument("--trial", type=int, required=True)
    sub.add_argument("--out", required=True)
    _threads_option(sub)
    _device_option(sub)

    sub = commands.step("aggregate", _aggregate, "collect every score into one tidy CSV")
    sub.add_argument("--study", required=True)
    sub.add_argument("--out", required=True)
    sub.add_argument("scores", nargs="+", help="evaluate outputs")

    sub = commands.step(
        "aggregate-timings",
        _aggregate_timings,
        "collect every run's seconds per rank and routine, and its epoch time and final losses, into two CSVs",
    )
    sub.add_argument("--out", required=True, help="seconds per run, rank and routine")
    sub.add_argument("--runs-out", required=True, help="one row per run: epoch seconds and final losses")
    sub.add_argument("runs", nargs="+", help="run folders (run.json, profile.csv, losses.csv)")


def _statistics_steps(commands: _Commands) -> None:
    """Steps of the score tables and of the page that sums them up."""
    sub = commands.step("stats", _stats, "summary tables and rank-sum p-value matrices per metric")
    sub.add_argument("--scores", required=True)
    sub.add_argument("--setups", nargs="+", required=True, help="set-ups in table order")
    sub.add_argument("--metrics", nargs="+", required=True)
    _settings_option(sub, "statistics section")
    sub.add_argument("--convergence", help="convergence.csv: flag set-ups whose training had not converged")
    sub.add_argument(
        "--looks", help="trials on a schedule: the study's last look (looks/decision.json), whose decisions it reports"
    )
    sub.add_argument("--out-dir", required=True)

    sub = commands.step(
        "look",
        _look,
        "one look of a study whose trials are a schedule: the primary metric's comparisons tested group-sequentially "
        "on the trials of every look so far, and whether another round is needed",
    )
    sub.add_argument("--scores", nargs="+", required=True, help="evaluate outputs of (at least) this look's trials")
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--metrics", nargs="+", required=True, help="the study's metrics (the primary one is tested)")
    sub.add_argument("--schedule", type=_schedule, required=True, metavar="FIRST,STEP,MOST", help="the study's trials")
    sub.add_argument("--look", type=int, required=True, help="which look, from 1")
    _settings_option(sub, "statistics section")
    sub.add_argument("--out", required=True)

    sub = commands.step(
        "sweep-stats", _sweep_stats, "per sweep: main effects, Kruskal-Wallis per key, interactions, pairwise Holm p"
    )
    sub.add_argument("--scores", required=True)
    sub.add_argument(
        "--sweeps", required=True, help="JSON: each sweep's set-ups and their values (the study's specs/sweeps.json)"
    )
    sub.add_argument("--metrics", nargs="+", required=True)
    _digits_option(sub)
    sub.add_argument(
        "--failures", default="worst", help="statistics.failures: what a failed trial counts as (worst or exclude)"
    )
    sub.add_argument(
        "--out-dir", required=True, help="folder of the tables; the study's pairs_<metric>.csv are read there"
    )
    sub.add_argument("--figures", required=True, help="folder of the figures")

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
    _settings_option(sub, "statistics section")
    sub.add_argument("--looks", help="trials on a schedule: the study's last look (looks/decision.json)")
    sub.add_argument("--out", required=True)


def _training_table_steps(commands: _Commands) -> None:
    """Steps of the tables of the runs' training: convergence, the papers' numbers, timing."""
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

    sub = commands.step(
        "reproduction", _reproduction, "the papers' published results beside ours, and the directions between set-ups"
    )
    sub.add_argument("--scores", required=True)
    sub.add_argument("--references", type=_settings, required=True, help="set-up -> metric -> reference, as JSON")
    sub.add_argument("--setups", nargs="+", required=True, help="set-ups in table order")
    _settings_option(sub, "statistics section")
    sub.add_argument("--out-dir", required=True)

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
        "--references", type=_settings, default={}, help="set-up -> epoch_seconds/d_loss/g_loss -> reference, as JSON"
    )
    _baselines_option(sub)
    _digits_option(sub)
    sub.add_argument("--out-dir", required=True)


def _figure_steps(commands: _Commands) -> None:
    """Steps of the figures."""
    sub = commands.step("grid-plot", _grid_plot, "scores against grid size, a panel per metric")
    sub.add_argument("--scores", required=True)
    sub.add_argument("--metrics", nargs="+", required=True)
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)

    sub = commands.step("routine-plot", _routine_plot, "seconds per routine, stacked per set-up")
    sub.add_argument("--timings", required=True)
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)

    sub = commands.step("speedup-plot", _speedup_plot, "speed-up over one rank, per set-up and per routine")
    sub.add_argument("--timings", required=True)
    sub.add_argument("--setups", nargs="+", required=True)
    _baselines_option(sub)
    sub.add_argument("--out", required=True)

    sub = commands.step("curves", _curves, "training curves: mean losses per iteration and set-up")
    sub.add_argument("--losses", nargs="+", required=True, help="losses.csv of the runs")
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)

    sub = commands.step("box-plot", _box_plot, "box plot of one metric per set-up")
    sub.add_argument("--scores", required=True)
    sub.add_argument("--metric", required=True)
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)

    sub = commands.step(
        "cost-plot", _cost_plot, "one metric against each trial's core- or GPU-hours, with the Pareto front"
    )
    sub.add_argument("--scores", required=True)
    sub.add_argument("--summary", required=True, help="tables/summary_<metric>.csv (the medians, costs and front)")
    sub.add_argument("--metric", required=True)
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)

    sub = commands.step(
        "kind-figure", _kind_figure, "a figure the study's data kind adds (showers: profiles and sampling fraction)"
    )
    sub.add_argument("--kind", required=True, help="the study's data kind")
    sub.add_argument("--figure", required=True, help="the figure's name (DataKind.figures)")
    sub.add_argument("--scores", nargs="+", required=True, help="evaluate outputs of each set-up's first trial")
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)

    sub = commands.step("montage", _montage, "the set-ups' sample grids side by side")
    sub.add_argument("--grids", nargs="+", required=True)
    sub.add_argument("--setups", nargs="+", required=True)
    sub.add_argument("--out", required=True)


def _lsf_steps(commands: _Commands) -> None:
    """Steps of LSF's submission and status commands of the summit profile."""
    sub = commands.step("bsub", _bsub, "submit a Snakemake job script to LSF (profiles/summit); prints the job id")
    sub.add_argument("--name", required=True)
    sub.add_argument("--nodes", type=int, required=True, help="whole nodes (-nnodes)")
    sub.add_argument("--minutes", type=int, required=True, help="wall time (-W)")
    sub.add_argument("--project", help="-P; empty: LSB_DEFAULTPROJECT")
    sub.add_argument("--queue", help="-q; empty: LSB_DEFAULTQUEUE")
    sub.add_argument("--alloc-flags", help='-alloc_flags, e.g. "gpumps smt4"')
    sub.add_argument("--select", help='-R "select[...]": the node kind (the site\'s constraint); empty: any node')
    sub.add_argument("--log-dir", default="logs/lsf")
    sub.add_argument(
        "--warning-minutes", type=int, default=0, help="-wa USR1 -wt: signal the job this long before its wall time"
    )
    sub.add_argument("jobscript")

    sub = commands.step("bjobs-status", _bjobs_status, "running, success or failed for an LSF job id (profiles/summit)")
    sub.add_argument("job_id")


def _mpi_peers() -> int:
    """Ranks of this job besides us, if the command started MPI; a failing rank must then end them all."""
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi.COMM_WORLD.Get_size() - 1 if mpi is not None and mpi.Is_initialized() else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.handler(args)
    except TrainingStopped as exc:
        # Every rank stops at the same iteration, after its checkpoint: an orderly end, no abort.
        print(f"ganstudy {args.command}: {exc}", file=sys.stderr, flush=True)
        return STOPPED_EXIT_CODE
    except GanstudyError as exc:
        print(f"ganstudy {args.command}: error: {exc}", file=sys.stderr, flush=True)
        code = 2
    except BaseException:
        if not _mpi_peers():
            raise
        traceback.print_exc()
        code = 1
    else:
        return 0
    if _mpi_peers():
        # Peers blocked in a collective would otherwise wait until the wall-time limit. The launcher
        # forwards a rank's output asynchronously and an abort right after the print can drop the
        # message (seen once in the test suite: exit code 2, empty stderr): give it a moment first.
        time.sleep(ABORT_GRACE_SECONDS)
        sys.modules["mpi4py.MPI"].COMM_WORLD.Abort(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
