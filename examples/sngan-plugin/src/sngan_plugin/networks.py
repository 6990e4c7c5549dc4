"""A DC-GAN whose discriminator's layers are spectrally normalised (Miyato et al., ICLR 2018): each
weight is divided by its largest singular value, estimated by one power iteration per forward pass, so
the discriminator is 1-Lipschitz layer by layer and needs neither batch norm nor dropout. The generator
keeps DC-GAN's batch norm: without it, on the shapes data, the samples of 60-iteration runs collapsed
to one or two near-identical images in each of 5 trials (their sample grids).

Sized by the image: square sides that are powers of two from 4. The generator starts from
2x2 maps and doubles the side with each transposed convolution; the discriminator halves it with each
stride-2 convolution back to 2x2 and ends in one linear logit per image (ganstudy's losses take logits).
Options (``network_options`` of a set-up, checked against OPTIONS when the study is read):
``base_channels``, the maps of the largest layer; ``spectral_norm``, off for an ablation.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

from ganstudy.errors import GanstudyError
from ganstudy.models import Network, NetworkSpec

OPTIONS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "base_channels": {
            "type": "integer",
            "minimum": 4,
            "default": 32,
            "description": "Feature maps of the generator's last and the discriminator's first layer.",
        },
        "spectral_norm": {
            "type": "boolean",
            "default": True,
            "description": "Spectrally normalise the discriminator's layers (off: a plain DC-GAN).",
        },
    },
}


def _doublings(spec: NetworkSpec) -> int:
    """How many times the side doubles from 2x2 to the image's side."""
    _, height, width = spec.image_shape
    if height != width or height < 4 or height & (height - 1):
        raise GanstudyError(
            f"network sndcgan needs square images whose side is a power of two from 4, got {height}x{width}: "
            "set dataset.image_size"
        )
    return int(math.log2(height)) - 1


class Generator(nn.Module):
    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        steps, base = _doublings(spec), spec.options["base_channels"]
        widths = [base * 2 ** (steps - i) for i in range(steps + 1)]  # maps at 2x2, 4x4, ..., the image's side
        self.start = (widths[0], 2, 2)
        self.input = nn.Sequential(nn.Linear(spec.latent_dim, math.prod(self.start)), nn.ReLU())
        layers: list[nn.Module] = []
        for wide, narrow in zip(widths, widths[1:]):
            layers += [nn.ConvTranspose2d(wide, narrow, 4, stride=2, padding=1), nn.BatchNorm2d(narrow), nn.ReLU()]
        layers += [nn.Conv2d(widths[-1], spec.image_shape[0], 3, padding=1), nn.Tanh()]
        self.convolutions = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.convolutions(self.input(z).view(-1, *self.start))


class Discriminator(nn.Module):
    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        steps, base = _doublings(spec), spec.options["base_channels"]
        norm = spectral_norm if spec.options["spectral_norm"] else (lambda layer: layer)
        widths = [spec.image_shape[0]] + [base * 2**i for i in range(steps)]
        layers: list[nn.Module] = []
        for narrow, wide in zip(widths, widths[1:]):
            layers += [norm(nn.Conv2d(narrow, wide, 4, stride=2, padding=1)), nn.LeakyReLU(0.1)]
        self.convolutions = nn.Sequential(*layers)
        self.output = norm(nn.Linear(widths[-1] * 2 * 2, 1))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.output(self.convolutions(images).flatten(1)).squeeze(1)  # one logit per image


def build(spec: NetworkSpec) -> tuple[nn.Module, nn.Module]:
    return Generator(spec), Discriminator(spec)


SNDCGAN = Network(build, options=OPTIONS)
