"""Registered training modes: ``mode(setup, data, study_seed, trial, world) -> TrainingResult``."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import nn

from ganstudy.models import NetworkSpec
from ganstudy.registry import Registry


@dataclass
class TrainingResult:
    """What a mode hands back on rank 0: the study's generator and its per-iteration history."""

    generator: nn.Module
    network: str
    spec: NetworkSpec
    history: list[dict[str, float]] = field(default_factory=list)
    seeds: dict[str, int] = field(default_factory=dict)


TRAINING_MODES: Registry = Registry("training mode")


def get_mode(name: str):
    # Importing the modules registers their modes.
    from ganstudy.train import single  # noqa: F401

    return TRAINING_MODES.get(name)
