"""Registered adversarial losses (Lipizzaner's names) on discriminator outputs in (0, 1).

A loss is given per sample; its value is the mean over the last dimension. One network's outputs
(shape [B]) give a scalar; a stack of networks' outputs (shape [N, B], batched grid cells) give one
loss per network, each computed exactly as that network's alone would be.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from ganstudy.registry import Registry

Tensor = torch.Tensor
Term = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class AdversarialLoss:
    real_term: Term  # discriminator's loss on each D(real)
    fake_term: Term  # discriminator's loss on each D(fake)
    generator_term: Term  # generator's loss on each D(G(z))

    def discriminator(self, d_real: Tensor, d_fake: Tensor) -> Tensor:
        return self.real_term(d_real).mean(-1) + self.fake_term(d_fake).mean(-1)

    def generator(self, d_fake: Tensor) -> Tensor:
        return self.generator_term(d_fake).mean(-1)


LOSSES: Registry = Registry("loss")


def _bce(target: float) -> Term:
    return lambda d: F.binary_cross_entropy(d, torch.full_like(d, target), reduction="none")


def _squared(target: float) -> Term:
    return lambda d: (d - target).square()


# Non-saturating generator loss: the generator maximises log D(G(z)), as Lipizzaner and DCGAN do.
LOSSES.register("bce")(AdversarialLoss(real_term=_bce(1.0), fake_term=_bce(0.0), generator_term=_bce(1.0)))

LOSSES.register("mse")(AdversarialLoss(real_term=_squared(1.0), fake_term=_squared(0.0), generator_term=_squared(1.0)))

LOSSES.register("heuristic")(
    AdversarialLoss(
        real_term=_bce(1.0),
        fake_term=_bce(0.0),
        # clamp keeps log finite when D is certain the sample is fake.
        generator_term=lambda d: -0.5 * torch.log(d.clamp_min(1e-12)),
    )
)
