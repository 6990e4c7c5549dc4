"""The thesis's convolutional networks for the COVID-19 x-rays (seed 002, table 4.3), after Lipizzaner's
DCGAN-style convolutional factories: CNN28 (generator maps 512, 256, 128 -> 28x28) and CNN64 (512, 256,
128, 64 -> 64x64). The discriminator mirrors the generator; both start from N(0, 0.02) weights.
"""

from __future__ import annotations

import torch
from torch import nn

from ganstudy.models import NetworkSpec
from ganstudy.models.builtin import cnn28_fits, cnn64_fits


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(module.weight, 0.0, 0.02)
        nn.init.zeros_(module.bias)


class ConvGenerator(nn.Module):
    def __init__(self, latent_dim: int, widths: list[int], channels: int, last_padding: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.ConvTranspose2d(latent_dim, widths[0], 4, 1, 0),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(True),
        ]
        for inputs, outputs in zip(widths, widths[1:]):
            layers += [nn.ConvTranspose2d(inputs, outputs, 4, 2, 1), nn.BatchNorm2d(outputs), nn.ReLU(True)]
        layers += [nn.ConvTranspose2d(widths[-1], channels, 4, 2, last_padding), nn.Tanh()]
        self.net = nn.Sequential(*layers)
        self.apply(_init_weights)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z.view(z.shape[0], -1, 1, 1))


class ConvDiscriminator(nn.Module):
    def __init__(self, widths: list[int], channels: int, first_padding: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(channels, widths[0], 4, 2, first_padding), nn.LeakyReLU(0.2, inplace=True)]
        for inputs, outputs in zip(widths, widths[1:]):
            layers += [nn.Conv2d(inputs, outputs, 4, 2, 1), nn.BatchNorm2d(outputs), nn.LeakyReLU(0.2, inplace=True)]
        layers.append(nn.Conv2d(widths[-1], 1, 4, 1, 0))
        self.net = nn.Sequential(*layers)
        self.apply(_init_weights)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images).flatten()


def build_cnn28(spec: NetworkSpec) -> tuple[nn.Module, nn.Module]:
    cnn28_fits(spec)
    return _pair(spec, [512, 256, 128], edge_padding=3)


def build_cnn64(spec: NetworkSpec) -> tuple[nn.Module, nn.Module]:
    cnn64_fits(spec)
    return _pair(spec, [512, 256, 128, 64], edge_padding=1)


def _pair(spec: NetworkSpec, widths: list[int], edge_padding: int) -> tuple[nn.Module, nn.Module]:
    """``edge_padding`` makes 28 from 16 (generator) and 16 from 28 (discriminator); 1 for powers of 2."""
    channels = spec.image_shape[0]
    return (
        ConvGenerator(spec.latent_dim, widths, channels, edge_padding),
        ConvDiscriminator(widths[::-1], channels, edge_padding),
    )
