"""StackedNetwork: any network's copies evaluated together (grid fitness and mixture images of
convolutional cells), checked against the lone networks and for bits that do not depend on the stack."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.stacked_network import StackedNetwork

# A stack shape whose rows differ from their pairs runs row by row, correct but unstacked: here that would
# hide a layer that mixes rows, so it fails (the test that wants it catches the warning itself).
pytestmark = pytest.mark.filterwarnings("error:stacked network:UserWarning")
CPU = torch.device("cpu")
# (network, image shape, latent size, samples per row)
NETWORKS = [("dcgan", (1, 8, 8), 16, 12), ("cnn28", (1, 28, 28), 8, 3)]


def copies(name, shape, latent, count):
    """``count`` pairs in evaluation mode, with batch-norm statistics and affine parameters of their own."""
    pairs = []
    for seed in range(count):
        torch.manual_seed(seed)
        pair = build_pair(name, NetworkSpec(shape, latent, 0))
        for module in [m for net in pair for m in net.modules() if isinstance(m, nn.BatchNorm2d)]:
            module.running_mean.normal_(0, 0.2)
            module.running_var.uniform_(0.5, 2.0)
            module.weight.data.normal_(1.0, 0.1)
            module.bias.data.normal_(0.0, 0.1)
        pairs.append(tuple(net.eval() for net in pair))
    return pairs


@pytest.mark.parametrize("name, shape, latent, samples", NETWORKS)
def test_each_row_computes_what_its_lone_network_computes(name, shape, latent, samples, one_thread):
    pairs = copies(name, shape, latent, 3)
    g_net, d_net = StackedNetwork(pairs[0][0]), StackedNetwork(pairs[0][1])
    z = torch.randn(3, samples, latent)
    with torch.no_grad():
        images = g_net(g_net.stack([g.state_dict() for g, _ in pairs], CPU), z)
        scores = d_net(d_net.stack([d.state_dict() for _, d in pairs], CPU), images)
        for row, (g, d) in enumerate(pairs):
            torch.testing.assert_close(images[row], g(z[row]), rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(scores[row], d(images[row]), rtol=1e-5, atol=1e-6)
    assert images.shape == (3, samples, *shape) and scores.shape == (3, samples)


@pytest.mark.parametrize("name, shape, latent, samples", NETWORKS)
def test_a_row_gives_the_same_bits_in_any_stack_at_any_place(name, shape, latent, samples, one_thread):
    # Nine: oneDNN takes other kernels for grouped convolutions of fewer than 8 one-channel groups (AMD
    # EPYC Zen 5), which StackedNetwork's padding of groups to 16 channels keeps out.
    pairs = copies(name, shape, latent, 9)
    g_net, d_net = StackedNetwork(pairs[0][0]), StackedNetwork(pairs[0][1])
    g_params = g_net.stack([g.state_dict() for g, _ in pairs], CPU)
    d_params = d_net.stack([d.state_dict() for _, d in pairs], CPU)
    z = torch.randn(9, samples, latent)
    with torch.no_grad():
        images, scores = g_net(g_params, z), d_net(d_params, g_net(g_params, z))
        # Row 2 alone, first of three, last of three, in the middle of five, among nine.
        for rows in ([2], [2, 0, 1], [4, 0, 2], [0, 1, 2, 3, 4], list(range(9))):
            index = torch.tensor(rows)
            place = rows.index(2)
            assert torch.equal(g_net([p[index] for p in g_params], z[index])[place], images[2])
            assert torch.equal(d_net([p[index] for p in d_params], images[index])[place], scores[2])


class _Centred(nn.Module):
    """Breaks the stacking contract: a sample's value depends on the other samples of its batch."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        h = self.linear(x)
        return h - h.mean(0)


def test_a_stack_whose_rows_differ_from_their_pairs_runs_row_by_row_and_says_so(one_thread):
    nets = []
    for seed in range(3):
        torch.manual_seed(seed)
        nets.append(_Centred())
    stacked = StackedNetwork(nets[0])
    params = stacked.stack([net.state_dict() for net in nets], CPU)
    x = torch.randn(3, 6, 4)
    with (
        torch.no_grad(),
        pytest.warns(UserWarning, match="a stack of 3 rows of \\[6, 4\\] gives other bits than a row paired"),
    ):
        out = stacked(params, x)
    with torch.no_grad():
        for row, net in enumerate(nets):
            torch.testing.assert_close(out[row], net(x[row]))
            assert torch.equal(stacked([p[row : row + 1] for p in params], x[row : row + 1])[0], out[row])


def test_a_layer_with_no_stacked_form_is_named():
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.GroupNorm(2, 4))
    with pytest.raises(
        TypeError, match="^1: a GroupNorm has no stacked form \\(stacked layers: Linear, Conv1d, .*, LayerNorm\\)"
    ):
        StackedNetwork(net)
    with pytest.raises(TypeError, match="^0 \\(Conv2d\\): a stacked convolution has groups=1"):
        StackedNetwork(nn.Sequential(nn.Conv2d(4, 4, 3, groups=2)))


def training_run(net, params, z):
    """Outputs, parameter gradients and updated running statistics of a training pass of ``net`` (stacked)."""
    params = [p.clone().requires_grad_(k < net.trainable) for k, p in enumerate(params)]
    out = net(params, z, training=True)
    grads = torch.autograd.grad(out.square().sum(), params[: net.trainable])
    return out.detach(), list(grads), params[net.trainable :]


