"""What ganstudy calls a plugin's parts with: one Protocol per callable a part names, in one torch-free
module (docs/plugins.md shows each in use). A part is checked against its contract when it is loaded
(registry.contract_problems), by signature and without calling it, so that a builder that takes the
wrong arguments is named with its package before a job trains, not by a TypeError inside one.

- a network (``ganstudy.models.Network``): ``build`` is a NetworkBuilder, ``fits`` a ShapeCheck;
- a data set (``ganstudy.data.loaders.DataSet``): ``load`` is a Loader, ``count_classes`` a ClassCounter;
- a metric (``ganstudy.evaluate.metrics.Metric``): ``compute`` is a MetricCompute;
- a data kind (``ganstudy.data.kinds.DataKind``): ``sample_figure`` is a SampleFigure, its ``HeldOut``
  names a HeldOutScorer class and a HeldOutEvaluation (called with a HeldOutJob), and each of its
  ``figures`` a KindFigureDraw;
- a training task: a subclass of ``ganstudy.train.tasks.Task`` (torch code, so its contract is that base
  class: an override must take the arguments of the method it overrides).

Below the stages it describes, this module imports none of them, not even for type checkers: their
types are named in the docstrings (``NetworkSpec``: ganstudy.models; ``LoadOptions``, ``RawDataset``:
ganstudy.data.loaders; ``Split``: ganstudy.data.arrays; ``TrainingSettings``: ganstudy.config.setup_settings;
``EvaluationSettings``: ganstudy.evaluate.settings) and annotated as ``Any``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch
    from torch import nn


class NetworkBuilder(Protocol):
    def __call__(self, spec: Any) -> tuple[nn.Module, nn.Module]:
        """A (generator, discriminator) pair for ``spec`` (a NetworkSpec); raise GanstudyError saying what to
        change for a spec it cannot build (the message is prefixed with the network's name and package)."""


class ShapeCheck(Protocol):
    def __call__(self, spec: Any) -> None:
        """Raise GanstudyError saying what to change when the network cannot build for ``spec`` (a
        NetworkSpec); called while the workflow plans, without building anything."""


class Loader(Protocol):
    def __call__(self, path: str | None, options: Any) -> Any:
        """The data at ``path`` (dataset.path; None where the data set needs none) as ``options`` (LoadOptions)
        asks, as a RawDataset."""


class ClassCounter(Protocol):
    def __call__(self, path: str) -> int | None:
        """The number of classes at ``path``, told without reading the data; None: not known before."""


class MetricCompute(Protocol):
    def __call__(self, scoring: Any) -> Mapping[str, float]:
        """The metric's columns for one generator's ``scoring`` (ganstudy.evaluate.scoring: ImageScoring,
        PairScoring or ShowerScoring, by the data kind); none, with a note in ``scoring.notes[name]``
        saying why, where it cannot be computed."""


class TrainingFunction(Protocol):
    def __call__(self, context: Any) -> Any:
        """Train one run from ``context`` (ganstudy.train.modes.TrainingContext), on every rank of the job;
        return its TrainingResult on rank 0 and None on the others."""


class PairCount(Protocol):
    def __call__(self, setup: Mapping[str, Any], classes: int | None) -> int | None:
        """The generator-discriminator pairs a set-up (its validated section) trains on data of ``classes``
        classes (None: not known before they are read); None where the count needs the classes."""


class ModeCheck(Protocol):
    def __call__(self, name: str, setup: Mapping[str, Any], ranks: int) -> list[str]:
        """What could never train set-up ``name`` on ``ranks`` ranks, one line each naming its key."""


class SampleFigure(Protocol):
    def __call__(self, generator: nn.Module, spec: Any, data: Any, seed: int, path: Path) -> bool:
        """Draw a run's samples to ``path`` (PNG), of the run's generator, its NetworkSpec and its training
        Split; True when it drew from ``seed`` (run.json then records it)."""


class KindFigureDraw(Protocol):
    def __call__(self, score_paths: list[str], setups: list[str], out_path: str) -> None:
        """Draw a kind's study figure to ``out_path`` (PNG) from the score files of each set-up's first
        trial (``score_paths``, in the order of ``setups``)."""


class HeldOutScorer(Protocol):
    """The in-training score of a kind whose data train no classifier: built once per run, then asked
    every ``score_period`` iterations; its column in losses.csv is the kind's ``HeldOut.column``."""

    def __init__(
        self, split_path: str, count: int, seed: int, network: nn.Module, device: torch.device, setup: Any, ranks: int
    ) -> None:
        """``count`` rows of the test split at ``split_path``; ``network``: a generator of the run's
        architecture to load the scored weights into; ``setup``: the set-up's TrainingSettings;
        ``ranks``: the training's rank count."""

    def score(self, generator: nn.Module) -> float:
        """The score of ``generator``'s current weights (it must not change them)."""


@dataclass(frozen=True)
class HeldOutJob:
    """One scoring job of a kind scored on held-out data, as ``ganstudy evaluate --held-out`` runs it: the
    generator saved by a run, the run's record, the split to score on, the evaluation section, the study's
    seed and the trial (derive the scoring's randomness from both), where the score file goes, the CPU
    threads it may use and the device its feature extractors run on (cpu, or cuda: the job's GPU)."""

    generator_path: str | os.PathLike[str]
    run_record_path: str | os.PathLike[str]
    split_path: str | os.PathLike[str]
    settings: Any  # the evaluation section, an EvaluationSettings
    study_seed: int
    trial: int
    out_path: str | os.PathLike[str]
    threads: int
    device: str = "cpu"


class HeldOutEvaluation(Protocol):
    def __call__(self, job: HeldOutJob) -> dict[str, Any]:
        """Score the job's generator on its split by ``job.settings.metrics``, write the score file
        ``job.out_path`` (ganstudy.evaluate.scores.write_scores) and return its record."""
