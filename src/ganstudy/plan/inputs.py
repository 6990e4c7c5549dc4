"""The files each job of a study reads, by name: a training run's data, classifier and real statistics, what a
scoring job scores against, the files a user provides. Paths only: nothing here reads or writes them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ganstudy.config.pretrained import PRETRAINED, Pretrained, pretrained_file
from ganstudy.config.validate import classifier_settings, dataset_settings
from ganstudy.data.kinds import DataKind
from ganstudy.data.sources import SOURCES
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.metrics import get_metric, pretrained_metrics
from ganstudy.study.folder import StudyFolder
from ganstudy.train.mode_needs import TRAINING_MODES


@dataclass(frozen=True)
class StudyInputs:
    """The input files of a study's jobs, from its validated config. ``classifier``: the study scores with
    the data set's classifier (its own or classifier.weights); ``dry_run``: files the user has not
    provided yet are left out, so that the plan shows the whole study (the plan's check names them)."""

    config: dict[str, Any]
    folder: StudyFolder
    kind: DataKind
    classifier: bool
    dry_run: bool

    @property
    def pretrained(self) -> Pretrained | None:
        """evaluation.extractor when it is a pretrained network (Inception, DINOv2, CLIP); None for the data
        set's classifier."""
        return PRETRAINED.get(self.config["evaluation"]["extractor"])

    @property
    def pretrained_weights(self) -> str | None:
        """The pretrained extractor's weights file (None: the data set's classifier)."""
        return pretrained_file(self.config["evaluation"])[0]

    @property
    def quality_reference(self) -> str:
        """The real images' statistics in the extractor's features."""
        return self.folder.classifier(f"reference_{self.config['evaluation']['extractor']}.npz")

    def train(self, setup_name: str) -> dict[str, str]:
        """A training job's: the prepared data, and for set-ups that score during training the classifier
        and real statistics (data of one class without a classifier: Inception's; kinds scored on the test
        split: that split)."""
        inputs = {"train": self.folder.split("train")}
        setup = self.config["setups"][setup_name]
        scores = TRAINING_MODES.get(setup["mode"]).scores_in_training or setup["score_period"]
        if self.kind.held_out is not None:
            if setup["score_period"]:
                inputs["held_out"] = self.folder.split("test")
        elif scores and self.classifier:
            inputs["classifier"] = self.folder.classifier()
            inputs["reference"] = self.folder.classifier("reference_stats.npz")
        elif scores:
            inputs["inception"] = self.config["evaluation"]["inception_weights"]
            inputs["reference"] = self.quality_reference
        return inputs

    def sources(self, inputs: dict[str, str]) -> dict[str, Any]:
        """The config sections that make a training job's ``inputs``: recorded in its job, they tell a
        finished run made from other data or another classifier (ganstudy.plan.changed_runs)."""
        evaluation = self.config["evaluation"]
        sources: dict[str, Any] = {"dataset": dataset_settings(self.config["dataset"])}
        if "classifier" in inputs:
            sources["classifier"] = classifier_settings(self.config["classifier"])
            sources["reference"] = {key: evaluation[key] for key in ("fid_features", "reference_split")}
        elif "inception" in inputs:
            sources["reference"] = {
                key: evaluation[key] for key in ("extractor", "inception_sha256", "reference_split")
            }
        return sources

    def scored_against(self) -> dict[str, Any]:
        """What every scoring job scores its run's generator against (the same for every run): the held-out
        test split, or the classifier and the real images' statistics, those of a pretrained extractor, and the
        reference split where a metric reads the real images."""
        metrics = self.config["evaluation"]["metrics"]
        inputs: dict[str, Any] = {}
        if self.kind.held_out is not None:
            inputs["held_out"] = self.folder.split("test")
            if self.pretrained and pretrained_metrics(self.kind, metrics):
                inputs["weights"] = self.user_file(self.pretrained_weights)
            return inputs
        if self.classifier:
            inputs["classifier"] = self.folder.classifier()
            inputs["reference"] = self.folder.classifier("reference_stats.npz")
        if self.pretrained:
            inputs["quality"] = self.quality_reference
        # Only where a metric reads the real images: a new input would rescore every finished run.
        if any(get_metric(name).real_images for name in metrics):
            inputs["real"] = self.folder.split(self.config["evaluation"]["reference_split"])
        return inputs

    def scored_with(self, name: str, path: str | None = None) -> list[str]:
        """The scoring jobs' input ``name``: ``path`` (the evaluate rule's, naming the rule that makes it), or
        without one the user's file the plan names; [] where this study's scoring does not read it. A path other
        than the one the scoring command is given is a bug, said so."""
        planned = self.scored_against().get(name, [])
        if path is None or not planned:
            return list(planned) if isinstance(planned, list) else [planned]
        if os.path.normpath(planned) != os.path.normpath(path):
            raise GanstudyError(f"rule evaluate's input {name} is {path}, but scoring reads {planned}")
        return [path]

    def fetched_files(self) -> list[str]:
        """The published files of a standard data set, in dataset.path; empty for other loaders."""
        name, path = self.config["dataset"]["name"], self.config["dataset"]["path"]
        if name not in SOURCES:
            return []
        if not path:
            raise GanstudyError(f"dataset '{name}' needs dataset.path: the folder that holds (or will hold) its files")
        return [os.path.join(path, file) for file in SOURCES[name].md5]

    def user_file(self, path: str | None) -> list[str]:
        """A file the user provides, as a job's input: none while a dry-run plans without it."""
        return [path] if path and (os.path.exists(path) or not self.dry_run) else []

    def dataset_files(self) -> list[str]:
        """What the data's preparation reads: fetched files, or the user's data file or folder."""
        return self.fetched_files() or self.user_file(self.config["dataset"]["path"])
