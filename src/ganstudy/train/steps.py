"""One optimisation step of each player; every training mode is built from these two."""

from __future__ import annotations

import torch
from torch import nn

from ganstudy.train.fused_adam import AnyOptimizer, FusedAdam
from ganstudy.train.losses import AdversarialLoss
from ganstudy.train.tasks import Batch, Task


def optimizer_class(name: str, betas: tuple[float, float]) -> tuple[type[torch.optim.Optimizer], dict]:
    """A task's optimiser (``Task.optimizer``) and its options but the learning rate. Adam, as every mode
    uses it: the set-up's betas and the fused kernel, a millisecond faster per step than the per-tensor
    loop on the small networks of these studies. RMSprop as Keras 2 defines it, which 3DGAN trains with:
    rho 0.9, epsilon 1e-7 (torch's alpha and eps)."""
    if name == "adam":
        return torch.optim.Adam, {"betas": betas, "fused": True}
    return torch.optim.RMSprop, {"alpha": 0.9, "eps": 1e-7}


def make_optimizer(name: str, parameters, lr: float, betas: tuple[float, float]) -> AnyOptimizer:
    """A task's optimiser on ``parameters``: Adam as ``optimizer_class`` defines it, stepped without
    torch.optim's import (``FusedAdam``, the same bits), or torch's RMSprop."""
    if name == "adam":
        return FusedAdam(parameters, lr, betas)
    kind, options = optimizer_class(name, betas)
    return kind(parameters, lr=lr, **options)


def adam(parameters, lr: float, betas: tuple[float, float]) -> FusedAdam:
    return FusedAdam(parameters, lr, betas)


def call_network(network: nn.Module, inputs: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor:
    """A network on its inputs (and labels, for a conditional pair), on the inputs' device."""
    if labels is None:
        return network(inputs)
    return network(inputs, labels.to(inputs.device))


def discriminator_step(
    task: Task,
    discriminator: nn.Module,
    generator: nn.Module,
    optimizer: AnyOptimizer,
    loss: AdversarialLoss,
    batch: Batch,
    sides: tuple[str, ...] = ("real", "fake"),
    fake: torch.Tensor | None = None,
) -> torch.Tensor:
    """One update on the ``sides`` of the batch (both, or 3DGAN's one update per side), on ``fake`` when
    given (the task reuses its fakes), else on fakes made here. ``batch.real`` lives on the
    discriminator's device and the generator's inputs on the generator's (seed 001 puts the two on
    different GPUs)."""
    terms = []
    if "fake" in sides:
        if fake is None:
            with torch.no_grad():
                fake = task.fake_for_discriminator(generator, batch)
        fake = fake.detach().to(batch.real.device)
    if "real" in sides:
        terms.append(task.real_loss(loss, task.judge(discriminator, batch.real, batch), batch))
    if "fake" in sides:
        terms.append(task.fake_loss(loss, task.judge(discriminator, fake, batch), batch))
    value = sum(terms[1:], terms[0])
    optimizer.zero_grad(set_to_none=True)
    value.backward()
    optimizer.step()
    return value.detach()


def generator_step(
    task: Task,
    generator: nn.Module,
    discriminator: nn.Module,
    optimizer: AnyOptimizer,
    loss: AdversarialLoss,
    batch: Batch,
    fake: torch.Tensor | None = None,
) -> torch.Tensor:
    """One update of the generator through ``fake`` (with its graph) when given, else through fakes made here."""
    # The discriminator only passes gradients through: computing its own would be wasted work.
    discriminator.requires_grad_(False)
    try:
        fake = task.fake(generator, batch) if fake is None else fake
        value = task.generator_loss(loss, task.judge(discriminator, fake.to(batch.real.device), batch), fake, batch)
        optimizer.zero_grad(set_to_none=True)
        value.backward()
    finally:
        discriminator.requires_grad_(True)
    optimizer.step()
    return value.detach()
