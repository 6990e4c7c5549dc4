"""The calo3d pair against CERN's 3DGAN (svalleco/3Dgan, keras/EcalEnergyGan.py and EcalEnergyTrain.py)."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec, build_pair, get_network
from ganstudy.models.calo3d import BlockMean3d

# The full suite shares the machine: keep these to one thread.
torch.set_num_threads(1)

LATENT = 200  # the training script's --latentsize default


def _pair(shape: tuple[int, int, int, int], latent: int = LATENT, base: int = 8) -> tuple[nn.Module, nn.Module]:
    return build_pair("calo3d", NetworkSpec(shape, latent, base, condition_shape=(1,)))


def _layers(module: nn.Module, kind: type) -> list[nn.Module]:
    return [m for m in module.modules() if type(m) is kind]


@pytest.fixture(scope="module")
def pair_25() -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    return _pair((1, 25, 25, 25))


def test_registered_as_an_energy_network():
    assert get_network("calo3d").task == "energy"


def test_25_cubed_shapes_and_non_negative_showers(pair_25):
    generator, discriminator = pair_25
    with torch.no_grad():
        showers = generator(torch.randn(2, LATENT), torch.rand(2, 1) * 4.9 + 0.1)
        scores = discriminator(showers)
    assert showers.shape == (2, 1, 25, 25, 25)
    # The original ends in a ReLU: energies are never negative, and some voxels are on at init.
    assert isinstance(list(generator.modules())[-1], nn.ReLU)
    assert showers.min() >= 0 and showers.max() > 0
    assert scores.shape == (2, 3)
    # Column 0 is the real/fake logit (the losses apply the sigmoid); column 2 the voxel sum.
    assert torch.isfinite(scores).all() and isinstance(discriminator.generation, nn.Linear)
    assert torch.allclose(scores[:, 2], showers.sum(dim=(1, 2, 3, 4)))


@pytest.mark.parametrize(
    "shape, start", [((1, 5, 5, 7), (2, 2, 5)), ((1, 13, 13, 13), (4, 4, 6)), ((1, 9, 5, 13), (3, 2, 6))]
)
def test_smaller_sizes_follow_the_original_chain(shape, start):
    # X = 4a - 3, Y = 4b - 3, Z = 6c - 23 from an a x b x c dense map (7 x 7 x 8 for 25^3).
    generator, discriminator = _pair(shape, latent=16, base=4)
    assert generator.start[1:] == start
    showers = generator(torch.randn(2, 16), torch.rand(2, 1))
    assert showers.shape == (2, *shape) and showers.min() >= 0
    assert discriminator(showers).shape == (2, 3)


def test_layers_match_the_original(pair_25):
    generator, discriminator = pair_25
    # Dense 200 -> 8 maps of 7x7x8, then the original's Conv3D list (filters, kernel) and paddings.
    assert (generator.dense.in_features, generator.dense.out_features) == (200, 8 * 7 * 7 * 8)
    assert generator.start == (8, 7, 7, 8)
    convs = _layers(generator, nn.Conv3d)
    assert [(m.in_channels, m.out_channels, m.kernel_size, m.padding) for m in convs] == [
        (8, 64, (6, 6, 8), (0, 0, 0)),  # "same" done by the ZeroPad3d before it
        (64, 6, (6, 5, 8), (2, 2, 0)),
        (6, 6, (3, 3, 8), (1, 0, 3)),
        (6, 1, (2, 2, 2), (0, 0, 0)),
    ]
    assert convs[-1].bias is None
    assert [m.scale_factor for m in _layers(generator, nn.Upsample)] == [(2.0, 2.0, 2.0), (2.0, 2.0, 3.0)]
    assert [m.negative_slope for m in _layers(generator, nn.LeakyReLU)] == [0.3] * 3
    norms = _layers(generator, nn.BatchNorm3d) + _layers(discriminator, nn.BatchNorm3d)
    assert [(m.eps, m.momentum) for m in norms] == [(1e-3, 0.01)] * 5
    convs = _layers(discriminator, nn.Conv3d)
    assert [(m.in_channels, m.out_channels, m.kernel_size[0], m.padding[0]) for m in convs] == [
        (1, 32, 5, 2),
        (32, 8, 5, 2),
        (8, 8, 5, 2),
        (8, 8, 5, 1),
    ]
    assert [m.p for m in _layers(discriminator, nn.Dropout)] == [0.2] * 4
    # 25 -> 23 after the padding-1 convolution -> 11 after the average pooling.
    assert discriminator.auxiliary.in_features == 8 * 11**3


def test_the_pooling_is_keras_average_pooling_with_a_gradient_cuda_can_compute_deterministically(pair_25):
    (pooling,) = _layers(pair_25[1], BlockMean3d)
    # Odd sizes as the 25-cube's 23: Keras and torch drop the last plane of each axis.
    maps = torch.randn(2, 3, 23, 9, 7, dtype=torch.float64, requires_grad=True)
    pooled, reference = pooling(maps), F.avg_pool3d(maps, 2)
    # float64: only the order of the 8 additions may differ.
    torch.testing.assert_close(pooled, reference, rtol=0, atol=1e-14)
    (gradient,) = torch.autograd.grad(pooled.sum(), maps)
    (expected,) = torch.autograd.grad(reference.sum(), maps)
    assert torch.equal(gradient, expected)
    # torch.use_deterministic_algorithms refuses avg_pool3d's CUDA backward: none may be left.
    assert not _layers(pair_25[1], nn.AvgPool3d)


def test_hidden_units_scale_every_filter_count():
    generator, discriminator = _pair((1, 5, 5, 7), latent=4, base=16)
    assert generator.start[0] == 16
    assert [m.out_channels for m in _layers(generator, nn.Conv3d)] == [128, 12, 12, 1]
    assert [m.out_channels for m in _layers(discriminator, nn.Conv3d)] == [64, 16, 16, 16]


def test_the_noise_is_multiplied_by_the_energy():
    torch.manual_seed(1)
    generator, _ = _pair((1, 5, 5, 7), latent=8, base=4)
    generator.eval()
    seen = {}

    def record(module: nn.Module, args: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        # Returning None keeps the layer's output (a hook's non-None return would replace it).
        seen["input"] = args[0]

    generator.dense.register_forward_hook(record)
    z, energy = torch.randn(3, 8), torch.tensor([[0.1], [1.0], [4.5]])
    with torch.no_grad():
        first = generator(z, energy)
        assert torch.equal(seen["input"], z * energy)
        # Energy 0 zeroes the dense layer's input, so every noise gives the same shower.
        zero = torch.zeros(3, 1)
        assert torch.equal(generator(z, zero), generator(torch.randn(3, 8), zero))
        assert not torch.equal(first, generator(torch.randn(3, 8), energy))


def test_ecal_column_is_the_exact_voxel_sum_with_unit_gradient():
    _, discriminator = _pair((1, 5, 5, 7), latent=4, base=4)
    # Integer energies: the float32 sum is exact in any order, so equality is not luck.
    showers = torch.randint(0, 50, (2, 1, 5, 5, 7)).float().requires_grad_()
    scores = discriminator(showers)
    expected = showers.detach().double().sum(dim=(1, 2, 3, 4)).float()
    assert torch.equal(scores[:, 2], expected)
    (gradient,) = torch.autograd.grad(scores[:, 2].sum(), showers)
    assert torch.equal(gradient, torch.ones_like(showers))


def test_parameter_counts_match_the_original(pair_25):
    generator, discriminator = pair_25
    # From keras/EcalEnergyGan.py's layer list at latent 200 (no Keras summary is published with it;
    # the torch counts leave out the batch norms' moving mean and variance, which Keras' summary adds
    # as non-trainable: 2 * (64 + 6) = 140 for G, 2 * 3 * 8 = 48 for D):
    #   Dense 200 -> 3136:            200*3136 + 3136   = 630,336
    #   Conv3D 8 -> 64, 6x6x8:        8*288*64 + 64     = 147,520;  BatchNorm 64: 128
    #   Conv3D 64 -> 6, 6x5x8:        64*240*6 + 6      =  92,166;  BatchNorm 6:   12
    #   Conv3D 6 -> 6, 3x3x8:         6*72*6 + 6        =   2,598
    #   Conv3D 6 -> 1, 2x2x2, no bias: 6*8              =      48
    assert sum(p.numel() for p in generator.parameters()) == 872_808
    #   Conv3D 1 -> 32, 5^3: 125*32 + 32 = 4,032; Conv3D 32 -> 8: 32*125*8 + 8 = 32,008;
    #   two Conv3D 8 -> 8: 2 * (8*125*8 + 8) = 16,016; three BatchNorm 8: 48;
    #   Dense heads "generation" and "auxiliary" on 8 * 11^3 = 10,648 features: 2 * 10,649 = 21,298
    assert sum(p.numel() for p in discriminator.parameters()) == 73_402


def test_keras_initialisers(pair_25):
    generator, discriminator = pair_25
    *hidden, last = _layers(generator, nn.Conv3d)
    for conv in hidden:  # he_uniform
        fan_in = conv.weight[0].numel()
        assert conv.weight.abs().max() <= math.sqrt(6 / fan_in)
        assert conv.weight.abs().max() > 0.9 * math.sqrt(6 / fan_in)
        assert torch.count_nonzero(conv.bias) == 0
    # glorot_normal as Keras 2 (TF 1) drew it: a normal of std sqrt(2 / (fan_in + fan_out)) cut at 2 std.
    std = math.sqrt(2 / (6 * 8 + 1 * 8))
    assert last.weight.abs().max() <= 2 * std
    # glorot_uniform elsewhere: the dense layer's 627,200 weights fill U(-limit, limit), variance limit^2 / 3.
    limit = math.sqrt(6 / (200 + 3136))
    weights = generator.dense.weight
    assert weights.abs().max() <= limit and weights.std().item() == pytest.approx(limit / math.sqrt(3), rel=0.01)
    for layer in _layers(discriminator, nn.Conv3d) + _layers(discriminator, nn.Linear):
        fan_in, fan_out = layer.weight[0].numel(), layer.weight[:, 0].numel()
        assert layer.weight.abs().max() <= math.sqrt(6 / (fan_in + fan_out))
        assert torch.count_nonzero(layer.bias) == 0


def test_init_draws_from_torch_global_rng():
    torch.manual_seed(3)
    first, _ = _pair((1, 5, 5, 7), latent=4, base=4)
    torch.manual_seed(3)
    second, _ = _pair((1, 5, 5, 7), latent=4, base=4)
    third, _ = _pair((1, 5, 5, 7), latent=4, base=4)
    weights = [g.dense.weight for g in (first, second, third)]
    assert torch.equal(weights[0], weights[1]) and not torch.equal(weights[0], weights[2])


@pytest.mark.parametrize(
    "shape, condition, words",
    [
        ((1, 25, 25, 25), None, ["condition_shape is None", "primary energy"]),
        ((1, 25, 25, 25), (2,), ["condition_shape (1,)", "(2,)"]),
        ((1, 24, 25, 25), (1,), ["24x25x25", "4k + 1", "6k + 1"]),
        ((1, 25, 25, 24), (1,), ["25x25x24", "19, 25"]),
        ((1, 1, 1, 1), (1,), ["1x1x1", "5, 9, 13"]),
        ((3, 25, 25, 25), (1,), ["(1, X, Y, Z)", "(3, 25, 25, 25)"]),
        ((1, 25, 25), (1,), ["(1, X, Y, Z)", "(1, 25, 25)"]),
    ],
)
def test_bad_specs_are_named(shape, condition, words):
    with pytest.raises(GanstudyError) as raised:
        build_pair("calo3d", NetworkSpec(shape, LATENT, 8, condition_shape=condition))
    assert all(word in str(raised.value) for word in words)
