"""The files a study's plan writes itself before any job, and the finished runs it moves: each stage's spec
(what decides its outputs), each set-up's training job, the compute options, each job's arguments; which of
them say something else than the config now, and which finished runs no longer match their job. Built
from the plan's parts, reading the study folder and writing nothing; ``apply`` makes the changes, in a run
that executes jobs."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ganstudy.config.validate import classifier_settings, dataset_settings, evaluation_settings
from ganstudy.plan.changed_runs import archive_run, changed_runs
from ganstudy.plan.invocation import Invocation
from ganstudy.plan.study_files import ArgumentsFiles, refresh, stale_files
from ganstudy.study.folder import StudyFolder
from ganstudy.train.job import job_record


def stage_specs(config: dict[str, Any], sweeps: dict[str, Any]) -> dict[str, Any]:
    """Each stage's spec by name: the settings that decide its outputs (and the seed where it draws)."""
    specs: dict[str, Any] = {
        "data": {"dataset": dataset_settings(config["dataset"]), "seed": config["seed"]},
        "classifier": {"classifier": classifier_settings(config["classifier"]), "seed": config["seed"]},
        # Only the layer: training scores with these statistics, so an evaluation edit (metrics, samples,
        # batch size) must not redo them (they are computed in the schema's default batches).
        "reference": {"fid_features": config["evaluation"]["fid_features"]},
        "evaluation": {
            "evaluation": evaluation_settings(config["evaluation"], config["dataset"]["name"]),
            "seed": config["seed"],
        },
    }
    # Each sweep's set-ups and their values, by the set-up declared: what its statistics read.
    return specs | ({"sweeps": sweeps} if sweeps else {})


class PlannedFiles:
    """What the plan writes and moves. ``sweeps``: each sweep's set-ups and their values; ``jobs``: each
    set-up's training job; ``compute_options``: where and how the ranks compute, a file training reads but
    that is no rerun trigger; ``runs``: the study's."""

    def __init__(
        self,
        folder: StudyFolder,
        config: dict[str, Any],
        sweeps: dict[str, Any],
        jobs: dict[str, Any],
        compute_options: dict[str, Any],
        runs: Iterable[tuple[str, int]],
        invocation: Invocation,
    ):
        self.folder, self.invocation = folder, invocation
        self.specs = stage_specs(config, sweeps)
        self.compute_file, self.compute_options = folder.compute_options(), compute_options
        spec_files = {Path(self.spec_file(name)): spec for name, spec in self.specs.items()}
        self.study_files: dict[Path, Any] = spec_files | {
            Path(folder.training_job(name)): job for name, job in jobs.items()
        }
        self.study_files[Path(self.compute_file)] = compute_options
        # Whether the study has results already, read before this run writes anything.
        self.made_before = Path(folder.manifest()).is_file()
        # (The compute options' file is left out: rewriting it redoes nothing.) Read where the plan is made: a
        # cluster job's own Snakemake starts after the run has rewritten them.
        self.stale = (
            [path for path in stale_files(self.study_files) if path != Path(self.compute_file)]
            if invocation.main_process
            else []
        )
        # A dry-run rewrites nothing, so it lists the stages of stale files and changed runs by giving them
        # the study's config file as an input: the edit made it newer than what they made.
        self.edited = (
            [os.path.abspath(path) for path in invocation.config_files if os.path.isfile(path)]
            if invocation.dry_run
            else []
        )
        arguments = Path(folder.arguments_folder())
        self.arguments = ArgumentsFiles(
            arguments, self.made_before, spec_files, root=folder.root, read=invocation.main_process
        )
        # Read by the main process only: a cluster job's own Snakemake starts after the run has moved them.
        expected = {name: job_record(job) for name, job in jobs.items()}
        changed = changed_runs(folder.root, expected, runs) if invocation.main_process else []
        self.changed = {(run.setup, run.trial): run for run in changed}

    def spec_file(self, name: str) -> str:
        return self.folder.spec(name)

    def writes(self, path: str) -> bool:
        """Whether the plan writes ``path`` itself before any job: a spec, job, compute or arguments file."""
        return Path(path) in self.study_files or Path(path) in self.arguments.contents

    def spec_inputs(self, name: str) -> list[str]:
        """A stage's spec file as its input (and in a dry-run the edited config, where the spec is stale)."""
        return [self.spec_file(name)] + (self.edited if Path(self.spec_file(name)) in self.stale else [])

    def arguments_inputs(self, job: str) -> dict[str, Any]:
        """A job's arguments file as its input ``arguments``, and in a dry-run the edited config as ``edited``
        where the file is stale."""
        path = self.arguments.path(job)
        return {"arguments": str(path), "edited": self.edited if path in self.arguments.stale else []}

    def changed_warning(self) -> str | None:
        if not self.changed:
            return None
        moves = "they move" if self.invocation.executing else "a run moves them"
        return (
            f"{len(self.changed)} finished run(s) no longer match the config; {moves} to {self.folder.archive('')} "
            "and train again:\n" + "\n".join(f"  - {changed.line()}" for changed in self.changed.values())
        )

    def stale_warning(self) -> str | None:
        if not (self.invocation.dry_run and self.stale):
            return None
        return (
            "the config has changed what " + ", ".join(map(str, self.stale)) + " describe: a real run rewrites them "
            "before any job and redoes those stages"
        )

    def apply(self, info: Callable[[str], None], warn: Callable[[str], None]) -> None:
        """Rewrite the spec, job and compute files the config has changed, move the finished runs that no
        longer match it into the study's archive, so that Snakemake plans them as missing, and write each
        job's arguments file that is missing or says something else (once every rule has recorded its own)."""
        refresh(self.study_files, self.made_before, info)
        if warning := self.changed_warning():
            warn(f"warning: {warning}")
        planned_at = dt.datetime.now(dt.UTC)
        for changed in self.changed.values():
            for path in archive_run(self.folder.root, changed, planned_at):
                info(f"archived: {path}")
        self.arguments.write_all(info)
