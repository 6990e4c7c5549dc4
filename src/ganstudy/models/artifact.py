"""A trained generator on disk: its components' weights, mixture weights, and what rebuilds them."""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

import torch

from ganstudy.checkpoint import load_state, save_state
from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.mixture import MixtureGenerator

FORMAT = "ganstudy-generator/2"


def save_generator(path: str | os.PathLike[str], mixture: MixtureGenerator, network: str, spec: NetworkSpec) -> None:
    spec_fields = asdict(spec)
    spec_fields["image_shape"] = list(spec.image_shape)
    save_state(
        path,
        {
            "format": FORMAT,
            "network": network,
            "spec": spec_fields,
            "weights": list(mixture.weights),
            "components": [component.state_dict() for component in mixture.components],
        },
    )


def load_generator(path: str | os.PathLike[str]) -> tuple[MixtureGenerator, NetworkSpec]:
    remedy = "delete it and rerun its training job"
    state = load_state(path, remedy)
    if state.get("format") != FORMAT:
        raise GanstudyError(f"{path} is not a ganstudy generator (format {state.get('format')!r}); {remedy}")
    fields: dict[str, Any] = dict(state["spec"])
    fields["image_shape"] = tuple(fields["image_shape"])
    spec = NetworkSpec(**fields)
    components = []
    for weights in state["components"]:
        generator, _ = build_pair(state["network"], spec)
        generator.load_state_dict(weights)
        components.append(generator)
    mixture = MixtureGenerator(components, state["weights"])
    mixture.eval()
    return mixture, spec


@torch.no_grad()
def sample_generator(mixture: MixtureGenerator, latent_dim: int, count: int, seed: int, batch_size: int) -> torch.Tensor:
    """``count`` images in [-1, 1] from standard-normal noise of the given seed, computed in batches."""
    z = torch.randn(count, latent_dim, generator=torch.Generator().manual_seed(seed))
    return mixture(z, batch_size)
