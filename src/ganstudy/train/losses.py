"""Registered adversarial losses (Lipizzaner's names) on discriminator outputs in (0, 1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from ganstudy.registry import Registry

Tensor = torch.Tensor


@dataclass(frozen=True)
class AdversarialLoss:
    discriminator: Callable[[Tensor, Tensor], Tensor]  # (D(real), D(fake)) -> loss
    generator: Callable[[Tensor], Tensor]  # D(G(z)) -> loss


LOSSES: Registry = Registry("loss")


def _bce_discriminator(d_real: Tensor, d_fake: Tensor) -> Tensor:
    return F.binary_cross_entropy(d_real, torch.ones_like(d_real)) + F.binary_cross_entropy(
        d_fake, torch.zeros_like(d_fake)
    )


LOSSES.register("bce")(
    AdversarialLoss(
        discriminator=_bce_discriminator,
        # Non-saturating form: the generator maximises log D(G(z)), as Lipizzaner and DCGAN do.
        generator=lambda d_fake: F.binary_cross_entropy(d_fake, torch.ones_like(d_fake)),
    )
)

LOSSES.register("mse")(
    AdversarialLoss(
        discriminator=lambda d_real, d_fake: F.mse_loss(d_real, torch.ones_like(d_real))
        + F.mse_loss(d_fake, torch.zeros_like(d_fake)),
        generator=lambda d_fake: F.mse_loss(d_fake, torch.ones_like(d_fake)),
    )
)

LOSSES.register("heuristic")(
    AdversarialLoss(
        discriminator=_bce_discriminator,
        # clamp keeps log finite when D is certain the sample is fake.
        generator=lambda d_fake: -0.5 * torch.log(d_fake.clamp_min(1e-12)).mean(),
    )
)
