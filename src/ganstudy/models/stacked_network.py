"""N copies of any network built from common layers, evaluated together: the stacked form of
convolutional networks (``dcgan``, the thesis's CNN28 and CNN64, a plugin's) for a rank's grid cells.

The copies' rows are folded into the batch dimension ([rows * samples, ...]), so that the network's own
``forward`` runs unchanged on a twin of it whose layers hold stacked tensors ([rows, ...]), swapped in
by ``torch.func.functional_call``. Each layer with parameters or buffers unfolds the rows: a Linear is
one ``baddbmm``; a convolution one grouped convolution over [samples, rows * channels, ...]; a batch
norm one ``batch_norm`` over rows * channels. Layers without tensors act on the folded batch as they
are, so the forward code may reshape, concatenate and apply functions freely, as long as dim 0 stays
the samples and no sample's value depends on another's (a batch norm in training mode, which has a
stacked layer, aside). The twin evaluates (``eval()``: running statistics, no dropout).

Bits. A grouped convolution's kernel is chosen by its shapes (oneDNN on AMD EPYC Zen 5: a stack of one,
and groups of one channel, take other kernels than larger ones, so a row's bits would depend on how many
rows share its stack, i.e. on the rank count). Hence a convolution's groups get at least
``MIN_GROUP_CHANNELS`` channels in and out (zero channels added: exact), a lone row runs as a pair with
a copy of itself, and every stack shape is checked once, on its first call, against pairs: its first and
last rows must give the bits that each gives in a pair with a copy of itself. A shape that fails runs
row by row in such pairs from then on (slower; the same bits, and the lone network's meaning even for
a forward that mixes samples). So a row's bits are its pair's, whatever shares its stack.
Against the lone network a row agrees within rounding.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from ganstudy.models.stacked import stable_sigmoid

Tensor = torch.Tensor
# Channels per group of a stacked convolution, in and out, at the least (see the module's doc). 16
# floats are one AVX-512 vector; 2 per group still took another kernel below 8 groups (measured).
MIN_GROUP_CHANNELS = 16


class _StackedLinear(nn.Module):
    def __init__(self, layer: nn.Linear) -> None:
        super().__init__()
        self.weight, self.bias = layer.weight, layer.bias

    def forward(self, x: Tensor) -> Tensor:
        rows = self.weight.shape[0]
        h = x.reshape(rows, -1, x.shape[-1])
        if self.weight.shape[1] == 1:
            # A one-unit layer is a matrix-vector product: BLAS takes another kernel for a stack of
            # one than for a longer stack (see StackedMLP).
            out = (h * self.weight).sum(-1, keepdim=True)
            out = out if self.bias is None else out + self.bias.unsqueeze(1)
        elif self.bias is None:
            out = torch.bmm(h, self.weight.transpose(1, 2))
        else:
            out = torch.baddbmm(self.bias.unsqueeze(1), h, self.weight.transpose(1, 2))
        return out.reshape(*x.shape[:-1], -1)


def _channels_folded(x: Tensor, rows: int) -> Tensor:
    """[rows * samples, C, ...] -> [samples, rows * C, ...]."""
    samples = x.shape[0] // rows
    return x.reshape(rows, samples, *x.shape[1:]).transpose(0, 1).reshape(samples, rows * x.shape[1], *x.shape[2:])


def _rows_folded(y: Tensor, rows: int) -> Tensor:
    """[samples, rows * C, ...] -> [rows * samples, C, ...]."""
    samples = y.shape[0]
    return y.view(samples, rows, -1, *y.shape[2:]).transpose(0, 1).reshape(rows * samples, -1, *y.shape[2:])


def _padded(t: Tensor, dim: int, size: int) -> Tensor:
    """``t`` with zeros appended along ``dim`` up to ``size``."""
    missing = size - t.shape[dim]
    if missing <= 0:
        return t
    return torch.cat([t, t.new_zeros(*t.shape[:dim], missing, *t.shape[dim + 1 :])], dim)


class _StackedConv(nn.Module):
    """Conv2d or ConvTranspose2d of every row as one grouped convolution."""

    def __init__(self, layer: nn.Conv2d | nn.ConvTranspose2d) -> None:
        super().__init__()
        if layer.groups != 1 or layer.padding_mode != "zeros":
            raise TypeError("a stacked convolution has groups=1 and padding_mode='zeros'")
        self.weight, self.bias = layer.weight, layer.bias
        self.transposed = isinstance(layer, nn.ConvTranspose2d)
        self.options = dict(stride=layer.stride, padding=layer.padding, dilation=layer.dilation)
        if self.transposed:
            self.options["output_padding"] = layer.output_padding

    def forward(self, x: Tensor) -> Tensor:
        rows = self.weight.shape[0]
        # Weights: [rows, out, in, ...] (Conv2d) or [rows, in, out, ...] (ConvTranspose2d).
        in_dim, out_dim = (1, 2) if self.transposed else (2, 1)
        outputs = self.weight.shape[out_dim]
        width = max(MIN_GROUP_CHANNELS, outputs)
        weight = _padded(_padded(self.weight, in_dim, MIN_GROUP_CHANNELS), out_dim, width)
        bias = None if self.bias is None else _padded(self.bias, 1, width).flatten()
        h = x.reshape(rows, -1, *x.shape[1:])
        h = _channels_folded(_padded(h, 2, MIN_GROUP_CHANNELS).flatten(0, 1), rows)
        convolve = F.conv_transpose2d if self.transposed else F.conv2d
        y = _rows_folded(convolve(h, weight.flatten(0, 1), bias, groups=rows, **self.options), rows)
        return y[:, :outputs].contiguous() if width > outputs else y


class _StackedBatchNorm(nn.Module):
    """BatchNorm2d of every row with the row's running statistics (evaluation)."""

    def __init__(self, layer: nn.BatchNorm2d) -> None:
        super().__init__()
        if not layer.track_running_stats:
            raise TypeError("a stacked batch norm keeps running statistics (track_running_stats=True)")
        self.weight, self.bias, self.eps = layer.weight, layer.bias, layer.eps
        self.register_buffer("running_mean", layer.running_mean)
        self.register_buffer("running_var", layer.running_var)
        self.register_buffer("num_batches_tracked", layer.num_batches_tracked)

    def forward(self, x: Tensor) -> Tensor:
        rows = self.running_mean.shape[0]
        flat = lambda t: None if t is None else t.flatten()  # noqa: E731
        y = F.batch_norm(_channels_folded(x, rows), self.running_mean.flatten(), self.running_var.flatten(),
                         flat(self.weight), flat(self.bias), training=False, eps=self.eps)
        return _rows_folded(y, rows)


