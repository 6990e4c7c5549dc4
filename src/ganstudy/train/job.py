"""A training job's description: one JSON file per set-up that the workflow writes (rule training_job)
and every trial's ``ganstudy train`` reads, instead of a dozen options on each shell line.

It holds what decides a run's results: the set-up's name and typed settings, the study seed, the input
files and the data's kind. Where and how the ranks compute (device, GPUs, threads) is not in it: the
workflow passes those on the command line (``--compute``), so that moving a study to another site
rewrites no job file and so retrains nothing. The trial and the output folders stay on the command line
too, since they differ per job.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.config.typed import FrozenMapping, as_dict, build
from ganstudy.config.validate import training_settings
from ganstudy.core.atomic import write_json
from ganstudy.data.kinds import kind_for_task
from ganstudy.errors import GanstudyError
from ganstudy.models import get_network


@dataclass(frozen=True)
class JobInputs:
    """The files a training job reads: its training split, and what an in-training score needs (the
    data set's classifier and real statistics; on data of one class without a classifier, the Inception
    weights and their real statistics; or the held-out test split of pairs or showers).

    The study's own files (all but ``inception``) are named relative to the study's folder, the folder that
    holds the job file's ``jobs/``: a study moved, copied or reached through another path is the same job,
    and its runs are not trained again. ``inception`` is the user's file, as the config names it; an
    absolute path is taken as it is."""

    train: str
    classifier: str | None = None
    reference: str | None = None
    held_out: str | None = None
    inception: str | None = None

    def under(self, study: str | os.PathLike[str]) -> JobInputs:
        """The inputs as paths to open, the study's files under ``study``."""
        return replace(
            self,
            **{name: os.path.join(study, path) for name, path in as_dict(self).items() if path and name in STUDY_FILES},
        )


# The inputs that are files of the study, which a job file names relative to the study's folder.
STUDY_FILES = ("train", "classifier", "reference", "held_out")


