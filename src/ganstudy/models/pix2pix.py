"""pix2pix (Isola et al. 2017) as in junyanz/pytorch-CycleGAN-and-pix2pix: the U-Net generator and the
70x70 PatchGAN discriminator, with the repository's pix2pix defaults (batch norm, dropout 0.5, N(0, 0.02)
weights), or with its ``--norm instance`` (network_options ``norm: instance``): instance norm without
affine parameters or running statistics, and biases on the convolutions it follows, as the original's
use_bias.

The generator is the original's UnetGenerator for any square power-of-two size >= 16, with
num_downs = log2(size) so that the innermost block reaches 1x1 (unet_256 for 256x256). The
discriminator is the original's NLayerDiscriminator (n_layers 3) on the concatenation of the input and
the output image; like the original (BCEWithLogits) it returns logits, one per patch,
shape (N, patches), so that the losses' mean over the last dimension is the original's mean over the
patch map.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ganstudy.models import NetworkSpec
from ganstudy.models.builtin import pix2pix_fits

Norm = type[nn.BatchNorm2d] | type[nn.InstanceNorm2d]
# The original's get_norm_layer: instance norm is affine=False, track_running_stats=False (its defaults).
NORMS: dict[str, Norm] = {"batch": nn.BatchNorm2d, "instance": nn.InstanceNorm2d}
# The original's PatchGAN depth: three stride-2 convolutions give the 70x70 receptive field.
PATCH_LAYERS = 3


def _filters(base: int, level: int) -> int:
    # ngf, 2ngf, 4ngf, then 8ngf for every deeper level, as the original's block list.
    return base * min(2**level, 8)


class UnetBlock(nn.Module):
    """The original's UnetSkipConnectionBlock: down, the inner block, up, and the skip by concatenation."""

    def __init__(
        self,
        outer: int,
        inner: int,
        submodule: nn.Module | None,
        norm: Norm,
        inputs: int | None = None,
        outermost: bool = False,
        dropout: bool = False,
    ) -> None:
        super().__init__()
        self.outermost = outermost
        inputs = outer if inputs is None else inputs
        # No bias under batch norm, even on the outermost down convolution that no norm follows: the
        # original's use_bias holds for every down convolution, and the parameter counts depend on it.
        bias = norm is nn.InstanceNorm2d
        down_conv = nn.Conv2d(inputs, inner, 4, stride=2, padding=1, bias=bias)
        # In place as in the original: the LeakyReLU overwrites this block's input, so the skip
        # connection concatenated in forward() carries LeakyReLU(x), which is what pix2pix trains with.
        down_relu = nn.LeakyReLU(0.2, inplace=True)
        up_relu = nn.ReLU(inplace=True)
        if outermost:
            up_conv = nn.ConvTranspose2d(inner * 2, outer, 4, stride=2, padding=1)
            layers = [down_conv, submodule, up_relu, up_conv, nn.Tanh()]
        elif submodule is None:
            # Innermost: no norm on the 1x1 down map (a batch norm there would see one value per map).
            up_conv = nn.ConvTranspose2d(inner, outer, 4, stride=2, padding=1, bias=bias)
            layers = [down_relu, down_conv, up_relu, up_conv, norm(outer)]
        else:
            up_conv = nn.ConvTranspose2d(inner * 2, outer, 4, stride=2, padding=1, bias=bias)
            layers = [down_relu, down_conv, norm(inner), submodule, up_relu, up_conv, norm(outer)]
            if dropout:
                layers.append(nn.Dropout(0.5))
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.outermost:
            return self.model(x)
        return torch.cat([x, self.model(x)], 1)


class UnetGenerator(nn.Module):
    """Maps an input image (N, C_in, S, S) to an output image (N, C_out, S, S) in [-1, 1]."""

    def __init__(self, inputs: int, outputs: int, size: int, ngf: int, norm: Norm = nn.BatchNorm2d) -> None:
        super().__init__()
        num_downs = int(math.log2(size))
        block: UnetBlock | None = None
        # Built from the innermost level (num_downs - 1) out to the outermost (0). Level k's inner width
        # is ngf * min(2^k, 8) and its outer width is level k-1's inner one; dropout sits on the 8ngf
        # levels from 4 to the one above the innermost. For num_downs >= 5 this is exactly the original
        # list (innermost 8->8, num_downs - 5 dropout blocks 8->8, then 4->8, 2->4, 1->2, outermost),
        # e.g. three dropout blocks for unet_256. For 16x16 (num_downs 4) the same rule keeps the
        # outermost, the 2ngf and 4ngf levels and an innermost 4ngf -> 8ngf block, without dropout.
        for level in reversed(range(num_downs)):
            outermost = level == 0
            block = UnetBlock(
                outer=outputs if outermost else _filters(ngf, level - 1),
                inner=_filters(ngf, level),
                submodule=block,
                norm=norm,
                inputs=inputs if outermost else None,
                outermost=outermost,
                dropout=4 <= level < num_downs - 1,
            )
        self.model = block

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.model(a)


class PatchDiscriminator(nn.Module):
    """The original's NLayerDiscriminator on (input, output) pairs: one logit per patch, (N, patches)."""

    def __init__(self, inputs: int, outputs: int, size: int, ndf: int, norm: Norm = nn.BatchNorm2d) -> None:
        super().__init__()
        # With k4 p1 convolutions the patch map is size / 2^n_layers - 2 wide: 30 for 256 (the original's
        # 30x30) but 0 for 16x16 with three stride-2 layers, so 16x16 images get two (a 2x2 map of
        # 34x34 patches); 32x32 and up keep the original three.
        n_layers = min(PATCH_LAYERS, int(math.log2(size)) - 2)
        layers: list[nn.Module] = [
            nn.Conv2d(inputs + outputs, ndf, 4, stride=2, padding=1),
            nn.LeakyReLU(0.2, inplace=True),
        ]
        mult = 1
        for n in range(1, n_layers + 1):
            previous, mult = mult, min(2**n, 8)
            # The last of these keeps the resolution (stride 1), as the original's.
            stride = 2 if n < n_layers else 1
            layers += [
                nn.Conv2d(ndf * previous, ndf * mult, 4, stride=stride, padding=1, bias=norm is nn.InstanceNorm2d),
                norm(ndf * mult),
                nn.LeakyReLU(0.2, inplace=True),
            ]
        layers.append(nn.Conv2d(ndf * mult, 1, 4, stride=1, padding=1))
        self.model = nn.Sequential(*layers)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.model(torch.cat([a, b], 1)).flatten(1)


def _init_weights(module: nn.Module) -> None:
    # The original's init_type 'normal' with init_gain 0.02, drawn from torch's global RNG (seeded by the trainers).
    if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(module.weight, 0.0, 0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.BatchNorm2d):
        nn.init.normal_(module.weight, 1.0, 0.02)
        nn.init.zeros_(module.bias)


def build(spec: NetworkSpec) -> tuple[nn.Module, nn.Module]:
    pix2pix_fits(spec)
    inputs, outputs, size = spec.condition_shape[0], spec.image_shape[0], spec.image_shape[1]
    norm = NORMS[spec.options.get("norm", "batch")]
    generator = UnetGenerator(inputs, outputs, size, spec.hidden_units, norm)
    discriminator = PatchDiscriminator(inputs, outputs, size, spec.hidden_units, norm)
    generator.apply(_init_weights)
    discriminator.apply(_init_weights)
    return generator, discriminator