def test_in_training_each_row_normalises_by_its_own_batch_as_its_lone_network_does(one_thread):
    generators = [g.train() for g, _ in copies("dcgan", (1, 8, 8), 16, 3)]
    stacked = StackedNetwork(generators[0])
    z = torch.randn(3, 12, 16)
    out, grads, statistics = training_run(stacked, stacked.stack([g.state_dict() for g in generators], CPU), z)
    for row, g in enumerate(generators):
        lone = g(z[row])
        torch.testing.assert_close(out[row], lone.detach(), rtol=1e-5, atol=1e-6)
        lone_grads = torch.autograd.grad(lone.square().sum(), list(g.parameters()))
        for name, grad, lone_grad in zip(stacked.names, grads, lone_grads):
            torch.testing.assert_close(grad[row], lone_grad, rtol=1e-4, atol=1e-5, msg=name)
        # The lone network's training pass updated its running statistics: the row's are the same.
        state = g.state_dict()
        for name, value in zip(stacked.names[stacked.trainable :], statistics):
            torch.testing.assert_close(value[row], state[name], rtol=1e-5, atol=1e-7, msg=name)


def test_in_training_a_row_gives_the_same_bits_in_any_stack(one_thread):
    generators = [g for g, _ in copies("dcgan", (1, 8, 8), 16, 9)]
    stacked = StackedNetwork(generators[0])
    params = stacked.stack([g.state_dict() for g in generators], CPU)
    z = torch.randn(9, 12, 16)
    whole = training_run(stacked, params, z)
    for rows in ([2], [2, 0, 1], [4, 0, 2], [0, 1, 2, 3, 4]):
        index = torch.tensor(rows)
        part = training_run(stacked, [p[index] for p in params], z[index])
        for a, b in zip([part[0], *part[1], *part[2]], [whole[0], *whole[1], *whole[2]]):
            assert torch.equal(a[rows.index(2)], b[2])


def test_dropout_trains_stacked_with_a_key_per_row_and_other_dropout_layers_do_not():
    _, discriminator = build_pair("dcgan", NetworkSpec((1, 8, 8), 16, 0))
    stacked = StackedNetwork(discriminator)
    assert stacked.trains and stacked.drops
    params = stacked.stack([discriminator.state_dict()] * 2, CPU)
    with pytest.raises(ValueError, match="2 rows of a network with dropout train inside keyed_masks"):
        stacked(params, torch.randn(2, 4, 1, 8, 8), training=True)
    assert not StackedNetwork(nn.Sequential(nn.Conv2d(1, 2, 3), nn.Dropout2d(0.5))).trains


def test_a_stack_too_large_for_one_call_runs_in_chunks_with_the_same_bits(monkeypatch, one_thread):
    import ganstudy.models.stacked_network as module

    generators = [g for g, _ in copies("dcgan", (1, 8, 8), 16, 5)]
    stacked = StackedNetwork(generators[0])
    params = stacked.stack([g.state_dict() for g in generators], CPU)
    z = torch.randn(5, 12, 16)
    whole = training_run(stacked, params, z)
    # dcgan's generator on 8x8 digits: 16 x 2 x 2 after its linear layer, then maps of 128 and 64 at 4x4 and 8x8.
    assert stacked._floats[(16,)] > 8 * 8 * 64
    monkeypatch.setattr(module, "CALL_FLOATS", 2 * 12 * stacked._floats[(16,)])  # two rows a call
    calls = []
    monkeypatch.setattr(
        StackedNetwork,
        "_run",
        lambda self, p, x, *rest, run=StackedNetwork._run: calls.append(len(x)) or run(self, p, x, *rest),
    )
    chunked = training_run(stacked, params, z)
    assert 2 in calls and max(calls) == 2
    for a, b in zip([chunked[0], *chunked[1], *chunked[2]], [whole[0], *whole[1], *whole[2]]):
        assert torch.equal(a, b)


class _Sequence(nn.Module):
    """A lab's network of other layer kinds: 1d convolutions with batch norm, a layer norm, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(2, 8, 3, padding=1),
            nn.BatchNorm1d(8),
            nn.ReLU(),
            nn.ConvTranspose1d(8, 4, 4, stride=2, padding=1),
        )
        self.norm = nn.LayerNorm([4, 12])
        self.head = nn.Linear(48, 5)

    def forward(self, x):
        return self.head(self.norm(self.body(x)).flatten(1))


def test_one_dimensional_convolutions_batch_and_layer_norms_stack_too(one_thread):
    nets = []
    for seed in range(5):
        torch.manual_seed(seed)
        net = _Sequence()
        net.norm.weight.data.normal_(1.0, 0.1)
        nets.append(net.train())
    stacked = StackedNetwork(nets[0])
    assert stacked.trains and stacked.counters == ("body.1.num_batches_tracked",)
    params = stacked.stack([net.state_dict() for net in nets], CPU)
    x = torch.randn(5, 7, 2, 6)
    whole = training_run(stacked, params, x)
    for row, net in enumerate(nets):
        lone = net(x[row])
        torch.testing.assert_close(whole[0][row], lone.detach(), rtol=1e-5, atol=1e-6)
        for grad, lone_grad in zip(whole[1], torch.autograd.grad(lone.square().sum(), list(net.parameters()))):
            torch.testing.assert_close(grad[row], lone_grad, rtol=1e-4, atol=1e-5)
    for rows in ([2], [4, 0, 2]):
        part = training_run(stacked, [p[torch.tensor(rows)] for p in params], x[torch.tensor(rows)])
        for a, b in zip([part[0], *part[1], *part[2]], [whole[0], *whole[1], *whole[2]]):
            assert torch.equal(a[rows.index(2)], b[2])