def older_paths_named(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """``recorded`` (a job file's or a run's record of its job) with each study file that it names by a path
    ending in the name ``current`` gives it (relative to the study's folder) renamed so: releases before this
    one named a study's files by their path from the working directory, as "results/<study>/data/train.npz"
    or an absolute path, and the same file at another path is the same job."""
    inputs, wanted = recorded.get("inputs"), current.get("inputs")
    if not isinstance(inputs, Mapping) or not isinstance(wanted, Mapping):
        return dict(recorded)
    renamed = {
        name: wanted[name]
        if name in STUDY_FILES
        and isinstance(path, str)
        and isinstance(wanted.get(name), str)
        and Path(path).parts[-len(Path(wanted[name]).parts) :] == Path(wanted[name]).parts
        else path
        for name, path in inputs.items()
    }
    return {**recorded, "inputs": renamed}


@dataclass(frozen=True)
class JobCompute:
    """The compute section's options for a training job (workflow/schemas/config.schema.yaml)."""

    device: str = "auto"  # auto: this rank's GPU if it has one
    gpus_per_rank: int = 1  # 2: generator and discriminator on two GPUs (seed 001's layout)
    node_gpus: int = 0  # more than 0: a Slurm/LSF rank that sees no GPU fails instead of training on the CPU
    deterministic: bool = True  # deterministic CUDA kernels (same bits on rerun); no effect on a CPU
    tf32: bool = False  # TF32 float32 products and convolutions on a GPU; no effect on a CPU
    threads: int = 1  # torch threads per rank
    stack_layout: str = "auto"  # a grid's stacked cells: chunks for a CPU's cache, or whole stacks (auto: by device)
    cuda_graphs: str | bool = "auto"  # a grid's stacked updates replayed from CUDA graphs (auto: where they can be)


def compute_options(compute: Mapping[str, Any], threads: int) -> dict[str, Any]:
    """What a study's compute options file says (``with_compute`` reads it): each JobCompute option from
    the study's compute section completed from the site, and the threads per rank of its layout."""
    return {option.name: compute[option.name] for option in fields(JobCompute) if option.name != "threads"} | {
        "threads": threads
    }


@dataclass(frozen=True)
class TrainingJob:
    setup: str
    seed: int
    settings: TrainingSettings
    inputs: JobInputs
    compute: JobCompute = field(default_factory=JobCompute)
    # The kind of the study's data (ganstudy.data.kinds): what scores the generator in training and
    # draws the run's sample figure.
    kind: str = "images"
    # The config sections that made the input files (dataset; classifier and the FID layer where it
    # scores in training): not read by the training, recorded so that a finished run can be compared
    # with the config that names it (ganstudy.plan.changed_runs).
    sources: FrozenMapping = field(default_factory=FrozenMapping)
    # The study's folder that the inputs are named from (read_job: the folder above the job file's); no part
    # of the record.
    study: str = "."

    def files(self) -> JobInputs:
        """The input files to open."""
        return self.inputs.under(self.study)

    def settings_record(self) -> dict[str, Any]:
        """The settings as run.json records them: the set-up's keys, without other tasks' keys."""
        return job_settings(as_dict(self.settings))

    def record(self) -> dict[str, Any]:
        """What decides this job's results, as run.json records it (``job``), in JSON types: the
        compute options are left out, since a run is the same run on any site."""
        return json.loads(
            json.dumps(
                {
                    "setup": self.setup,
                    "seed": self.seed,
                    "settings": self.settings_record(),
                    "inputs": as_dict(self.inputs),
                    "kind": self.kind,
                    "sources": as_dict(self.sources),
                }
            )
        )


def job_settings(setup: dict[str, Any]) -> dict[str, Any]:
    """A validated set-up as its training and scoring jobs see it (ganstudy.config.validate.training_settings): its
    network's task says which task-only keys it keeps."""
    return training_settings(setup, get_network(setup["network"]).task)


def job_description(
    setup: str,
    section: dict[str, Any],
    seed: int,
    inputs: dict[str, str],
    compute: dict[str, Any] | None = None,
    kind: str | None = None,
    sources: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON a job file holds, from a validated ``setups.<name>`` section; typed here first, so a
    description that ``read_job`` would refuse is never written. Without ``kind`` (the study's data
    kind; the workflow gives it), the kind that the set-up's network learns. ``compute`` is for a job
    file written by hand; the workflow gives it on the command line instead (see the module's doc)."""
    if kind is None:
        kind = kind_for_task(get_network(section["network"]).task).name
    description = {
        "setup": setup,
        "seed": seed,
        "settings": job_settings(section),
        "inputs": inputs,
        "kind": kind,
        "sources": sources or {},
    }
    if compute is not None:
        description["compute"] = compute
    build(TrainingJob, description, f"training job of set-up '{setup}'")
    return description


def _json_object(path: str | os.PathLike[str], what: str, rule: str) -> dict[str, Any]:
    """A JSON object the workflow writes (rule ``rule``); a missing or unreadable file names itself."""
    try:
        content = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise GanstudyError(f"{what} {path} does not exist: the workflow writes it (rule {rule})") from None
    except (OSError, ValueError) as exc:
        raise GanstudyError(f"{what} {path} is unreadable ({exc}): delete it and rerun the workflow") from None
    if not isinstance(content, dict):
        raise GanstudyError(f"{what} {path} holds no JSON object: delete it and rerun the workflow")
    return content


def with_compute(job: TrainingJob, path: str | os.PathLike[str]) -> TrainingJob:
    """The job with the compute options of a file (``ganstudy train --compute``; the workflow's
    site/compute.json, rewritten when the site changes without retraining anything)."""
    compute = _json_object(path, "compute options file", "compute_options")
    return replace(job, compute=build(JobCompute, compute, f"compute options file {path}"))


def job_record(description: dict[str, Any]) -> dict[str, Any]:
    """What a job described so records in its runs' run.json (``TrainingJob.record``)."""
    return build(TrainingJob, description, f"training job of set-up '{description['setup']}'").record()


def write_job(path: str | os.PathLike[str], description: dict[str, Any]) -> None:
    write_json(Path(path), description)


def read_job(path: str | os.PathLike[str]) -> TrainingJob:
    """The job a file describes; a missing, unreadable or incomplete file names itself and the key."""
    job = build(TrainingJob, _json_object(path, "training job file", "training_job"), f"training job file {path}")
    return replace(job, study=os.path.dirname(os.path.dirname(os.fspath(path))) or ".")
