"""The pix2pix pair against junyanz/pytorch-CycleGAN-and-pix2pix: unet_256 generator, 70x70 PatchGAN."""

import pytest
import torch
from torch import nn

from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec, build_pair, get_network


def _pair(size: int, inputs: int = 3, outputs: int = 3, ngf: int = 64) -> tuple[nn.Module, nn.Module]:
    return build_pair("pix2pix", NetworkSpec((outputs, size, size), 100, ngf, condition_shape=(inputs, size, size)))


def _layers(module: nn.Module, kind: type) -> list[nn.Module]:
    return [m for m in module.modules() if type(m) is kind]


@pytest.fixture(scope="module")
def pair_256() -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    return _pair(256)


def test_registered_as_a_paired_network():
    assert get_network("pix2pix").task == "paired"


def test_256_shapes_and_30x30_patch_map(pair_256):
    generator, discriminator = pair_256
    a = torch.randn(1, 3, 256, 256)
    with torch.no_grad():
        b = generator(a)
        scores = discriminator(a, b)
    assert b.shape == (1, 3, 256, 256) and b.abs().max() <= 1.0
    # The original's 30x30 patch map, flattened for the losses' mean over the last dimension.
    assert scores.shape == (1, 30 * 30)
    assert torch.isfinite(scores).all() and isinstance(discriminator.model[-1], nn.Conv2d)  # logits, as the original


@pytest.mark.parametrize("size, patches", [(16, 2 * 2), (32, 2 * 2)])
def test_small_sizes_map_one_to_three_channels(size, patches):
    # 32x32: 16, 8, 4 after the stride-2 convs, 3 then 2 after the stride-1 ones. 16x16 with the
    # original's three stride-2 convs would give 2 -> 1 -> 0, an empty map, so it gets two: 8, 4, 3, 2.
    generator, discriminator = _pair(size, inputs=1, outputs=3, ngf=8)
    a = torch.rand(2, 1, size, size) * 2 - 1
    b = generator(a)
    assert b.shape == (2, 3, size, size) and b.abs().max() <= 1.0
    scores = discriminator(a, b)
    assert scores.shape == (2, patches) and torch.isfinite(scores).all()
    assert _layers(discriminator, nn.Conv2d)[0].in_channels == 1 + 3


def test_unet_256_layers_match_the_original(pair_256):
    generator, discriminator = pair_256
    downs = _layers(generator, nn.Conv2d)
    ups = _layers(generator, nn.ConvTranspose2d)
    assert [(m.in_channels, m.out_channels) for m in downs] == [
        (3, 64),
        (64, 128),
        (128, 256),
        (256, 512),
        (512, 512),
        (512, 512),
        (512, 512),
        (512, 512),
    ]
    # Innermost first. Every up convolution but the innermost reads twice the maps its level's down
    # convolution made: its inner block's output concatenated with the skip connection.
    assert [(m.in_channels, m.out_channels) for m in ups] == [
        (512, 512),
        (1024, 512),
        (1024, 512),
        (1024, 512),
        (1024, 256),
        (512, 128),
        (256, 64),
        (128, 3),
    ]
    # num_downs - 5 = 3 dropout blocks, each 0.5.
    assert [m.p for m in _layers(generator, nn.Dropout)] == [0.5, 0.5, 0.5]
    assert isinstance(list(generator.modules())[-1], nn.Tanh)
    convs = _layers(discriminator, nn.Conv2d)
    assert [(m.in_channels, m.out_channels, m.stride[0]) for m in convs] == [
        (6, 64, 2),
        (64, 128, 2),
        (128, 256, 2),
        (256, 512, 1),
        (512, 1, 1),
    ]


def test_skip_connection_carries_the_outermost_features():
    generator, _ = _pair(16, ngf=8)
    down = _layers(generator, nn.Conv2d)[0]
    up = _layers(generator, nn.ConvTranspose2d)[-1]
    seen = {}
    up.register_forward_hook(lambda module, args, output: seen.setdefault("input", args[0]))
    a = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        generator(a)
        features = down(a)
    # The last up convolution reads ReLU(concat(skip, inner)); the skip is LeakyReLU of the first down
    # convolution (the original's in-place LeakyReLU), so its half of the input is ReLU(down(a)).
    assert seen["input"].shape == (2, 16, 8, 8)
    assert torch.equal(seen["input"][:, :8], torch.relu(features))
    assert features.abs().sum() > 0


