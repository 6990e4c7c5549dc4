"""Registered training tasks: what a pair's generator maps from and what each player's loss is.

A network names its task (``Network.task``); the pair-training modes look it up here (single and
data_parallel train every task; conditional, per_class and the grid the noise task only), so a new
kind of GAN needs a task, not a new training loop:

- ``noise``: the generator maps latent noise (and, for a conditional pair, the batch's labels) to
  images; the adversarial loss alone.
- ``paired``: pix2pix. The generator maps the batch's input images to outputs (its noise is dropout)
  and the discriminator judges (input, output) pairs; the generator's loss adds ``l1_weight`` times
  the L1 distance to the target, and the discriminator's is halved, as in the original.
- ``energy``: 3DGAN. The generator maps noise and primary energies to showers; the discriminator
  answers real/fake, the energy and the shower's voxel sum, and each player's loss is
  ``energy_loss_weights`` (2, 0.1, 0.1) times (adversarial, energy error, voxel-sum error), the errors
  as Keras' mean absolute percentage error. ``energy_loop`` holds the rest of 3DGAN's training loop
  (keras/EcalEnergyTrain.py), by default as it is there: fakes of energies drawn uniformly in
  [0.1, 5] whose voxel sum should follow its fit of the sum against the energy, 5% of the
  discriminator's real/fake targets flipped, the discriminator updated on the real batch and then on
  the fake batch (made in inference mode, as Keras' predict), two generator updates per step (each on
  fresh noise and energies), and RMSprop.

A task also says how a step is made of updates (``split_discriminator``, ``generator_steps``,
``reuse_fakes``) and which optimiser trains the pair (``optimizer``): the pair-training modes build
their steps from them.

A task draws one update's ``Batch`` for a global batch's rows; data parallelism slices it by rows, so
every rank sees the rows (and noise) one process would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.errors import GanstudyError
from ganstudy.registry import Registry, subclass_of
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
    flips: Tensor | None = None

    def rows(self, start: int, count: int) -> Batch:
        """Rows [start, start + count) of every tensor: a rank's or a micro-batch's share."""
        cut = lambda t: None if t is None else t[start : start + count]  # noqa: E731
        return Batch(
            cut(self.real),
            tuple(map(cut, self.inputs)),
            tuple(map(cut, self.context)),
            cut(self.conditions),
            cut(self.flips),
        )


@dataclass(frozen=True)
class TrainingData:
    """A pair's training rows on the discriminator's device: images, and labels (conditional pairs) or
    conditions (paired and energy tasks) when the task uses them."""

    images: Tensor
    labels: Tensor | None = None
    conditions: Tensor | None = None


class Task:
    """The noise task; other tasks override what differs."""

    optimizer = "adam"
    split_discriminator = False
    generator_steps = 1
    # Whether the generator's update reuses the fakes (and their graph) the discriminator's update was
    # given, instead of drawing a new batch and running the generator again.
    reuse_fakes = False

    def __init__(self, setup: TrainingSettings) -> None:
        self.latent_dim = setup.latent_dim

    def lr_factor(self, iteration: int) -> float:
        """The learning rate of 1-based ``iteration`` over the set-up's lr: constant."""
        return 1.0

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

    def fake_for_discriminator(self, generator: nn.Module, batch: Batch) -> Tensor:
        """The fakes a discriminator update judges when the generator's update does not share them."""
        return self.fake(generator, batch)

    def judge(self, discriminator: nn.Module, images: Tensor, batch: Batch) -> Tensor:
        return discriminator(images, *batch.context)

    def answer_shape(self, rows: int) -> tuple[int, ...] | None:
        """The shape of ``judge``'s answer for ``rows`` rows, which a network's discriminator must give
        (ganstudy.train.network_check); None: any. Here one logit per row."""
        return (rows,)

    def real_loss(self, loss: AdversarialLoss, d_real: Tensor, batch: Batch) -> Tensor:
        """The discriminator's loss on the real rows."""
        return loss.real_term(d_real).mean(-1)

    def fake_loss(self, loss: AdversarialLoss, d_fake: Tensor, batch: Batch) -> Tensor:
        """The discriminator's loss on the generated rows."""
        return loss.fake_term(d_fake).mean(-1)

    def generator_loss(self, loss: AdversarialLoss, d_fake: Tensor, fake: Tensor, batch: Batch) -> Tensor:
        return loss.generator(d_fake)


