"""Lipizzaner's four-layer perceptron (seed 002, table 4.2): two tanh hidden layers per network."""

from __future__ import annotations

import math

from torch import nn

from ganstudy.models import NetworkSpec
from ganstudy.models.stacked import StackedMLP


class PerceptronGenerator(nn.Module):
    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        self.image_shape = spec.image_shape
        pixels = math.prod(spec.image_shape)
        self.net = nn.Sequential(
            nn.Linear(spec.latent_dim, spec.hidden_units),
            nn.Tanh(),
            nn.Linear(spec.hidden_units, spec.hidden_units),
            nn.Tanh(),
            nn.Linear(spec.hidden_units, pixels),
            nn.Tanh(),
        )

    def forward(self, z):
        return self.net(z).view(z.shape[0], *self.image_shape)

    def stacked(self) -> StackedMLP:
        return StackedMLP.of(self.net, "net.", self.image_shape)


class PerceptronDiscriminator(nn.Module):
    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        pixels = math.prod(spec.image_shape)
        self.net = nn.Sequential(
            nn.Linear(pixels, spec.hidden_units),
            nn.Tanh(),
            nn.Linear(spec.hidden_units, spec.hidden_units),
            nn.Tanh(),
            nn.Linear(spec.hidden_units, 1),
        )

    def forward(self, x):
        return self.net(x.flatten(1)).squeeze(1)

    def stacked(self) -> StackedMLP:
        return StackedMLP.of(self.net, "net.", ())


def build(spec: NetworkSpec) -> tuple[nn.Module, nn.Module]:
    return PerceptronGenerator(spec), PerceptronDiscriminator(spec)
