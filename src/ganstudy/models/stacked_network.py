"""N copies of any network built from common layers, run together: the general stacked form of a rank's
grid cells, for networks with no hand-stacked one (``dcgan``, the thesis's CNN28 and CNN64, a plugin's).

The copies' rows are folded into the batch dimension ([rows * samples, ...]), so that the network's own
``forward`` runs unchanged on a twin of it whose layers hold stacked tensors ([rows, ...]), swapped in by
``torch.func.functional_call``. Each layer with parameters or buffers unfolds the rows: a Linear is one
``baddbmm``; a convolution (1d to 3d, transposed or not) one grouped convolution over [samples, rows *
channels, ...]; a layer norm normalises each sample and applies its row's scale and shift; a batch norm
(1d to 3d) is one ``batch_norm`` over rows * channels (in training each row's batch statistics, its
running statistics updated in place); an nn.Dropout drops each row's block by the row's own key
(``KeyedDropout``: a grid cell's, which the loop's lone network uses alike, so both drop the same units).
Layers without tensors act on the folded batch as they are, so the forward code may reshape, concatenate
and apply functions freely, as long as dim 0 stays the samples and no sample's value depends on another's
(a batch norm in training mode, which has a stacked layer, aside).

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

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from ganstudy.models.stacked import linear_rows, separate, stable_sigmoid
from ganstudy.parallel.keyed_dropout import dropout_layers, keyed_dropout

Tensor = torch.Tensor
# Channels per group of a stacked convolution, in and out, at the least (see the module's doc). 16
# floats are one AVX-512 vector; 2 per group still took another kernel below 8 groups (measured).
MIN_GROUP_CHANNELS = 16
# Activations (floats, the layers' outputs) of one call at the most: a larger stack runs in chunks of
# rows, each chunk's shape checked like any stack's. The whole layout evaluates every cell's fitness in
# one call: 180 rows of CNN28 on 1,000 samples would hold some 40 GB at once.
CALL_FLOATS = 2**29


class _StackedLinear(nn.Module):
    def __init__(self, layer: nn.Linear) -> None:
        super().__init__()
        self.weight, self.bias = layer.weight, layer.bias

    def forward(self, x: Tensor) -> Tensor:
        h = x.reshape(self.weight.shape[0], -1, x.shape[-1])
        return linear_rows(h, self.weight.transpose(1, 2), self.bias).reshape(*x.shape[:-1], -1)


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


_CONVOLUTIONS = {
    nn.Conv1d: F.conv1d,
    nn.Conv2d: F.conv2d,
    nn.Conv3d: F.conv3d,
    nn.ConvTranspose1d: F.conv_transpose1d,
    nn.ConvTranspose2d: F.conv_transpose2d,
    nn.ConvTranspose3d: F.conv_transpose3d,
}


class _StackedConv(nn.Module):
    """A convolution (1d, 2d, 3d, transposed or not) of every row as one grouped convolution."""

    def __init__(self, layer: nn.modules.conv._ConvNd) -> None:
        super().__init__()
        if layer.groups != 1 or layer.padding_mode != "zeros":
            raise TypeError("a stacked convolution has groups=1 and padding_mode='zeros'")
        self.weight, self.bias = layer.weight, layer.bias
        self.convolve = _CONVOLUTIONS[type(layer)]
        self.transposed = layer.transposed
        self.options = dict(stride=layer.stride, padding=layer.padding, dilation=layer.dilation)
        if self.transposed:
            self.options["output_padding"] = layer.output_padding

    def forward(self, x: Tensor) -> Tensor:
        rows = self.weight.shape[0]
        # Weights: [rows, out, in, ...], or [rows, in, out, ...] when transposed.
        in_dim, out_dim = (1, 2) if self.transposed else (2, 1)
        outputs = self.weight.shape[out_dim]
        width = max(MIN_GROUP_CHANNELS, outputs)
        weight = _padded(_padded(self.weight, in_dim, MIN_GROUP_CHANNELS), out_dim, width)
        bias = None if self.bias is None else _padded(self.bias, 1, width).flatten()
        h = x.reshape(rows, -1, *x.shape[1:])
        h = _channels_folded(_padded(h, 2, MIN_GROUP_CHANNELS).flatten(0, 1), rows)
        y = _rows_folded(self.convolve(h, weight.flatten(0, 1), bias, groups=rows, **self.options), rows)
        return y[:, :outputs].contiguous() if width > outputs else y


class _StackedBatchNorm(nn.Module):
    """A batch norm (1d, 2d, 3d) of every row: in training each row's own batch statistics, with its
    running statistics updated in place; in evaluation its running statistics."""

    def __init__(self, layer: nn.modules.batchnorm._BatchNorm) -> None:
        super().__init__()
        if not layer.track_running_stats or layer.momentum is None:
            raise TypeError(
                "a stacked batch norm keeps running statistics with a momentum (track_running_stats=True, momentum set)"
            )
        self.weight, self.bias, self.eps, self.momentum = layer.weight, layer.bias, layer.eps, layer.momentum
        self.register_buffer("running_mean", layer.running_mean)
        self.register_buffer("running_var", layer.running_var)
        self.register_buffer("num_batches_tracked", layer.num_batches_tracked)

    def forward(self, x: Tensor) -> Tensor:
        rows = self.running_mean.shape[0]
        flat = lambda t: None if t is None else t.flatten()  # noqa: E731
        # The running statistics are contiguous [rows, channels]: flattened, views that batch_norm updates.
        y = F.batch_norm(
            _channels_folded(x, rows),
            self.running_mean.view(-1),
            self.running_var.view(-1),
            flat(self.weight),
            flat(self.bias),
            training=self.training,
            momentum=self.momentum,
            eps=self.eps,
        )
        return _rows_folded(y, rows)


class _StackedLayerNorm(nn.Module):
    """LayerNorm of every row: each sample normalised alone, then scaled and shifted by its row's tensors."""

    def __init__(self, layer: nn.LayerNorm) -> None:
        super().__init__()
        self.weight, self.bias = layer.weight, layer.bias
        self.shape, self.eps = tuple(layer.normalized_shape), layer.eps

    def forward(self, x: Tensor) -> Tensor:
        y = F.layer_norm(x, self.shape, None, None, self.eps)
        if self.weight is None:
            return y
        rows = self.weight.shape[0]
        h = y.reshape(rows, -1, *self.shape) * self.weight.unsqueeze(1)
        if self.bias is not None:
            h = h + self.bias.unsqueeze(1)
        return h.reshape(x.shape)


