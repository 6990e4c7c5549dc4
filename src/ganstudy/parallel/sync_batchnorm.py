"""Batch norm over the global batch of a data-parallel step: every rank normalises its shard with the
mean and variance of all shards together, so that training on W ranks matches one rank with the same
global batch. torch's own SyncBatchNorm refuses CPU tensors; this one sums its statistics with an
all-reduce that autograd differentiates (the gradient of a sum over ranks is the sum over ranks of the
gradients), which works on any backend (gloo, nccl)."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn


class _SumOverRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:
        total = tensor.clone()
        dist.all_reduce(total)
        return total

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        total = grad.clone()
        dist.all_reduce(total)
        return total


def _global_sum(tensor: torch.Tensor) -> torch.Tensor:
    if dist.is_initialized() and dist.get_world_size() > 1:
        return _SumOverRanks.apply(tensor)
    return tensor


class GlobalBatchNorm(nn.modules.batchnorm._BatchNorm):
    """BatchNorm1d/2d/3d with batch statistics over every rank's rows. One all-reduce per call carries
    the count, sum and sum of squares; they are summed in float64, where E[x^2] - E[x]^2 loses nothing
    that float32 activations hold (a second, centred pass would cost a second collective)."""

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(input)
        if not self.training:
            return super().forward(input)
        x = input.float()
        dims = [0, *range(2, x.dim())]
        shape = [1, -1] + [1] * (x.dim() - 2)
        wide = x.double()
        local_count = torch.full((1,), x.numel() / x.shape[1], dtype=torch.float64, device=x.device)
        sums = _global_sum(torch.cat([wide.sum(dims), (wide * wide).sum(dims), local_count]))
        channels = x.shape[1]
        count = sums[-1].detach()
        mean64 = sums[:channels] / count
        var64 = (sums[channels : 2 * channels] / count - mean64 * mean64).clamp_min(0)
        mean, var = mean64.float(), var64.float()
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                momentum = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
                self.running_mean.lerp_(mean.detach(), momentum)
                self.running_var.lerp_((var64 * count / (count - 1).clamp_min(1)).float().detach(), momentum)
        out = (x - mean.view(shape)) * torch.rsqrt(var + self.eps).view(shape)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        return out


def globalise_batchnorm(module: nn.Module) -> nn.Module:
    """``module`` with every BatchNorm layer replaced, in place, by a GlobalBatchNorm holding the same
    parameters and running statistics."""
    for name, child in module.named_children():
        if isinstance(child, nn.modules.batchnorm._BatchNorm) and not isinstance(child, GlobalBatchNorm):
            replacement = GlobalBatchNorm(child.num_features, child.eps, child.momentum, child.affine, child.track_running_stats)
            replacement.load_state_dict(child.state_dict())
            replacement.to(next(child.buffers(), torch.empty(0)).device)
            setattr(module, name, replacement)
        else:
            globalise_batchnorm(child)
    return module
