"""Seed 001's DC-GAN (tables 1-2) and conditional DC-CGAN (tables 3-4), for any image size divisible by 4.

Kept from the paper on purpose: the ReLU after the input layer, batch-norm eps 0.8 after the
convolutions (the value of the code the paper used), dropout 0.25 in the discriminator.
Sized by the image: the generator starts from 128 maps of (H/4, W/4) (8x8 for 32x32 CIFAR, 7x7 for
28x28 MNIST, 2x2 for 8x8 digits). The discriminator halves the resolution with each of its four
convolutions but never below 2x2, so 28x28 and 32x32 images get the paper's four stride-2
convolutions and 8x8 digits two, then two of stride 1; its output layer reads the 128 final maps.
The conditional pair embeds the label into the generator's input (latent + num_classes, e.g. 110 =
100 + 10 as in table 3) and into the discriminator as one extra input plane. Both discriminators return
logits, as table 4's raw output: the registered losses apply the sigmoid inside their with-logits form.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ganstudy.models import NetworkSpec
from ganstudy.models.builtin import dccgan_fits, dcgan_fits

FEATURES = 128


class DCGANGenerator(nn.Module):
    def __init__(self, spec: NetworkSpec, conditional: bool = False) -> None:
        super().__init__()
        channels, height, width = spec.image_shape
        self.start = (FEATURES, height // 4, width // 4)
        self.embedding = nn.Embedding(spec.num_classes, spec.num_classes) if conditional else None
        inputs = spec.latent_dim + (spec.num_classes if conditional else 0)
        self.input = nn.Sequential(nn.Linear(inputs, math.prod(self.start)), nn.ReLU(inplace=True))
        self.convolutions = nn.Sequential(
            nn.BatchNorm2d(FEATURES),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(FEATURES, FEATURES, 3, stride=1, padding=1),
            nn.BatchNorm2d(FEATURES, eps=0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(FEATURES, 64, 3, stride=1, padding=1),
            nn.BatchNorm2d(64, eps=0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(64, channels, 3, stride=1, padding=1),
            nn.Tanh(),
        )

    def forward(self, z: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        if self.embedding is not None:
            z = torch.cat([z, self.embedding(labels)], dim=1)
        return self.convolutions(self.input(z).view(z.shape[0], *self.start))


class DCGANDiscriminator(nn.Module):
    def __init__(self, spec: NetworkSpec, conditional: bool = False) -> None:
        super().__init__()
        channels, height, width = spec.image_shape
        self.plane = (1, height, width)
        self.embedding = nn.Embedding(spec.num_classes, height * width) if conditional else None
        layers: list[nn.Module] = []
        widths = [channels + (1 if conditional else 0), 16, 32, 64, FEATURES]
        size = (height, width)
        for index, (inputs, outputs) in enumerate(zip(widths, widths[1:])):
            # Halve the resolution down to 2x2 at the least: a batch norm over 1x1 maps makes every
            # feature's batch mean the same for any batch, so D could not tell a real batch from a fake.
            stride = 2 if min(size) >= 4 else 1
            size = tuple((n - 1) // stride + 1 for n in size)
            layers += [
                nn.Conv2d(inputs, outputs, 3, stride=stride, padding=1),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Dropout(0.25),
            ]
            if index > 0:
                layers.append(nn.BatchNorm2d(outputs, eps=0.8))
        self.convolutions = nn.Sequential(*layers)
        self.output = nn.Linear(FEATURES * math.prod(size), 1)

    def forward(self, images: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        if self.embedding is not None:
            images = torch.cat([images, self.embedding(labels).view(images.shape[0], *self.plane)], dim=1)
        return self.output(self.convolutions(images).flatten(1)).squeeze(1)


def build_dcgan(spec: NetworkSpec) -> tuple[nn.Module, nn.Module]:
    dcgan_fits(spec)
    return DCGANGenerator(spec), DCGANDiscriminator(spec)


def build_dccgan(spec: NetworkSpec) -> tuple[nn.Module, nn.Module]:
    dccgan_fits(spec)
    return DCGANGenerator(spec, conditional=True), DCGANDiscriminator(spec, conditional=True)
