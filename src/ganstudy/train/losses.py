"""Registered adversarial losses (Lipizzaner's names) on discriminator logits.

Discriminators return logits and every loss applies the sigmoid itself, in float32 and in its
with-logits form: a sigmoid output in bf16 or fp16 rounds to exactly 0 or 1 for large logits (above
about 8.3 in fp16), where binary cross-entropy on probabilities clamps and its gradient vanishes.

A loss is given per sample; its value is the mean over the last dimension. One network's outputs
(shape [B]) give a scalar; a stack of networks' outputs (shape [N, B], batched grid cells) give one
loss per network, each computed exactly as that network's alone would be: every term is built from
``logsigmoid`` (whose CPU kernel treats the elements past the last full vector block like the others)
and exact arithmetic, so a value's bits do not depend on where it sits in the buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ganstudy.registry import Registry, instance_of

Tensor = torch.Tensor
Term = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class AdversarialLoss:
    real_term: Term  # discriminator's loss on each logit of D(real)
    fake_term: Term  # discriminator's loss on each logit of D(fake)
    generator_term: Term  # generator's loss on each logit of D(G(z))

    def discriminator(self, d_real: Tensor, d_fake: Tensor) -> Tensor:
        return self.real_term(d_real).mean(-1) + self.fake_term(d_fake).mean(-1)

    def generator(self, d_fake: Tensor) -> Tensor:
        return self.generator_term(d_fake).mean(-1)


LOSSES: Registry[AdversarialLoss] = Registry("loss", "ganstudy.losses", instance_of(AdversarialLoss))


def _log_d(x: Tensor) -> Tensor:
    """log D of a logit: log sigmoid(x)."""
    return F.logsigmoid(x.float())


def _log_not_d(x: Tensor) -> Tensor:
    """log(1 - D) of a logit: log(1 - sigmoid(x)) = log sigmoid(-x)."""
    return F.logsigmoid(-x.float())


def _squared(target: float) -> Term:
    return lambda x: (_log_d(x).exp() - target).square()


def _neg(term: Term) -> Term:
    return lambda x: -term(x)


# Binary cross-entropy. Non-saturating generator loss: the generator maximises log D(G(z)), as
# Lipizzaner and DCGAN do.
BCE = AdversarialLoss(real_term=_neg(_log_d), fake_term=_neg(_log_not_d), generator_term=_neg(_log_d))

MSE = AdversarialLoss(real_term=_squared(1.0), fake_term=_squared(0.0), generator_term=_squared(1.0))

HEURISTIC = AdversarialLoss(
    real_term=_neg(_log_d), fake_term=_neg(_log_not_d), generator_term=lambda x: -0.5 * _log_d(x)
)
