"""Where a study's scoring jobs run and what they ask the scheduler for: ``evaluate`` (one per run) and
``quality_statistics`` (the real images in a pretrained extractor's features).

A scoring job whose extractor is a network (evaluation.extractor inception, dinov2 or clip, read by one of
its metrics) gets one GPU, and a GPU's share of a node's cores, where the site has GPUs and compute.device
is not cpu; it is started by the site's launcher, as a training rank is (jsrun is the only way to a GPU
on Summit). Every other scoring job runs on the CPU with the jobs' threads. Memory and wall time grow with
the images a job holds and scores (ganstudy.core.resources), known once the data are prepared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ganstudy.config.pretrained import PRETRAINED, pretrained_file
from ganstudy.core.resources import scoring_memory_mb, scoring_minutes
from ganstudy.data.kinds import DataKind
from ganstudy.evaluate.metrics import pretrained_metrics
from ganstudy.plan.launchers import Launcher, RankLayout

# What each scoring job asked for before its size was estimated (memory MB, wall-time minutes), kept as its
# least: the estimate leaves out a held-out kind's generator (pix2pix's U-Net), which runs on the CPU beside
# the extractor.
LEAST = {"evaluate": (2000, 15), "quality_statistics": (4000, 60)}


@dataclass(frozen=True)
class ScoredImages:
    """What one scoring job holds and extracts features of: images of ``values`` values each."""

    held: int
    extracted: int
    values: int


@dataclass(frozen=True)
class ScoringLayout:
    """The scoring jobs of a study, from its validated config (``compute`` completed from the site) and its
    data kind; ``cpu_threads``: the threads of a job on the CPU (StudyLayout.threads)."""

    config: Mapping[str, Any]
    kind: DataKind
    cpu_threads: int
    launcher: Launcher

    @property
    def _compute(self) -> Mapping[str, Any]:
        return self.config["compute"]

    @property
    def extractor(self) -> str:
        return self.config["evaluation"]["extractor"]

    @property
    def network(self) -> bool:
        """Whether the scoring jobs extract features with a pretrained network."""
        if self.extractor not in PRETRAINED:
            return False
        return self.kind.held_out is None or bool(pretrained_metrics(self.kind, self.config["evaluation"]["metrics"]))

    @property
    def gpus(self) -> int:
        compute = self._compute
        return 1 if self.network and compute["node_gpus"] and compute["device"] != "cpu" else 0

    @property
    def device(self) -> str:
        """Where a scoring job's extractors run (ganstudy evaluate --device)."""
        return "cuda" if self.gpus else "cpu"

    @property
    def threads(self) -> int:
        """Torch threads, and cores, of a scoring job: on a GPU a GPU's share of the node's cores (its data
        are read and resized on them), unless compute.threads_per_job says; else the jobs' threads."""
        compute = self._compute
        if not self.gpus:
            return self.cpu_threads
        if compute["threads_per_job"] is not None:
            return compute["threads_per_job"]
        return max(1, compute["node_cores"] // compute["node_gpus"])

    def launch_line(self) -> str:
        """The prefix of a scoring job's shell line: the launcher's, for one process with its GPU bound;
        nothing on the CPU."""
        if not self.gpus:
            return ""
        compute = self._compute
        return self.launcher.line(RankLayout(1, compute["node_gpus"], compute["node_cores"], 1, self.threads))

    def images(self, job: str, manifest: Mapping[str, Any]) -> ScoredImages:
        """What scoring job ``job`` (evaluate, quality_statistics) holds, from the prepared data's manifest:
        evaluation.samples generated images and the reference split's real ones (their features, read from
        the statistics), or a held-out kind's test split twice (the generator's outputs and the targets)."""
        evaluation, files = self.config["evaluation"], manifest["files"]
        values = math.prod(manifest["image_shape"])
        if job == "quality_statistics":
            real = files[evaluation["reference_split"]]["images"]
            return ScoredImages(real, real, values)
        if self.kind.held_out is not None:
            test = files["test"]["images"]
            return ScoredImages(2 * test, 2 * test if self.network else 0, values)
        real = files[evaluation["reference_split"]]["images"]
        return ScoredImages(evaluation["samples"] + real, evaluation["samples"], values)

    def memory_mb(self, job: str, manifest: Mapping[str, Any]) -> int:
        """Memory (MB) of scoring job ``job`` (sbatch --mem)."""
        images = self.images(job, manifest)
        weights = pretrained_file(self.config["evaluation"])[0]
        batch = self.config["evaluation"]["batch_size"]
        estimate = scoring_memory_mb(self.extractor, weights, images.held, images.values, batch, self.device)
        return max(LEAST[job][0], estimate)

    def runtime_minutes(self, job: str, manifest: Mapping[str, Any]) -> int:
        """Wall-time minutes of scoring job ``job``."""
        weights = pretrained_file(self.config["evaluation"])[0]
        extracted = self.images(job, manifest).extracted
        return max(LEAST[job][1], scoring_minutes(self.extractor, weights, extracted, self.threads, self.device))
