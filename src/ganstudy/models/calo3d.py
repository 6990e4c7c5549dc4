"""Seed 003's 3D calorimeter GAN: the networks of CERN's 3DGAN (Khattak, Vallecorsa, Carminati et al.,
ICIP 2018), as in svalleco/3Dgan keras/EcalEnergyGan.py (same layers as archives/PrimaryEnergy/
EcalEnergyGan.py, its Keras 1 predecessor) and its training script keras/EcalEnergyTrain.py.

Showers are (N, 1, X, Y, Z) energy depositions, 25x25x25 in the original, with Z the third axis of the
data's ECAL array (the original's 8-long kernels and x3 upsampling act on it).

Generator, called as ``generator(z, energy)`` with z (N, latent_dim) and energy (N, 1): it reads
``z * energy``, as the training script feeds it (noise N(0, 1) of size 200 times the primary energy
in units of 100 GeV, drawn from U(0.1, 5)). Dense to 8 maps of 7x7x8, then
Conv3D(64, 6x6x8, same), LeakyReLU, BatchNorm, UpSampling 2x2x2; ZeroPadding (2, 2, 0),
Conv3D(6, 6x5x8), LeakyReLU, BatchNorm, UpSampling 2x2x3; ZeroPadding (1, 0, 3), Conv3D(6, 3x3x8),
LeakyReLU; Conv3D(1, 2x2x2, no bias) and a ReLU, so the energies are non-negative.

Discriminator, called as ``discriminator(showers)``, returns (N, 3):
- column 0, "generation": the logit of the probability that the shower is real (the original's Dense(1)
  without its sigmoid, which the losses apply in their with-logits form);
- column 1, "auxiliary": a linear regression of the primary energy (Dense(1), 100 GeV units);
- column 2, "ecal": the sum of the shower's voxels, not learned (the original's Lambda), so the
  generator gets a gradient of one per voxel through it.
The shared body is Conv3D(32, 5^3, same), LeakyReLU, Dropout 0.2; then three times ZeroPadding,
Conv3D(8, 5^3), LeakyReLU, BatchNorm, Dropout 0.2, with paddings 2, 2, 1; AveragePooling 2^3; Flatten.
The original trains the three columns with binary cross-entropy, mean absolute percentage error and
mean absolute percentage error, loss weights 2, 0.1 and 0.1: the generator's targets are "real", the
energy it was given and the voxel sum expected for that energy.

Kept from the original: Keras' defaults where it sets nothing (LeakyReLU slope 0.3, batch norm epsilon
1e-3 and momentum 0.99, i.e. torch momentum 0.01; glorot_uniform kernels and zero biases), the
generator's he_uniform kernels and its last layer's glorot_normal (the truncated normal of the Keras 2
of that code: std sqrt(2 / (fan_in + fan_out)), cut at two std). keras/EcalEnergyGan.py calls the
discriminator's batch norms with training=True, so they use batch statistics even when evaluating;
here the trainer's train()/eval() decides, as for every other network.

Sizes: the original's layer chain makes X = 4a - 3, Y = 4b - 3 and Z = 6c - 23 from a dense map of
a x b x c (7 x 7 x 8 for 25x25x25), so X and Y may be 5, 9, 13, ... and Z 7, 13, 19, 25, ...; the dense
map follows the size and every layer stays the original's (13x13x13 and 5x5x7 work, for instance).
The discriminator's dense heads read the flattened pooled maps, whatever their size.

hidden_units is a base filter count, 8 at the original's settings; every filter count c of the
original becomes round(c * hidden_units / 8), at least 1: generator 8 dense maps, then 64, 6, 6 (and
the one output map); discriminator 32, 8, 8, 8. At latent_dim 200 and hidden_units 8 the generator
has 872,808 parameters and the discriminator 73,402 (Keras' summary adds the batch norms' moving
means and variances, 140 and 48, which torch keeps as buffers).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ganstudy.models import NetworkSpec
from ganstudy.models.builtin import calo3d_fits

# The original's filter counts at hidden_units == ORIGINAL_BASE.
ORIGINAL_BASE = 8
GENERATOR_FILTERS = (8, 64, 6, 6)  # dense maps, then the three LeakyReLU convolutions
DISCRIMINATOR_FILTERS = (32, 8, 8, 8)
# Keras defaults the original leaves in place.
LEAKY_SLOPE = 0.3
BN_EPS = 1e-3
BN_MOMENTUM = 0.01  # Keras' 0.99 weight on the old running mean
DROPOUT = 0.2


def _filters(count: int, base: int) -> int:
    # Rounded half up, so that hidden_units 4 halves every count (6 -> 3).
    return max(1, (count * base + ORIGINAL_BASE // 2) // ORIGINAL_BASE)


def _batch_norm(channels: int) -> nn.BatchNorm3d:
    return nn.BatchNorm3d(channels, eps=BN_EPS, momentum=BN_MOMENTUM)


class Calo3DGenerator(nn.Module):
    """(z (N, latent_dim), energy (N, 1)) -> showers (N, 1, X, Y, Z), non-negative."""

    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        _, x, y, z = spec.image_shape
        start, first, second, third = (_filters(c, spec.hidden_units) for c in GENERATOR_FILTERS)
        # Inverting the chain in the module docstring: 7 x 7 x 8 for 25x25x25.
        self.start = (start, (x + 3) // 4, (y + 3) // 4, (z + 23) // 6)
        self.dense = nn.Linear(spec.latent_dim, math.prod(self.start))
        # Conv3d's padding equals Keras' ZeroPadding3D before a valid convolution. TensorFlow's "same"
        # puts an even kernel's odd zero after: (2, 3) on X and Y (kernel 6), (3, 4) on Z (kernel 8);
        # ZeroPad3d lists Z first.
        self.convolutions = nn.Sequential(
            nn.ZeroPad3d((3, 4, 2, 3, 2, 3)),
            nn.Conv3d(start, first, (6, 6, 8)),
            nn.LeakyReLU(LEAKY_SLOPE),
            _batch_norm(first),
            nn.Upsample(scale_factor=(2, 2, 2), mode="nearest"),
            nn.Conv3d(first, second, (6, 5, 8), padding=(2, 2, 0)),
            nn.LeakyReLU(LEAKY_SLOPE),
            _batch_norm(second),
            nn.Upsample(scale_factor=(2, 2, 3), mode="nearest"),
            nn.Conv3d(second, third, (3, 3, 8), padding=(1, 0, 3)),
            nn.LeakyReLU(LEAKY_SLOPE),
            nn.Conv3d(third, 1, (2, 2, 2), bias=False),
            nn.ReLU(),
        )

    def forward(self, z: torch.Tensor, energy: torch.Tensor) -> torch.Tensor:
        # A column, so that an energy of shape (N,) cannot broadcast along the latent axis instead.
        scaled = z * energy.reshape(z.shape[0], 1)
        return self.convolutions(self.dense(scaled).view(z.shape[0], *self.start))


class BlockMean3d(nn.Module):
    """Keras' AveragePooling3D(2): the mean of each 2x2x2 block, a trailing odd plane dropped. Not
    nn.AvgPool3d: CUDA has no deterministic backward for it, and compute.deterministic must not stop
    the GPU runs that the CPU trains; a mean over a reshaped view backpropagates by broadcasting."""

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        batch, channels, *sizes = maps.shape
        halves = [n // 2 for n in sizes]
        even = maps[..., : 2 * halves[0], : 2 * halves[1], : 2 * halves[2]]
        return even.reshape(batch, channels, halves[0], 2, halves[1], 2, halves[2], 2).mean(dim=(3, 5, 7))


class Calo3DDiscriminator(nn.Module):
    """showers (N, 1, X, Y, Z) -> (N, 3): real/fake logit, energy estimate, voxel sum."""

    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        first, second, third, fourth = (_filters(c, spec.hidden_units) for c in DISCRIMINATOR_FILTERS)
        layers: list[nn.Module] = [nn.Conv3d(1, first, 5, padding=2), nn.LeakyReLU(LEAKY_SLOPE), nn.Dropout(DROPOUT)]
        for inputs, outputs, padding in ((first, second, 2), (second, third, 2), (third, fourth, 1)):
            layers += [
                nn.Conv3d(inputs, outputs, 5, padding=padding),
                nn.LeakyReLU(LEAKY_SLOPE),
                _batch_norm(outputs),
                nn.Dropout(DROPOUT),
            ]
        layers += [BlockMean3d(), nn.Flatten()]
        self.features = nn.Sequential(*layers)
        # Sizes kept by the first three convolutions, the last's padding 1 takes 2, the pooling halves
        # (rounding down): 25 -> 23 -> 11.
        pooled = math.prod((n - 2) // 2 for n in spec.image_shape[1:])
        self.generation = nn.Linear(fourth * pooled, 1)
        self.auxiliary = nn.Linear(fourth * pooled, 1)

    def forward(self, showers: torch.Tensor) -> torch.Tensor:
        features = self.features(showers)
        # In float32 even under bf16 autocast: a bf16 sum of 15,625 voxels would floor the sum's error near 0.3%.
        ecal = showers.float().sum(dim=(1, 2, 3, 4)).unsqueeze(1)
        return torch.cat([self.generation(features), self.auxiliary(features), ecal], dim=1)


def _keras_init(module: nn.Module) -> None:
    # Keras' default kernel initialiser and zero biases; the generator's own choices are set after.
    if isinstance(module, (nn.Linear, nn.Conv3d)):
        nn.init.xavier_uniform_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


def _init_generator(generator: Calo3DGenerator) -> None:
    generator.apply(_keras_init)
    *hidden, last = [m for m in generator.convolutions if isinstance(m, nn.Conv3d)]
    for conv in hidden:
        # he_uniform: U(-sqrt(6 / fan_in), sqrt(6 / fan_in)).
        nn.init.kaiming_uniform_(conv.weight, nonlinearity="relu")
    fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(last.weight)
    std = math.sqrt(2.0 / (fan_in + fan_out))
    nn.init.trunc_normal_(last.weight, std=std, a=-2 * std, b=2 * std)


def build(spec: NetworkSpec) -> tuple[nn.Module, nn.Module]:
    calo3d_fits(spec)
    generator, discriminator = Calo3DGenerator(spec), Calo3DDiscriminator(spec)
    _init_generator(generator)
    discriminator.apply(_keras_init)
    return generator, discriminator