@dataclass(frozen=True)
class Jitter:
    """pix2pix's aligned-data augmentation (its --preprocess resize_and_crop and flip): one resize, crop
    and mirror per pair, applied to input and target alike."""

    load_size: int | None
    flip: bool

    def __call__(self, pairs: Tensor, rng: torch.Generator) -> Tensor:
        """(N, C, S, S) pairs (input and target stacked on channels) in [-1, 1], jittered. The random
        draws are made on the CPU for every row of the global batch, the same on every rank."""
        rows, side = len(pairs), pairs.shape[-1]
        if self.load_size is not None and self.load_size < side:
            raise GanstudyError(
                f"jitter.load_size {self.load_size} is smaller than the training images' side {side}: "
                "resize to at least that side before cropping back to it (pix2pix: 286 for 256)"
            )
        if self.load_size is not None:
            corners = torch.randint(self.load_size - side + 1, (rows, 2), generator=rng).to(pairs.device)
            # PIL's bicubic writes 8-bit pixels, so the original's values stay in range: clamp alike.
            large = F.interpolate(pairs, size=self.load_size, mode="bicubic", align_corners=False).clamp_(-1, 1)
            span = torch.arange(side, device=pairs.device)
            y = (corners[:, 0, None] + span)[:, None, :, None]
            x = (corners[:, 1, None] + span)[:, None, None, :]
            pairs = large[
                torch.arange(rows, device=pairs.device)[:, None, None, None],
                torch.arange(pairs.shape[1], device=pairs.device)[None, :, None, None],
                y,
                x,
            ]
        if self.flip:
            mirrored = (torch.rand(rows, generator=rng) < 0.5).to(pairs.device)
            pairs = torch.where(mirrored[:, None, None, None], pairs.flip(-1), pairs)
        return pairs


class PairedTask(Task):
    # pix2pix's optimize_parameters: one forward of the generator per step, its output detached for the
    # discriminator's update and differentiated for the generator's.
    reuse_fakes = True

    def __init__(self, setup: TrainingSettings) -> None:
        super().__init__(setup)
        self.l1_weight = setup.l1_weight
        jitter = setup.jitter
        self.jitter = Jitter(jitter.load_size, jitter.flip) if jitter and (jitter.load_size or jitter.flip) else None
        self.iterations, self.lr_decay = setup.iterations, setup.lr_decay_iterations or 0

    def lr_factor(self, iteration: int) -> float:
        """pix2pix's 'linear' policy with its scheduler stepped after each epoch: 1, then a linear decay
        over the last lr_decay_iterations."""
        return 1.0 - max(0, iteration - (self.iterations - self.lr_decay)) / (self.lr_decay + 1)

    def draw(self, data: TrainingData, rows: Tensor, noise_rng: torch.Generator, g_device: torch.device) -> Batch:
        inputs, targets = data.conditions[rows], data.images[rows]
        if self.jitter is not None:
            inputs, targets = self.jitter(torch.cat([inputs, targets], 1), noise_rng).split(
                [inputs.shape[1], targets.shape[1]], 1
            )
        return Batch(targets, (inputs.to(g_device),), (inputs,))

    def judge(self, discriminator: nn.Module, images: Tensor, batch: Batch) -> Tensor:
        # A PatchGAN judges every patch: its (N, patches) outputs count as N * patches samples of the loss.
        return discriminator(batch.context[0], images).reshape(-1)

    def answer_shape(self, rows: int) -> tuple[int, ...] | None:
        return None  # any number of patches per row, flattened by judge

    # Halved, as pix2pix does, to slow the discriminator relative to the generator.
    def real_loss(self, loss: AdversarialLoss, d_real: Tensor, batch: Batch) -> Tensor:
        return 0.5 * super().real_loss(loss, d_real, batch)

    def fake_loss(self, loss: AdversarialLoss, d_fake: Tensor, batch: Batch) -> Tensor:
        return 0.5 * super().fake_loss(loss, d_fake, batch)

    def generator_loss(self, loss: AdversarialLoss, d_fake: Tensor, fake: Tensor, batch: Batch) -> Tensor:
        l1 = (fake.to(batch.real.device) - batch.real).abs().mean()
        return loss.generator(d_fake) + self.l1_weight * l1


def percentage_error(predicted: Tensor, target: Tensor) -> Tensor:
    """Keras' mean_absolute_percentage_error, which 3DGAN trains with: in percent, targets clipped
    away from 0."""
    return 100.0 * ((target - predicted).abs() / target.abs().clamp_min(1e-7)).mean()


@dataclass(frozen=True)
class EnergyLoop:
    """3DGAN's training loop (the set-up's ``energy_loop``)."""

    fake_energies: str
    fake_energy_range: tuple[float, float]
    sum_fit: tuple[float, ...]
    label_flip: float
    split_discriminator_step: bool
    generator_steps: int
    optimizer: str
    discriminator_fakes: str

    @classmethod
    def from_setup(cls, setup: TrainingSettings) -> EnergyLoop:
        loop = setup.energy_loop
        return cls(
            loop.fake_energies,
            loop.fake_energy_range,
            loop.sum_fit,
            loop.label_flip,
            loop.split_discriminator_step,
            loop.generator_steps,
            loop.optimizer,
            loop.discriminator_fakes,
        )

    def expected_sum(self, energy: Tensor) -> Tensor:
        """3DGAN's GetEcalFit: the voxel sum a shower of ``energy`` (100 GeV units) should have, in the
        loader's units (depositions times 100): its fitted sampling fraction in percent times the energy
        in GeV."""
        e = energy.double()
        fraction = torch.zeros_like(e)
        for coefficient in self.sum_fit:  # Horner's rule, highest power first, as numpy's polyval
            fraction = fraction * e + coefficient
        return (fraction * e * 100.0).to(energy.dtype)


