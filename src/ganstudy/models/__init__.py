"""Registered networks. A network entry builds a (generator, discriminator) pair from a set-up."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ganstudy.registry import Registry


@dataclass(frozen=True)
class NetworkSpec:
    """What a network builder needs: the image shape and the set-up's network keys."""

    image_shape: tuple[int, int, int]
    latent_dim: int
    hidden_units: int


NETWORKS: Registry = Registry("network")


def build_pair(name: str, spec: NetworkSpec) -> tuple[nn.Module, nn.Module]:
    # Importing the modules registers their networks.
    from ganstudy.models import perceptron  # noqa: F401

    return NETWORKS.get(name)(spec)