class _StableSigmoid(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return stable_sigmoid(x)


_STACKED_LAYERS = {
    nn.Linear: _StackedLinear,
    **{kind: _StackedConv for kind in _CONVOLUTIONS},
    **{kind: _StackedBatchNorm for kind in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)},
    nn.LayerNorm: _StackedLayerNorm,
}


class StackedNetwork:
    """The stacked form of ``network`` in StackedMLP's interface: ``stack`` the rows' state dicts, call with
    them on [rows, samples, ...] inputs, in evaluation or in training (``trains``: no dropout)."""

    def __init__(self, network: nn.Module) -> None:
        # nn.Dropout's masks keyed per row, numbered as ``keyed_dropout`` numbers a lone network's layers.
        self.twin = keyed_dropout(copy.deepcopy(network)).eval()
        self._dropouts = dropout_layers(self.twin)
        self._calls: list[int] = []  # the dropout layers' call counts when the current call began
        for parent_name, parent in list(self.twin.named_modules()):
            for name, child in list(parent.named_children()):
                where = f"{parent_name}.{name}" if parent_name else name
                stacked = _STACKED_LAYERS.get(type(child))
                if stacked is not None and (child._forward_hooks or child._forward_pre_hooks):
                    raise TypeError(
                        f"{where} ({type(child).__name__}): a layer with forward hooks (spectral_norm, weight_norm) "
                        "has no stacked form"
                    )
                if stacked is not None:
                    try:
                        setattr(parent, name, stacked(child))
                    except TypeError as error:
                        raise TypeError(f"{where} ({type(child).__name__}): {error}") from None
                elif list(child.parameters(recurse=False)) or list(child.buffers(recurse=False)):
                    raise TypeError(
                        f"{where}: a {type(child).__name__} has no stacked form "
                        f"(stacked layers: {', '.join(t.__name__ for t in _STACKED_LAYERS)})"
                    )
                elif isinstance(child, nn.Sigmoid):
                    setattr(parent, name, _StableSigmoid())
        state = self.twin.state_dict()
        if state.keys() != network.state_dict().keys():
            raise TypeError(f"its stacked twin holds {sorted(state)}, not the network's {sorted(network.state_dict())}")
        parameters = dict(self.twin.named_parameters())
        # Parameters first, then the floating buffers (running statistics); the integer ones (a batch
        # norm's count of batches) are ``counters``, which ``StackedPlayers`` keeps per row.
        self.names = tuple(
            [*parameters, *(n for n, t in state.items() if n not in parameters and t.is_floating_point())]
        )
        self.trainable = len(parameters)
        self.counters = tuple(n for n, t in state.items() if not t.is_floating_point())
        self.shapes = tuple(tuple(state[name].shape) for name in self.names)
        # nn.Dropout's masks are keyed per row; other dropout layers (Dropout2d, ...) would draw from the
        # process's generator for the whole stack.
        self.trains = not any(
            isinstance(m, nn.modules.dropout._DropoutNd) and type(m) is not nn.Dropout for m in network.modules()
        )
        self.drops = bool(self._dropouts)
        self._agrees: dict[tuple, bool] = {}
        self._floats: dict[tuple, int] = {}

    def stack(self, states: Sequence[dict[str, Tensor]], device: torch.device) -> list[Tensor]:
        """Stacked tensors on ``device`` of the names the first of ``states`` has, in ``names``' order: a
        state dict's parameters and buffers, or an optimizer's moments of the parameters."""
        return [torch.stack([state[name] for state in states]).to(device) for name in self.names if name in states[0]]

    def states(self, stacked: Sequence[Tensor]) -> list[dict[str, Tensor]]:
        """Each row's tensors (the first ``len(stacked)`` names) on the stack's device, each in a storage of
        its own."""
        laid = [t.detach().contiguous() for t in stacked]
        rows = len(laid[0])
        copies = separate([row for t in laid for row in t.unbind(0)])
        return [{name: copies[k * rows + r] for k, name in enumerate(self.names[: len(stacked)])} for r in range(rows)]

    def __call__(self, params: Sequence[Tensor], x: Tensor, training: bool = False) -> Tensor:
        """``x``: [rows, samples, ...] -> [rows, samples, ...] (the network's output per sample). In
        ``training``, batch norms use each row's batch and update its running statistics in ``params``,
        and dropout drops row r's samples by the r-th key of ``keyed_masks(self.twin, keys)``, which must
        be active if the network drops."""
        held = [layer.keys for layer in self._dropouts]
        keys = held[0] if training and self.drops else None
        if training and self.drops and (keys is None or len(keys) != len(x)):
            raise ValueError(
                f"{len(x)} rows of a network with dropout train inside keyed_masks(net.twin, keys) with a key per row"
            )
        # Every run below (chunks, pairs, checks) counts the dropout layers' calls from here; the call counts once.
        self._calls = [layer.calls for layer in self._dropouts]
        try:
            return self._stacked(params, x, training, keys)
        finally:
            for layer, layer_keys in zip(self._dropouts, held):
                layer.keys = layer_keys

    def _stacked(self, params: Sequence[Tensor], x: Tensor, training: bool, keys: np.ndarray | None) -> Tensor:
        rows = x.shape[0]
        chunk = max(1, CALL_FLOATS // (x.shape[1] * self._floats_per_sample(params, x)))
        if rows > chunk:
            return torch.cat(
                [
                    self._stacked(
                        [p[first : first + chunk] for p in params],
                        x[first : first + chunk],
                        training,
                        None if keys is None else keys[first : first + chunk],
                    )
                    for first in range(0, rows, chunk)
                ]
            )
        if rows == 1:
            return self._row_by_row(params, x, training, keys)
        key = (rows, tuple(x.shape[1:]), str(x.device), x.dtype, training, torch.is_grad_enabled())
        agrees = self._agrees.get(key)
        if agrees is None:
            agrees = self._agrees[key] = self._agrees_with_pairs(params, x, training, keys)
            if not agrees:
                warnings.warn(
                    f"stacked network: a stack of {rows} rows of {list(x.shape[1:])} gives other bits than a row "
                    "paired with a copy of itself on this machine; such stacks run row by row, in those pairs",
                    stacklevel=3,
                )
        return self._run(params, x, training, keys) if agrees else self._row_by_row(params, x, training, keys)

    def _floats_per_sample(self, params: Sequence[Tensor], x: Tensor) -> int:
        """The layers' output floats per sample of ``x``'s shape, counted once per shape on a pair of
        two of row 0's samples (in evaluation: no statistics updated, nothing drawn)."""
        shape = tuple(x.shape[2:])
        if shape not in self._floats:
            counted = []
            leaves = [m for m in self.twin.modules() if not list(m.children())]
            handles = [m.register_forward_hook(lambda _, __, out: counted.append(out.numel())) for m in leaves]
            try:
                with torch.no_grad():
                    pair, pair_x = _pairs(params, x[:, :2], [0, 0])
                    self._run(pair, pair_x, False, None)
            finally:
                for handle in handles:
                    handle.remove()
            self._floats[shape] = max(1, sum(counted) // pair_x.shape[:2].numel())
        return self._floats[shape]

    def _run(self, params: Sequence[Tensor], x: Tensor, training: bool, keys: np.ndarray | None) -> Tensor:
        rows, samples = x.shape[:2]
        for layer, calls in zip(self._dropouts, self._calls):
            layer.keys, layer.calls = keys, calls
        out = functional_call(
            self.twin.train(training), dict(zip(self.names, params)), (x.flatten(0, 1),), strict=False
        )
        return out.view(rows, samples, *out.shape[1:])

    def _row_by_row(self, params: Sequence[Tensor], x: Tensor, training: bool, keys: np.ndarray | None) -> Tensor:
        """Each row in a pair with a copy of itself (and of its key); in training its updated running
        statistics copied back."""
        outputs = []
        for row in range(len(x)):
            pair, pair_x = _pairs(params, x, [row, row])
            outputs.append(self._run(pair, pair_x, training, None if keys is None else keys[[row, row]])[:1])
            if training:
                # Through ``.data``, as batch_norm's kernel updates running statistics: without a version
                # bump, which would fail the backward of an earlier chunk that saved them (unused there).
                for stacked, paired in zip(params[self.trainable :], pair[self.trainable :]):
                    stacked.data[row].copy_(paired[0])
        return torch.cat(outputs)

    def _agrees_with_pairs(self, params: Sequence[Tensor], x: Tensor, training: bool, keys: np.ndarray | None) -> bool:
        """Whether the first and last rows of a stack of ``x``'s shape give the bits they give in a pair
        with a copy of themselves: outputs, updated running statistics and, where gradients are taken,
        the gradients of the parameters and of ``x``. On copies of the tensors: the caller's stay as they are."""

        def trial(rows: list[int] | None) -> list[Tensor]:
            tensors, inputs = (list(params), x) if rows is None else _pairs(params, x, rows)
            tensors = [t.detach().clone().requires_grad_(grads and k < self.trainable) for k, t in enumerate(tensors)]
            inputs = inputs.detach().clone().requires_grad_(grads)
            out = self._run(tensors, inputs, training, keys if keys is None or rows is None else keys[rows])
            found = [out.detach(), *tensors[self.trainable :]]
            if grads:
                found += torch.autograd.grad(out.square().sum(), [*tensors[: self.trainable], inputs])
            return found

        grads = torch.is_grad_enabled()
        whole = trial(None)
        return all(torch.equal(a[row], b[0]) for row in (0, len(x) - 1) for a, b in zip(whole, trial([row, row])))


def _pairs(params: Sequence[Tensor], x: Tensor, rows: list[int]) -> tuple[list[Tensor], Tensor]:
    index = torch.tensor(rows, device=x.device)
    return [p.index_select(0, index) for p in params], x.index_select(0, index)
