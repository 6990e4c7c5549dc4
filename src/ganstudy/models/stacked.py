"""N copies of a network evaluated together: the batched form of a stack of Linear layers.

Layer k of copy n computes ``x[n] @ W[n].T + b[n]`` with one ``torch.baddbmm`` for all copies, the
arithmetic of ``nn.Linear`` per copy. A copy's result does not depend on which other copies share the
stack (measured bit-identical to a lone ``nn.Linear`` on CPU), so stacking is invisible in the bits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

Tensor = torch.Tensor


def _sigmoid(x: Tensor) -> Tensor:
    # torch.sigmoid's CPU kernel computes the elements past the last full vector block another way, so
    # a value's bits would depend on where the stack ends; exp, add and divide do not (measured).
    return 1 / (1 + torch.exp(-x))


@dataclass(frozen=True)
class StackedMLP:
    names: tuple[str, ...]  # state_dict keys: weight, bias of each layer in order
    activations: tuple[Callable[[Tensor], Tensor], ...]  # one elementwise activation per layer
    output_shape: tuple[int, ...]  # per sample: (C, H, W) for a generator, () for a discriminator

    @classmethod
    def of(cls, sequential: nn.Sequential, prefix: str, output_shape: Sequence[int]) -> StackedMLP:
        """The stacked form of ``sequential``: Linear layers, each followed by one activation module."""
        names, activations = [], []
        modules = list(sequential.named_children())
        for (name, linear), (_, activation) in zip(modules[0::2], modules[1::2]):
            if not isinstance(linear, nn.Linear) or isinstance(activation, nn.Linear):
                raise TypeError(f"{prefix}{name}: a stacked network alternates Linear layers and activations")
            names += [f"{prefix}{name}.weight", f"{prefix}{name}.bias"]
            activations.append(_sigmoid if isinstance(activation, nn.Sigmoid) else activation)
        return cls(tuple(names), tuple(activations), tuple(output_shape))

    def stack(self, states: Sequence[dict[str, Tensor]]) -> list[Tensor]:
        """Fresh stacked parameters (copies) from the copies' state dicts."""
        return [torch.stack([state[name] for state in states]) for name in self.names]

    def state(self, params: Sequence[Tensor], row: int) -> dict[str, Tensor]:
        """Copy ``row``'s state dict, loadable into the lone network."""
        return {name: p[row].detach().clone() for name, p in zip(self.names, params)}

    def __call__(self, params: Sequence[Tensor], x: Tensor) -> Tensor:
        """``x``: [copies, samples, ...] -> [copies, samples, *output_shape]."""
        copies, samples = x.shape[:2]
        h = x.reshape(copies, samples, -1)
        for k, activation in enumerate(self.activations):
            weight, bias = params[2 * k], params[2 * k + 1]
            if weight.shape[1] == 1:
                # A one-unit layer is a matrix-vector product: BLAS takes another kernel for a stack of
                # one than for a longer stack, so its bits would depend on the cells sharing the rank.
                h = activation((h * weight).sum(-1, keepdim=True) + bias.unsqueeze(1))
            else:
                h = activation(torch.baddbmm(bias.unsqueeze(1), h, weight.transpose(1, 2)))
        return h.view(copies, samples, *self.output_shape)
