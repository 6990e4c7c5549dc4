"""A trained generator on disk: its weights plus what is needed to rebuild and sample it."""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

import torch
from torch import nn

from ganstudy.checkpoint import load_state, save_state
from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec, build_pair

FORMAT = "ganstudy-generator/1"


def save_generator(path: str | os.PathLike[str], generator: nn.Module, network: str, spec: NetworkSpec) -> None:
    spec_fields = asdict(spec)
    spec_fields["image_shape"] = list(spec.image_shape)
    save_state(path, {"format": FORMAT, "network": network, "spec": spec_fields, "state_dict": generator.state_dict()})


def load_generator(path: str | os.PathLike[str]) -> tuple[nn.Module, NetworkSpec]:
    remedy = "delete it and rerun its training job"
    state = load_state(path, remedy)
    if state.get("format") != FORMAT:
        raise GanstudyError(f"{path} is not a ganstudy generator (format {state.get('format')!r}); {remedy}")
    fields: dict[str, Any] = dict(state["spec"])
    fields["image_shape"] = tuple(fields["image_shape"])
    spec = NetworkSpec(**fields)
    generator, _ = build_pair(state["network"], spec)
    generator.load_state_dict(state["state_dict"])
    generator.eval()
    return generator, spec


@torch.no_grad()
def sample_generator(generator: nn.Module, latent_dim: int, count: int, seed: int, batch_size: int) -> torch.Tensor:
    """``count`` images in [-1, 1] from standard-normal noise of the given seed, batch by batch."""
    rng = torch.Generator().manual_seed(seed)
    chunks = []
    for start in range(0, count, batch_size):
        z = torch.randn(min(batch_size, count - start), latent_dim, generator=rng)
        chunks.append(generator(z))
    return torch.cat(chunks)
