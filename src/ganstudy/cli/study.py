"""The commands a person types about a study's results: status, placement, export."""

from __future__ import annotations

import argparse
from pathlib import Path

from ganstudy.cli.options import (
    Commands,
    directory_argument,
    named_study,
    study_folder,
)
from ganstudy.errors import GanstudyError


def _status(args: argparse.Namespace) -> None:
    from ganstudy.report.status import status_table, study_status
    from ganstudy.study.folder import StudyFolder

    folder, runs = named_study(args)
    if runs is not None:
        print(f"{folder}:")
    print(status_table(study_status(folder, runs)))
    print(f"training logs: {StudyFolder.at(folder).train_log('<set-up>', '<k>')}")


def _status_command(commands: Commands) -> None:
    sub = commands.person(
        "status",
        _status,
        "where a study stands: each trial's state, iteration, score, ETA",
        " (done, diverged, running, stopped, failed or waiting; reads only results/<study>/ and the config given)",
    )
    sub.add_argument(
        "study",
        help="the study's name (under --results-dir), its folder or its config file (.yaml: its results_dir/study)",
    )
    sub.add_argument("--results-dir", default="results")
    directory_argument(sub)


def _placement(args: argparse.Namespace) -> None:
    from ganstudy.report.placement import placement_report

    text, problems = placement_report(study_folder(args))
    print(text)
    if problems:
        raise SystemExit(f"ganstudy placement: {problems} problem(s) with where ranks ran (listed above)")


def _placement_command(commands: Commands) -> None:
    sub = commands.person(
        "placement",
        _placement,
        "where each rank of a study's finished runs ran",
        ": host, node rank, GPUs given, device; exits non-zero naming what is wrong (reads only results/<study>/runs)",
    )
    sub.add_argument("study", help="the study's name (under --results-dir) or its folder")
    sub.add_argument("--results-dir", default="results")


# --mlflow or --tensorboard without a folder: the one the study's folder keeps for it.
IN_STUDY = ""


def _export(args: argparse.Namespace) -> None:
    from ganstudy.report.export import export_mlflow, export_tensorboard, finished_runs
    from ganstudy.study.folder import StudyFolder

    if args.mlflow is not None and args.mlflow_uri:
        raise GanstudyError("--mlflow DIR and --mlflow-uri URI name two MLflow stores; give one")
    study_dir, planned = named_study(args)
    study, runs, missing = finished_runs(study_dir, planned)
    for line in missing:
        print(line)
    # Where none is named: both, kept with the study (results/<study>/export/).
    anywhere = args.mlflow is not None or args.mlflow_uri or args.tensorboard is not None
    mlflow, tensorboard = (args.mlflow, args.tensorboard) if anywhere else (IN_STUDY, IN_STUDY)
    exports = StudyFolder.at(study_dir)
    mlflow = exports.export("mlflow") if mlflow == IN_STUDY else mlflow
    tensorboard = exports.export("tensorboard") if tensorboard == IN_STUDY else tensorboard
    if mlflow is not None or args.mlflow_uri:
        folder = Path(mlflow).resolve() if mlflow is not None else None
        uri = f"sqlite:///{folder / 'mlflow.db'}" if folder else args.mlflow_uri
        if folder:
            folder.mkdir(parents=True, exist_ok=True)
        counts = export_mlflow(study, runs, uri, (folder / "artifacts").as_uri() if folder else None)
        print(
            f"MLflow ({uri}), experiment ganstudy/{study}: {_counted(counts)}; browse: mlflow ui --backend-store-uri "
            f"{uri}"
        )
    if tensorboard is not None:
        counts = export_tensorboard(study, runs, tensorboard)
        print(f"TensorBoard ({tensorboard}/{study}): {_counted(counts)}; browse: tensorboard --logdir {tensorboard}")


def _export_command(commands: Commands) -> None:
    sub = commands.person(
        "export",
        _export,
        "a study's finished runs into MLflow and/or TensorBoard",
        " (an SQLite store or a server; event files), to browse them there; a rerun mirrors the study "
        "(needs pip install -e '.[export]')",
    )
    sub.add_argument("study", help="the study's name (under --results-dir), its folder or its config file (.yaml)")
    sub.add_argument("--results-dir", default="results")
    directory_argument(sub)
    sub.add_argument(
        "--mlflow",
        metavar="DIR",
        nargs="?",
        const=IN_STUDY,
        help="MLflow store in DIR (DIR/mlflow.db, artifacts in DIR/artifacts); without DIR, or where no destination "
        "is named, the study's export/mlflow",
    )
    sub.add_argument(
        "--mlflow-uri", metavar="URI", help="an MLflow tracking server (http://host:5000) or store URI instead"
    )
    sub.add_argument(
        "--tensorboard",
        metavar="DIR",
        nargs="?",
        const=IN_STUDY,
        help="TensorBoard event files under DIR/<study>/<set-up>/trial<k>; without DIR, or where no destination is "
        "named, the study's export/tensorboard",
    )


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{number} run(s) {what}" for what, number in counts.items())


def register(commands: Commands) -> None:
    """The commands a person types about a study's results."""
    _status_command(commands)
    _placement_command(commands)
    _export_command(commands)
