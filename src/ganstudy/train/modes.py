"""What a training mode is called with and returns: ``mode(context) -> TrainingResult`` on rank 0, None on the
other ranks (the modes themselves are declared in ganstudy.train.mode_needs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.data.arrays import Split
from ganstudy.data.kinds import IMAGES, DataKind
from ganstudy.models import NetworkSpec
from ganstudy.models.mixture import Generator
from ganstudy.parallel.stop import StopSignal
from ganstudy.parallel.world import World
from ganstudy.train.mode_needs import TRAINING_MODES
from ganstudy.train.progress import Progress


@dataclass(frozen=True)
class TrainingContext:
    """Everything a mode may use besides its set-up: data, seeds, process layout, side inputs."""

    setup: TrainingSettings
    data: Split
    study_seed: int
    trial: int
    world: World
    device: torch.device
    # What the data are: what scores the generator in training, and its sample figure.
    kind: DataKind = IMAGES
    # Seed 001's layout puts a rank's discriminator on a second GPU; None = the generator's device.
    discriminator_device: torch.device | None = None
    classifier_path: Path | None = None
    reference_path: Path | None = None
    # FID during training on Inception instead (data of one class without a classifier).
    inception_path: Path | None = None
    # The test split a paired or shower generator's in-training score runs on: held-out pairs, or the
    # energies and showers of held-out events.
    held_out_path: Path | None = None
    checkpoint_dir: Path | None = None
    # How a grid's stacked cells lay out their work (compute.stack_layout: auto, cache or whole).
    stack_layout: str = "auto"
    # Whether a grid's stacked updates replay from CUDA graphs (compute.cuda_graphs: auto, True or False).
    cuda_graphs: str | bool = "auto"
    # The scheduler's end-of-wall-time signal, seen by the training loops between iterations.
    stop: StopSignal = field(default_factory=StopSignal)
    # Progress lines in the job's log and live rows of losses.csv (ganstudy.train.progress).
    progress: Progress = field(default_factory=lambda: Progress(None, 0))

    @property
    def devices(self) -> tuple[torch.device, torch.device]:
        """(generator's device, discriminator's device)."""
        return self.device, self.discriminator_device or self.device


@dataclass
class TrainingResult:
    """The study's generator and the run's tables (rows of dicts), as rank 0 writes them."""

    generator: Generator
    network: str
    spec: NetworkSpec
    history: list[dict[str, float]] = field(default_factory=list)
    profile: list[dict[str, Any]] = field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seeds: dict[str, int] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)


def get_mode(name: str) -> Callable[[TrainingContext], TrainingResult | None]:
    """The function that trains in mode ``name`` (ganstudy.train.mode_needs declares each mode)."""
    return TRAINING_MODES.get(name).function(name)
