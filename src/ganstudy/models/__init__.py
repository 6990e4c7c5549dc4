"""Registered networks. A network entry builds a (generator, discriminator) pair from a set-up. Free of torch:
the workflow looks entries up while it plans (ganstudy.models.builtin holds ganstudy's own)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ganstudy.config.typed import FrozenMapping
from ganstudy.contracts import NetworkBuilder, ShapeCheck
from ganstudy.registry import Registry, keeping, resolve_part

if TYPE_CHECKING:
    from torch import nn


@dataclass(frozen=True)
class NetworkSpec:
    """What a network builder needs: the image shape, the set-up's network keys, for conditional
    networks the number of classes (labels are 0 .. num_classes-1), and for networks of a task other
    than "noise" the shape of one condition row (pix2pix: the input image; calo3d: the primary energy)."""

    image_shape: tuple[int, ...]
    latent_dim: int
    hidden_units: int
    num_classes: int = 0
    condition_shape: tuple[int, ...] | None = None
    # The set-up's network_options, validated against the network's ``options`` schema, defaults filled.
    options: Mapping[str, Any] = field(default_factory=FrozenMapping)


@dataclass(frozen=True)
class Network:
    # The builder, or its ``module:attribute`` reference, imported when the first pair is built: an entry
    # whose module imports no torch keeps `snakemake -n` and every job's plan free of it.
    build: NetworkBuilder | str
    # A conditional pair is called as generator(z, labels) and discriminator(images, labels).
    conditional: bool = False
    # What the generator maps from: "noise" (a latent vector), "paired" (an input image, pix2pix) or
    # "energy" (noise and a primary energy, calo3d); the training task of that name feeds it.
    task: str = "noise"
    # A JSON schema of the set-up's network_options (None: the network takes none).
    options: dict[str, Any] | None = None
    # The shapes it can build for, checked without building: raises GanstudyError saying what to change.
    # The workflow calls it while it plans, for data sets whose shape is known before they are read.
    fits: ShapeCheck | None = None


NETWORKS: Registry[Network] = Registry(
    "network", "ganstudy.networks", keeping(Network, build=NetworkBuilder, fits=ShapeCheck)
)


def get_network(name: str) -> Network:
    return NETWORKS.get(name)


def build_pair(name: str, spec: NetworkSpec) -> tuple[nn.Module, nn.Module]:
    build = get_network(name).build
    if isinstance(build, str):
        build = resolve_part(build, f"network '{name}' ({NETWORKS.origin(name)}): its builder", NetworkBuilder)
    return build(spec)