def test_parameter_counts_match_the_original(pair_256):
    generator, discriminator = pair_256
    # unet_256, ngf 64, 3 -> 3, batch norm (the original prints 54.414 M). Down convs carry no bias:
    #   3*64*16 + 64*128*16 + 128*256*16 + 256*512*16 + 4 * 512*512*16              = 19,532,800
    #   down batch norms (levels 1-6): 2 * (128 + 256 + 4*512)                       =      4,864
    #   up convs: 512*512*16 + 3 * 1024*512*16 + 1024*256*16 + 512*128*16
    #             + 256*64*16 + (128*3*16 + 3 outermost bias)                        = 34,871,299
    #   up batch norms (levels 1-7): 2 * (4*512 + 256 + 128 + 64)                    =      4,992
    assert sum(p.numel() for p in generator.parameters()) == 54_413_955
    # basic D, ndf 64 on 6 channels (the original prints 2.769 M):
    #   (6*64*16 + 64) + 64*128*16 + 2*128 + 128*256*16 + 2*256 + 256*512*16 + 2*512 + (512*16 + 1)
    assert sum(p.numel() for p in discriminator.parameters()) == 2_768_705


def test_normal_init_with_gain_002(pair_256):
    generator, discriminator = pair_256
    big = _layers(generator, nn.Conv2d)[4].weight  # 512*512*16 = 4.2 M weights
    assert big.mean().item() == pytest.approx(0.0, abs=1e-3)
    assert big.std().item() == pytest.approx(0.02, rel=0.01)
    norms = _layers(generator, nn.BatchNorm2d) + _layers(discriminator, nn.BatchNorm2d)
    gains = torch.cat([m.weight.detach() for m in norms])
    assert gains.mean().item() == pytest.approx(1.0, abs=2e-3)
    assert gains.std().item() == pytest.approx(0.02, rel=0.1)
    assert all(torch.count_nonzero(m.bias) == 0 for m in norms)
    assert torch.count_nonzero(_layers(discriminator, nn.Conv2d)[0].bias) == 0


def test_init_draws_from_torch_global_rng():
    torch.manual_seed(3)
    first, _ = _pair(16, ngf=4)
    torch.manual_seed(3)
    second, _ = _pair(16, ngf=4)
    third, _ = _pair(16, ngf=4)
    weights = [list(g.parameters())[0] for g in (first, second, third)]
    assert torch.equal(weights[0], weights[1]) and not torch.equal(weights[0], weights[2])


def test_dropout_is_the_noise_in_train_mode_only():
    # 64x64: num_downs 6, so one dropout block (16x16 and 32x32 have none, as the original would).
    generator, _ = _pair(64, ngf=4)
    assert len(_layers(generator, nn.Dropout)) == 1
    a = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        generator.train()
        assert not torch.equal(generator(a), generator(a))
        generator.eval()
        assert torch.equal(generator(a), generator(a))


def _spec(output: tuple[int, int, int], condition: tuple[int, int, int] | None) -> NetworkSpec:
    return NetworkSpec(output, 100, 8, condition_shape=condition)


@pytest.mark.parametrize(
    "output, condition, words",
    [
        ((3, 24, 24), (3, 24, 24), ["24x24", "power of two"]),
        ((3, 8, 8), (3, 8, 8), ["8x8", "at least 16"]),
        ((3, 32, 64), (3, 32, 64), ["32x64", "square"]),
        ((3, 32, 32), (3, 64, 64), ["same size", "64x64", "32x32"]),
        ((3, 32, 32), None, ["condition_shape", "paired data set"]),
    ],
)
def test_bad_shapes_are_named(output, condition, words):
    with pytest.raises(GanstudyError) as raised:
        build_pair("pix2pix", _spec(output, condition))
    assert all(word in str(raised.value) for word in words)


def test_instance_norm_normalises_each_image_alone_with_biased_convolutions():
    """The original's --norm instance: InstanceNorm2d without affine parameters or running statistics,
    and use_bias on the convolutions it follows; in training an image's output no longer depends on
    the other images of its batch (32x32: no dropout block)."""
    spec = NetworkSpec((3, 32, 32), 1, 4, condition_shape=(3, 32, 32), options={"norm": "instance"})
    generator, discriminator = build_pair("pix2pix", spec)
    for network in (generator, discriminator):
        assert not _layers(network, nn.BatchNorm2d)
        norms = _layers(network, nn.InstanceNorm2d)
        assert norms and all(not n.affine and not n.track_running_stats for n in norms)
        assert all(conv.bias is not None for conv in _layers(network, nn.Conv2d) + _layers(network, nn.ConvTranspose2d))
    batch_normed, _ = _pair(32, ngf=4)
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(generator(x)[:1], generator(x[:1]))
        torch.testing.assert_close(discriminator(x, x)[:1], discriminator(x[:1], x[:1]))
        assert not torch.allclose(batch_normed(x)[:1], batch_normed(x[:1]))
    # Batch norm stays the default, so studies that name no norm keep their networks.
    assert _layers(
        build_pair("pix2pix", NetworkSpec((3, 32, 32), 1, 4, condition_shape=(3, 32, 32)))[0], nn.BatchNorm2d
    )
