"""The named random streams of a generator-discriminator pair."""

from __future__ import annotations

from ganstudy.core.seeding import derive_seed

STREAMS = ("init", "batches", "noise", "dropout", "score")


def pair_seeds(study_seed: int, trial: int, prefix: str = "") -> dict[str, int]:
    """The named random streams of one pair; ``prefix`` (e.g. "class3/") keeps pairs of a run apart."""
    return {name: derive_seed(study_seed, trial, prefix + name) for name in STREAMS}
