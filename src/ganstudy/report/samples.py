"""Each data kind's sample figure of a trained run (samples.png beside its generator), named by the kind
(ganstudy.data.kinds) and called as ``figure(generator, spec, data, seed, path)``; each returns whether
it drew from ``seed``, so that run.json records the seed only where one was used."""

from __future__ import annotations

from pathlib import Path

import torch

from ganstudy.data.arrays import Split
from ganstudy.evaluate.showers import generate_showers
from ganstudy.models import NetworkSpec
from ganstudy.models.artifact import Generator, sample_generator
from ganstudy.report.images import save_grid, save_shower_pairs, save_triptychs

GRID_SAMPLES = 64
SAMPLE_ROWS = 8


def noise_samples(generator: Generator, spec: NetworkSpec, data: Split, seed: int, path: Path) -> bool:
    """A grid of the generator's images of one seeded noise batch."""
    save_grid(path, sample_generator(generator, spec.latent_dim, GRID_SAMPLES, seed, GRID_SAMPLES).numpy())
    return True


def paired_samples(generator: Generator, spec: NetworkSpec, data: Split, seed: int, path: Path) -> bool:
    """The first training pairs as input | output | target: a paired generator maps inputs, not noise."""
    inputs = data.conditions[:SAMPLE_ROWS]
    with torch.no_grad():
        outputs = generator(torch.from_numpy(inputs)).numpy()
    save_triptychs(path, inputs, outputs, data.images[:SAMPLE_ROWS])
    return False


def shower_samples(generator: Generator, spec: NetworkSpec, data: Split, seed: int, path: Path) -> bool:
    """Showers of the first training rows' energies beside the real ones."""
    showers = generate_showers(
        generator.components[0], spec.latent_dim, data.conditions[:SAMPLE_ROWS], seed, SAMPLE_ROWS
    )
    save_shower_pairs(path, data.images[:SAMPLE_ROWS], showers)
    return True
