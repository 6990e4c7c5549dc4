"""Registered training tasks: what a pair's generator maps from and what each player's loss is.

A network names its task (``Network.task``); the pair-training modes look it up here (single and
data_parallel train every task; conditional, per_class and the grid the noise task only), so a new
kind of GAN needs a task, not a new training loop:

- ``noise``: the generator maps latent noise (and, for a conditional pair, the batch's labels) to
  images; the adversarial loss alone.
- ``paired``: pix2pix. The generator maps the batch's input images to outputs (its noise is dropout)
  and the discriminator judges (input, output) pairs; the generator's loss adds ``l1_weight`` times
  the L1 distance to the target, and the discriminator's is halved, as in the original.
- ``energy``: 3DGAN. The generator maps noise and the batch's primary energies to showers; the
  discriminator answers real/fake, the energy and the shower's voxel sum, and each player's loss is
  ``energy_loss_weights`` (2, 0.1, 0.1) times (adversarial, energy error, voxel-sum error), the errors
  as Keras' mean absolute percentage error. Unlike 3DGAN's loop, a step updates the discriminator once
  on the real and fake batch together and the generator once, without label flips.

A task draws one update's ``Batch`` for a global batch's rows; data parallelism slices it by rows, so
every rank sees the rows (and noise) one process would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from ganstudy.registry import Registry
from ganstudy.train.losses import AdversarialLoss

Tensor = torch.Tensor


@dataclass(frozen=True)
class Batch:
    """One update's rows: ``real`` (target images, on the discriminator's device), the generator's call
    arguments (on its device), the discriminator's extra call arguments and the rows' conditions
    (on the discriminator's device)."""

    real: Tensor
    inputs: tuple[Tensor, ...]
    context: tuple[Tensor, ...] = ()
    conditions: Tensor | None = None

    def rows(self, start: int, count: int) -> Batch:
        """Rows [start, start + count) of every tensor: a rank's or a micro-batch's share."""
        cut = lambda t: t[start : start + count]  # noqa: E731
        return Batch(cut(self.real), tuple(map(cut, self.inputs)), tuple(map(cut, self.context)),
                     None if self.conditions is None else cut(self.conditions))


@dataclass(frozen=True)
class TrainingData:
    """A pair's training rows on the discriminator's device: images, and labels (conditional pairs) or
    conditions (paired and energy tasks) when the task uses them."""

    images: Tensor
    labels: Tensor | None = None
    conditions: Tensor | None = None


class Task:
    """The noise task; other tasks override what differs."""

    def __init__(self, setup: dict[str, Any]) -> None:
        self.latent_dim = setup["latent_dim"]

    def draw(self, data: TrainingData, rows: Tensor, noise_rng: torch.Generator, g_device: torch.device) -> Batch:
        """One update's batch. Noise is drawn on the CPU for the whole global batch, so the numbers do not
        depend on the device or on how ranks split the rows."""
        z = torch.randn(len(rows), self.latent_dim, generator=noise_rng)
        if data.labels is None:
            return Batch(data.images[rows], (z.to(g_device),))
        labels = data.labels[rows]
        # Conditional pairs label the fakes like the real batch: the classes keep the data's prior.
        return Batch(data.images[rows], (z.to(g_device), labels.to(g_device)), (labels,))

    def fake(self, generator: nn.Module, batch: Batch) -> Tensor:
        return generator(*batch.inputs)

    def judge(self, discriminator: nn.Module, images: Tensor, batch: Batch) -> Tensor:
        return discriminator(images, *batch.context)

    def discriminator_loss(self, loss: AdversarialLoss, d_real: Tensor, d_fake: Tensor, batch: Batch) -> Tensor:
        return loss.discriminator(d_real, d_fake)

    def generator_loss(self, loss: AdversarialLoss, d_fake: Tensor, fake: Tensor, batch: Batch) -> Tensor:
        return loss.generator(d_fake)


class PairedTask(Task):
    def __init__(self, setup: dict[str, Any]) -> None:
        super().__init__(setup)
        self.l1_weight = setup["l1_weight"]

    def draw(self, data: TrainingData, rows: Tensor, noise_rng: torch.Generator, g_device: torch.device) -> Batch:
        inputs = data.conditions[rows]
        return Batch(data.images[rows], (inputs.to(g_device),), (inputs,))

    def judge(self, discriminator: nn.Module, images: Tensor, batch: Batch) -> Tensor:
        # A PatchGAN judges every patch: its (N, patches) outputs count as N * patches samples of the loss.
        return discriminator(batch.context[0], images).reshape(-1)

    def discriminator_loss(self, loss: AdversarialLoss, d_real: Tensor, d_fake: Tensor, batch: Batch) -> Tensor:
        # Halved, as pix2pix does, to slow the discriminator relative to the generator.
        return 0.5 * loss.discriminator(d_real, d_fake)

    def generator_loss(self, loss: AdversarialLoss, d_fake: Tensor, fake: Tensor, batch: Batch) -> Tensor:
        l1 = (fake.to(batch.real.device) - batch.real).abs().mean()
        return loss.generator(d_fake) + self.l1_weight * l1


def percentage_error(predicted: Tensor, target: Tensor) -> Tensor:
    """Keras' mean_absolute_percentage_error, which 3DGAN trains with: in percent, targets clipped
    away from 0."""
    return 100.0 * ((target - predicted).abs() / target.abs().clamp_min(1e-7)).mean()


class EnergyTask(Task):
    def __init__(self, setup: dict[str, Any]) -> None:
        super().__init__(setup)
        self.adversarial, self.energy_weight, self.sum_weight = setup["energy_loss_weights"]

    def draw(self, data: TrainingData, rows: Tensor, noise_rng: torch.Generator, g_device: torch.device) -> Batch:
        z = torch.randn(len(rows), self.latent_dim, generator=noise_rng)
        # Fakes get the real batch's energies, so they keep the data's energy spectrum.
        energy = data.conditions[rows]
        return Batch(data.images[rows], (z.to(g_device), energy.to(g_device)), (), energy)

    def _errors(self, judged: Tensor, batch: Batch) -> Tensor:
        # The real shower of the same energy gives the voxel sum to aim for (3DGAN fits it as a function of
        # the energy); on real showers the sum column matches it exactly and carries no gradient.
        energy = batch.conditions.reshape(-1)
        target_sum = batch.real.flatten(1).sum(1)
        return self.energy_weight * percentage_error(judged[:, 1], energy) + self.sum_weight * percentage_error(judged[:, 2], target_sum)

    def discriminator_loss(self, loss: AdversarialLoss, d_real: Tensor, d_fake: Tensor, batch: Batch) -> Tensor:
        return (self.adversarial * loss.discriminator(d_real[:, 0], d_fake[:, 0])
                + self._errors(d_real, batch) + self._errors(d_fake, batch))

    def generator_loss(self, loss: AdversarialLoss, d_fake: Tensor, fake: Tensor, batch: Batch) -> Tensor:
        return self.adversarial * loss.generator(d_fake[:, 0]) + self._errors(d_fake, batch)


TASKS: Registry[Callable[[dict[str, Any]], Task]] = Registry("training task")
TASKS.register("noise")(Task)
TASKS.register("paired")(PairedTask)
TASKS.register("energy")(EnergyTask)
