"""Batch norm over the global batch of a data-parallel step: every rank normalises its shard with the
mean and variance of all shards together, so that training on W ranks matches one rank with the same
global batch. torch's own SyncBatchNorm refuses CPU tensors (its fused statistics kernels are CUDA
only); this one works on any backend (gloo, nccl) with one all-reduce forward and one backward per
layer, and normalises with torch's own batch-norm kernel."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


def _ranks() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def _moments(x: torch.Tensor, dims: list[int]) -> tuple[torch.Tensor, torch.Tensor, float]:
    """The global batch's per-channel mean and biased variance (float64) and its row count. Each rank
    sends its count, count * mean and count * E[x^2] from its own (numerically stable) variance and
    mean; in float64 the global E[x^2] - mean^2 loses nothing of them."""
    var, mean = torch.var_mean(x, dims, correction=0)
    count = x.numel() / x.shape[1]
    if _ranks() == 1:
        return mean.double(), var.double(), count
    mean64 = mean.double()
    packed = torch.cat([mean64 * count, (var.double() + mean64 * mean64) * count, mean64.new_full((1,), count)])
    dist.all_reduce(packed)
    channels = x.shape[1]
    total = float(packed[-1])
    mean64 = packed[:channels] / total
    return mean64, (packed[channels : 2 * channels] / total - mean64 * mean64).clamp_min(0), total


class _GlobalNormalise(torch.autograd.Function):
    """y = (x - mean) * invstd * weight + bias with the global batch's mean and invstd, differentiated
    as batch norm over the global batch: each rank's input gradient takes the sums of dy and
    dy * (x - mean) over every rank (one all-reduce), its weight and bias gradients its own rows'."""

    @staticmethod
    def forward(ctx, x, weight, bias, mean, var, eps, count):  # noqa: ANN001, ANN205 (autograd's signature)
        invstd = torch.rsqrt(var + eps)
        ctx.save_for_backward(x, weight, mean, invstd)
        ctx.count = count
        return F.batch_norm(x, mean, var, weight, bias, training=False, eps=eps)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        x, weight, mean, invstd = ctx.saved_tensors
        dims = [0, *range(2, x.dim())]
        shape = [1, -1] + [1] * (x.dim() - 2)
        centred = x - mean.view(shape)
        local = torch.cat([grad.sum(dims), (grad * centred).sum(dims)])
        total = local.clone()
        if _ranks() > 1:
            dist.all_reduce(total)
        channels = x.shape[1]
        sum_dy, sum_dy_centred = total[:channels] / ctx.count, total[channels:] / ctx.count
        scale = invstd if weight is None else invstd * weight
        grad_x = (grad - sum_dy.view(shape) - centred * (sum_dy_centred * invstd * invstd).view(shape)) * scale.view(
            shape
        )
        grad_weight = local[channels:] * invstd if weight is not None and ctx.needs_input_grad[1] else None
        grad_bias = local[:channels] if weight is not None and ctx.needs_input_grad[2] else None
        return grad_x, grad_weight, grad_bias, None, None, None, None


class GlobalBatchNorm(nn.modules.batchnorm._BatchNorm):
    """BatchNorm1d/2d/3d with batch statistics over every rank's rows."""

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(input)
        if not self.training:
            return super().forward(input)
        x = input.float()
        dims = [0, *range(2, x.dim())]
        with torch.no_grad():
            mean64, var64, count = _moments(x, dims)
        mean, var = mean64.float(), var64.float()
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                momentum = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
                self.running_mean.lerp_(mean, momentum)
                self.running_var.lerp_((var64 * count / max(count - 1, 1)).float(), momentum)
        return _GlobalNormalise.apply(x, self.weight, self.bias, mean, var, self.eps, count)


def globalise_batchnorm(module: nn.Module) -> nn.Module:
    """``module`` with every BatchNorm layer replaced, in place, by a GlobalBatchNorm holding the same
    parameters and running statistics."""
    for name, child in module.named_children():
        if isinstance(child, nn.modules.batchnorm._BatchNorm) and not isinstance(child, GlobalBatchNorm):
            replacement = GlobalBatchNorm(
                child.num_features, child.eps, child.momentum, child.affine, child.track_running_stats
            )
            replacement.load_state_dict(child.state_dict())
            replacement.to(next(child.buffers(), torch.empty(0)).device)
            setattr(module, name, replacement)
        else:
            globalise_batchnorm(child)
    return module
