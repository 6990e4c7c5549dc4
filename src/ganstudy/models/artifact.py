"""A trained generator on disk: its networks' weights, mixture weights, class labels, and what rebuilds them."""

from __future__ import annotations

import os
from typing import Any

import torch

from ganstudy.config.typed import as_dict
from ganstudy.core.checkpoint import load_state, save_state
from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.mixture import ConditionalGenerator, Generator, MixtureGenerator
from ganstudy.study.outcomes import divergence_text

FORMAT = "ganstudy-generator/3"
# Format 2 (before labelled generators) is an unlabelled mixture: still readable, so finished runs
# stay usable.
READABLE = {FORMAT, "ganstudy-generator/2"}
DIVERGED_FORMAT = "ganstudy-diverged/1"


def save_generator(path: str | os.PathLike[str], generator: Generator, network: str, spec: NetworkSpec) -> None:
    # Plain lists and dicts (JSON's form): weights-only loading refuses the options' FrozenMapping.
    spec_fields = as_dict(spec)
    save_state(
        path,
        {
            "format": FORMAT,
            "kind": generator.kind,
            "network": network,
            "spec": spec_fields,
            "weights": list(generator.weights),
            "labels": generator.labels,
            "components": [component.state_dict() for component in generator.components],
        },
    )


def save_diverged(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """In a diverged run's generator's place: the record of its divergence (ganstudy.study.outcomes), which
    load_generator refuses, saying why."""
    save_state(path, {"format": DIVERGED_FORMAT, **record})


def load_generator(path: str | os.PathLike[str]) -> tuple[Generator, NetworkSpec]:
    remedy = "delete it and rerun its training job"
    state = load_state(path, remedy)
    if state.get("format") == DIVERGED_FORMAT:
        raise GanstudyError(
            f"{path} holds no generator: its training run diverged ({divergence_text(state)}: "
            f"{state['diverged_message']}); the trial's scores are inf, an outcome of the study"
        )
    if state.get("format") not in READABLE:
        raise GanstudyError(f"{path} is not a ganstudy generator (format {state.get('format')!r}); {remedy}")
    fields: dict[str, Any] = dict(state["spec"])
    fields["image_shape"] = tuple(fields["image_shape"])
    if fields.get("condition_shape") is not None:
        fields["condition_shape"] = tuple(fields["condition_shape"])
    spec = NetworkSpec(**fields)
    components = []
    for weights in state["components"]:
        generator, _ = build_pair(state["network"], spec)
        generator.load_state_dict(weights)
        components.append(generator)
    if state.get("kind", "mixture") == "conditional":
        model: Generator = ConditionalGenerator(components[0], state["weights"], state["labels"])
    else:
        model = MixtureGenerator(components, state["weights"], state.get("labels"))
    model.eval()
    return model, spec


@torch.no_grad()
def sample_labelled(
    generator: Generator, latent_dim: int, count: int, seed: int, batch_size: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``count`` images in [-1, 1] from standard-normal noise of the given seed, computed in batches,
    with the class of every image for a labelled generator (else None)."""
    z = torch.randn(count, latent_dim, generator=torch.Generator().manual_seed(seed))
    return generator.sample(z, batch_size)


def sample_generator(generator: Generator, latent_dim: int, count: int, seed: int, batch_size: int) -> torch.Tensor:
    return sample_labelled(generator, latent_dim, count, seed, batch_size)[0]
