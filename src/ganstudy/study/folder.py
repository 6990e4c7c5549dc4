"""Every path under a study's folder, ``results/<study>/``, named once. The workflow's rules, the planner, status,
export, the statistics and the CLI ask this module; a test fails where a path under the folder is spelled
anywhere else.

A method's arguments default to Snakemake's wildcards (``{setup}``, ``{trial}``, ...), so that the rules take
their output patterns from here as they are, and code that knows the values passes them. Paths are strings, as
Snakemake names files; code that opens them wraps them in ``Path``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# The wildcards a rule's pattern leaves for Snakemake to fill.
SETUP, TRIAL = "{setup}", "{trial}"
# The planner's settings records, one per stage (StudyFolder.spec).
SPECS = "specs"


@dataclass(frozen=True)
class StudyFolder:
    """The folder of one study: ``root`` is ``<results_dir>/<study>`` as the workflow names it (relative to its
    working directory), or wherever the study's folder is found."""

    root: str

    @classmethod
    def at(cls, folder: str | os.PathLike[str]) -> StudyFolder:
        return cls(os.fspath(folder))

    def _(self, *parts: object) -> str:
        return "/".join((self.root, *map(str, parts)))

    def relative(self, path: str) -> str:
        """A path under the folder, relative to it (how the study's files name each other, so that the folder
        may move); any other path as it is."""
        return path[len(self.root) + 1 :] if path.startswith(f"{self.root}/") else path

    # The planner's files: what each job is told, and the plan the status step reads.
    def spec(self, name: object = "{spec}") -> str:
        """A settings record whose change reruns the jobs that read it (specs/<name>.json)."""
        return self._(SPECS, f"{name}.json")

    def arguments_folder(self) -> str:
        """Each job's arguments file, arguments/<job>.args (ganstudy.plan.study_files.ArgumentsFiles)."""
        return self._("arguments")

    def training_job(self, setup: object = SETUP) -> str:
        return self._("jobs", f"{setup}.json")

    def compute_options(self) -> str:
        """The study's compute section, completed from the site."""
        return self._("site", "compute.json")

    def plan(self) -> str:
        """The planned set-ups and trials, for status and export (ganstudy.report.status.write_plan)."""
        return self._("plan.json")

    def lock(self) -> str:
        """One run per study at a time (ganstudy.plan.study_lock)."""
        return self._(".lock")

    # Stage 1: the prepared data and its classifier.
    def split(self, name: object = "{split}") -> str:
        """A prepared split: train, test (data/<name>.npz), or partitions (SMOTE's classes)."""
        return self._("data", f"{name}.npz")

    def manifest(self) -> str:
        return self._("data", "manifest.json")

    def classifier(self, name: str = "classifier.pt") -> str:
        """The data set's classifier (classifier.pt, its record classifier.json) and the real images' statistics
        (reference_stats.npz of its logits; reference_<extractor>.npz of a pretrained extractor)."""
        return self._("classifier", name)

    # Stage 2: training.
    def runs(self) -> str:
        """Every trial's training run, by set-up."""
        return self._("runs")

    def run(self, setup: object = SETUP, trial: object = TRIAL) -> str:
        """A trial's training run: generator.pt, losses.csv, samples.png, profile.csv, run.json, a mode's tables."""
        return f"{self.runs()}/{setup}/trial{trial}"

    def run_file(self, name: str, setup: object = SETUP, trial: object = TRIAL) -> str:
        return f"{self.run(setup, trial)}/{name}"

    def checkpoints(self, setup: object = SETUP, trial: object = TRIAL) -> str:
        """A run's checkpoints, and once it finished its outputs' copy (ganstudy.core.checkpoint.FinishedOutputs)."""
        return self._("checkpoints", setup, f"trial{trial}")

    # Stage 3: scoring.
    def score(self, setup: object = SETUP, trial: object = TRIAL) -> str:
        """A trial's score file."""
        return self._("scores", setup, f"trial{trial}.json")

    # Trials on a schedule: the looks and what they decided.
    def look(self, look: object = "{look}") -> str:
        return self._("looks", f"look{look}.json")

    def decision(self) -> str:
        return self._("looks", "decision.json")

    def taken(self, kind: str) -> str:
        """The files of the runs the looks took, one per line (scores, losses, runs), read as ``@FILE``."""
        return self._("looks", f"{kind}.args")

    # Stage 4: the statistics, their tables and figures, and the answer.
    def table(self, name: str = "{table}", extension: str = "csv") -> str:
        """tables/<name>.<extension> (csv, md, tex)."""
        return self._("tables", f"{name}.{extension}")

    def tables(self) -> str:
        return self._("tables")

    def figure(self, name: str = "{figure}") -> str:
        return self._("figures", f"{name}.png")

    def scores_table(self) -> str:
        """Every score of every trial, one row per trial and metric."""
        return self._("scores.csv")

    def convergence(self) -> str:
        return self._("convergence.csv")

    def timings(self) -> str:
        return self._("timings.csv")

    def runs_table(self) -> str:
        """One row per run: its training seconds per iteration and final losses."""
        return self._("runs.csv")

    def answer(self) -> str:
        """The study's answer page."""
        return self._("summary.md")

    def report_answer(self) -> str:
        """The HTML report's first page: the answer as its description (ganstudy.report.report_page)."""
        return self._("report", "answer.rst")

    def report_metadata(self) -> str:
        return self._("report", "metadata.yaml")

    # What a run leaves behind.
    def export(self, browser: str) -> str:
        """Where ``ganstudy export`` puts the study's runs for ``browser`` (mlflow, tensorboard) by default."""
        return self._("export", browser)

    def logs(self) -> str:
        """Every job's log."""
        return self._("logs")

    def log(self, name: object) -> str:
        """A job's log, logs/<name>.log (name may hold folders: train/<set-up>/trial<k>)."""
        return f"{self.logs()}/{name}.log"

    def train_log(self, setup: object = SETUP, trial: object = TRIAL) -> str:
        return self.log(f"train/{setup}/trial{trial}")

    def archive(self, name: str) -> str:
        """Where the runs that no longer match the config are moved (archive/<when>-<plan>)."""
        return self._("archive", name)

    def archived(self, setup: object = SETUP, trial: object = TRIAL) -> str:
        """In an archive's folder: why and when a trial's run was moved there."""
        return self._("archived", setup, f"trial{trial}.json")


def of_setup(path: str | os.PathLike[str], setup: str) -> bool:
    """Whether ``path`` (a run's or its score's file) belongs to a trial of ``setup``."""
    parts = os.fspath(path).replace(os.sep, "/").split("/")
    return any(kind in ("runs", "scores") and name == setup for kind, name in zip(parts, parts[1:]))


def is_spec(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is one of a study's settings records (StudyFolder.spec)."""
    return os.path.basename(os.path.dirname(os.fspath(path))) == SPECS
