"""One optimisation step of each player; every training mode is built from these two."""

from __future__ import annotations

import torch
from torch import nn

from ganstudy.train.losses import AdversarialLoss


def adam(parameters, lr: float, betas: tuple[float, float]) -> torch.optim.Adam:
    """Adam as every mode uses it: the fused kernel, a millisecond faster per step than the
    per-tensor loop on the small networks of these studies."""
    return torch.optim.Adam(parameters, lr=lr, betas=betas, fused=True)


def discriminator_step(
    discriminator: nn.Module,
    generator: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: AdversarialLoss,
    real: torch.Tensor,
    noise: torch.Tensor,
) -> torch.Tensor:
    with torch.no_grad():
        fake = generator(noise)
    value = loss.discriminator(discriminator(real), discriminator(fake))
    optimizer.zero_grad(set_to_none=True)
    value.backward()
    optimizer.step()
    return value.detach()


def generator_step(
    generator: nn.Module,
    discriminator: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: AdversarialLoss,
    noise: torch.Tensor,
) -> torch.Tensor:
    # The discriminator only passes gradients through: computing its own would be wasted work.
    discriminator.requires_grad_(False)
    try:
        value = loss.generator(discriminator(generator(noise)))
        optimizer.zero_grad(set_to_none=True)
        value.backward()
    finally:
        discriminator.requires_grad_(True)
    optimizer.step()
    return value.detach()
