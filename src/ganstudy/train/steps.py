"""One optimisation step of each player; every training mode is built from these two."""

from __future__ import annotations

import torch
from torch import nn

from ganstudy.train.losses import AdversarialLoss


def adam(parameters, lr: float, betas: tuple[float, float]) -> torch.optim.Adam:
    """Adam as every mode uses it: the fused kernel, a millisecond faster per step than the
    per-tensor loop on the small networks of these studies."""
    return torch.optim.Adam(parameters, lr=lr, betas=betas, fused=True)


def call_network(network: nn.Module, inputs: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor:
    """A network on its inputs (and labels, for a conditional pair), on the inputs' device."""
    if labels is None:
        return network(inputs)
    return network(inputs, labels.to(inputs.device))


def discriminator_step(
    discriminator: nn.Module,
    generator: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: AdversarialLoss,
    real: torch.Tensor,
    noise: torch.Tensor,
    labels: torch.Tensor | None = None,
) -> torch.Tensor:
    """``real`` lives on the discriminator's device and ``noise`` on the generator's (seed 001 puts the
    two on different GPUs); ``labels`` (conditional pairs) label both the real and the fake images."""
    with torch.no_grad():
        fake = call_network(generator, noise, labels).to(real.device)
    value = loss.discriminator(call_network(discriminator, real, labels), call_network(discriminator, fake, labels))
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
    labels: torch.Tensor | None = None,
) -> torch.Tensor:
    target = next(discriminator.parameters()).device
    # The discriminator only passes gradients through: computing its own would be wasted work.
    discriminator.requires_grad_(False)
    try:
        value = loss.generator(call_network(discriminator, call_network(generator, noise, labels).to(target), labels))
        optimizer.zero_grad(set_to_none=True)
        value.backward()
    finally:
        discriminator.requires_grad_(True)
    optimizer.step()
    return value.detach()