class EnergyTask(Task):
    def __init__(self, setup: TrainingSettings) -> None:
        super().__init__(setup)
        self.adversarial, self.energy_weight, self.sum_weight = setup.energy_loss_weights
        self.loop = EnergyLoop.from_setup(setup)
        self.optimizer = self.loop.optimizer
        self.split_discriminator = self.loop.split_discriminator_step
        self.generator_steps = self.loop.generator_steps

    def draw(self, data: TrainingData, rows: Tensor, noise_rng: torch.Generator, g_device: torch.device) -> Batch:
        z = torch.randn(len(rows), self.latent_dim, generator=noise_rng)
        real_energy = data.conditions[rows]
        if self.loop.fake_energies == "uniform":
            low, high = self.loop.fake_energy_range
            energy = (low + (high - low) * torch.rand(len(rows), 1, generator=noise_rng)).to(real_energy.dtype)
        else:
            # Fakes get the real batch's energies, so they keep the data's energy spectrum.
            energy = real_energy.cpu()
        # Column 0 flips a real row's target, column 1 a fake row's (3DGAN's BitFlip on each).
        flips = torch.rand(len(rows), 2, generator=noise_rng) < self.loop.label_flip if self.loop.label_flip else None
        return Batch(
            data.images[rows],
            (z.to(g_device), energy.to(g_device)),
            (),
            real_energy,
            None if flips is None else flips.to(real_energy.device),
        )

    def fake_for_discriminator(self, generator: nn.Module, batch: Batch) -> Tensor:
        if self.loop.discriminator_fakes == "training":
            return self.fake(generator, batch)
        # Keras' predict, which makes 3DGAN's fakes: batch norm on its running statistics, which this
        # call leaves as they are.
        generator.eval()
        try:
            return self.fake(generator, batch)
        finally:
            generator.train()

    def answer_shape(self, rows: int) -> tuple[int, ...] | None:
        return (rows, 3)  # per row: the real/fake logit, the energy, the voxel sum

    def _errors(self, judged: Tensor, energy: Tensor, target_sum: Tensor) -> Tensor:
        return self.energy_weight * percentage_error(
            judged[:, 1], energy.reshape(-1)
        ) + self.sum_weight * percentage_error(judged[:, 2], target_sum)

    def _fake_errors(self, judged: Tensor, batch: Batch) -> Tensor:
        energy = batch.inputs[1].to(judged.device)
        if self.loop.fake_energies == "uniform":
            return self._errors(judged, energy, self.loop.expected_sum(energy.reshape(-1)))
        # The real shower of the same energy gives the voxel sum to aim for.
        return self._errors(judged, energy, batch.real.flatten(1).sum(1))

    @staticmethod
    def _flipped(judged: Tensor, kept: Callable, flipped: Callable, flips: Tensor | None) -> Tensor:
        if flips is None:
            return kept(judged).mean(-1)
        return torch.where(flips, flipped(judged), kept(judged)).mean(-1)

    def real_loss(self, loss: AdversarialLoss, d_real: Tensor, batch: Batch) -> Tensor:
        # On real showers the sum column is their own sum: that error is zero and carries no gradient.
        flips = None if batch.flips is None else batch.flips[:, 0]
        adversarial = self._flipped(d_real[:, 0], loss.real_term, loss.fake_term, flips)
        return self.adversarial * adversarial + self._errors(d_real, batch.conditions, batch.real.flatten(1).sum(1))

    def fake_loss(self, loss: AdversarialLoss, d_fake: Tensor, batch: Batch) -> Tensor:
        flips = None if batch.flips is None else batch.flips[:, 1]
        adversarial = self._flipped(d_fake[:, 0], loss.fake_term, loss.real_term, flips)
        return self.adversarial * adversarial + self._fake_errors(d_fake, batch)

    def generator_loss(self, loss: AdversarialLoss, d_fake: Tensor, fake: Tensor, batch: Batch) -> Tensor:
        return self.adversarial * loss.generator(d_fake[:, 0]) + self._fake_errors(d_fake, batch)


TASKS: Registry[type[Task]] = Registry("training task", "ganstudy.tasks", subclass_of(Task))