class _StableSigmoid(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return stable_sigmoid(x)


_STACKED_LAYERS = {nn.Linear: _StackedLinear, nn.Conv2d: _StackedConv, nn.ConvTranspose2d: _StackedConv, nn.BatchNorm2d: _StackedBatchNorm}


class StackedNetwork:
    """The stacked form of ``network`` for evaluation, in StackedMLP's interface: ``stack`` the rows'
    state dicts, call with them on [rows, samples, ...] inputs."""

    def __init__(self, network: nn.Module) -> None:
        self.twin = copy.deepcopy(network).eval()
        for parent_name, parent in list(self.twin.named_modules()):
            for name, child in list(parent.named_children()):
                where = f"{parent_name}.{name}" if parent_name else name
                stacked = _STACKED_LAYERS.get(type(child))
                if stacked is not None:
                    try:
                        setattr(parent, name, stacked(child))
                    except TypeError as error:
                        raise TypeError(f"{where} ({type(child).__name__}): {error}") from None
                elif list(child.parameters(recurse=False)) or list(child.buffers(recurse=False)):
                    raise TypeError(f"{where}: a {type(child).__name__} has no stacked form "
                                    f"(stacked layers: {', '.join(t.__name__ for t in _STACKED_LAYERS)})")
                elif isinstance(child, nn.Sigmoid):
                    setattr(parent, name, _StableSigmoid())
        state = self.twin.state_dict()
        # The floating tensors of the state dict (parameters and running statistics); the batch count
        # of a batch norm is read only by momentum=None, which evaluation never uses.
        self.names = tuple(name for name, t in state.items() if t.is_floating_point())
        self.shapes = tuple(tuple(state[name].shape) for name in self.names)
        self._agrees: dict[tuple, bool] = {}

    def stack(self, states: Sequence[dict[str, Tensor]], device: torch.device) -> list[Tensor]:
        """Stacked tensors on ``device`` from per-row state dicts of the network."""
        return [torch.stack([state[name] for state in states]).to(device) for name in self.names]

    def __call__(self, params: Sequence[Tensor], x: Tensor) -> Tensor:
        """``x``: [rows, samples, ...] -> [rows, samples, ...] (the network's output per sample)."""
        rows = x.shape[0]
        if rows == 1:
            return self._run(*_pairs(params, x, [0, 0]))[:1]
        key = (rows, tuple(x.shape[1:]), str(x.device), x.dtype)
        agrees = self._agrees.get(key)
        if agrees is False:
            return torch.cat([self._run(*_pairs(params, x, [r, r]))[:1] for r in range(rows)])
        out = self._run(params, x)
        if agrees is None:
            agrees = self._agrees[key] = all(
                torch.equal(out[r], self._run(*_pairs(params, x, [r, r]))[0]) for r in (0, rows - 1)
            )
            if not agrees:
                warnings.warn(f"stacked network: a stack of {rows} rows of {list(x.shape[1:])} gives other bits than a row "
                              "paired with a copy of itself on this machine; such stacks run row by row, in those pairs", stacklevel=2)
                return self(params, x)
        return out

    def _run(self, params: Sequence[Tensor], x: Tensor) -> Tensor:
        rows, samples = x.shape[:2]
        out = functional_call(self.twin, dict(zip(self.names, params)), (x.flatten(0, 1),), strict=False)
        return out.view(rows, samples, *out.shape[1:])


def _pairs(params: Sequence[Tensor], x: Tensor, rows: list[int]) -> tuple[list[Tensor], Tensor]:
    index = torch.tensor(rows, device=x.device)
    return [p.index_select(0, index) for p in params], x.index_select(0, index)
