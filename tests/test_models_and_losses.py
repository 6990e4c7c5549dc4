import math

import pytest
import torch

from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.classifier import ImageClassifier
from ganstudy.train.losses import LOSSES


@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 28, 28), (3, 32, 32)])
def test_perceptron4_maps_noise_to_images_and_images_to_logits(shape):
    generator, discriminator = build_pair("perceptron4", NetworkSpec(shape, 64, 256))
    images = generator(torch.randn(5, 64))
    assert images.shape == (5, *shape)
    assert images.abs().max() <= 1.0
    scores = discriminator(images)
    assert scores.shape == (5,) and torch.isfinite(scores).all()
    # Lipizzaner's 4LP: latent -> 256 -> 256 -> pixels; the discriminator's last layer is linear (logits).
    linears = [m for m in generator.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(64, 256), (256, 256), (256, math.prod(shape))]
    assert isinstance(list(discriminator.modules())[-1], torch.nn.Linear)


@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 28, 28), (3, 32, 32)])
def test_classifier_gives_penultimate_features_and_logits(shape):
    model = ImageClassifier(shape, 10)
    hidden, logits = model.features(torch.zeros(4, *shape))
    assert hidden.shape == (4, 50) and logits.shape == (4, 10)


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_bce_losses_match_hand_computed_values():
    d_real, d_fake = torch.tensor([_logit(0.8)]), torch.tensor([_logit(0.3)])
    loss = LOSSES.get("bce")
    assert loss.discriminator(d_real, d_fake).item() == pytest.approx(-math.log(0.8) - math.log(0.7), rel=1e-6)
    assert loss.generator(d_fake).item() == pytest.approx(-math.log(0.3), rel=1e-6)


def test_mse_losses_match_hand_computed_values():
    d_real = torch.tensor([_logit(0.8), _logit(0.6)])
    d_fake = torch.tensor([_logit(0.3), _logit(0.1)])
    loss = LOSSES.get("mse")
    assert loss.discriminator(d_real, d_fake).item() == pytest.approx((0.04 + 0.16) / 2 + (0.09 + 0.01) / 2, rel=1e-6)
    assert loss.generator(d_fake).item() == pytest.approx((0.49 + 0.81) / 2, rel=1e-6)


def test_heuristic_generator_loss_is_half_negative_log():
    loss = LOSSES.get("heuristic")
    assert loss.generator(torch.tensor([_logit(0.25), 0.0])).item() == pytest.approx(
        -0.5 * (math.log(0.25) + math.log(0.5)) / 2, rel=1e-6
    )
    # A discriminator certain that the sample is fake (sigmoid(-200) is 0 in float32): -0.5 log D = 100.
    assert loss.generator(torch.tensor([-200.0])).item() == pytest.approx(100.0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["bce", "mse", "heuristic"])
def test_losses_of_low_precision_logits_beyond_the_sigmoid_s_range_are_finite_and_have_gradients(name, dtype):
    # Logits of +-12 and +-40: past fp16's sigmoid range (1 above about 8.3) and bf16's, where a loss on
    # low-precision probabilities clamps or fails. Under autocast the layer's output is low precision.
    layer = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        layer.weight.fill_(1.0)
    x = torch.tensor([[12.0], [40.0], [-12.0], [-40.0]])
    with torch.autocast("cpu", dtype=dtype):
        logits = layer(x).squeeze(1)
    assert logits.dtype == dtype
    loss = LOSSES.get(name)
    # Confident mistakes, whose gradient must not vanish: real rows judged fake and fake rows judged
    # real; for the generator, fakes judged fake.
    d_loss = loss.discriminator(logits[2:], logits[:2])
    g_loss = loss.generator(logits[2:])
    for value in (d_loss, g_loss):
        layer.weight.grad = None
        value.backward(retain_graph=True)
        assert value.dtype == torch.float32 and torch.isfinite(value)
        assert torch.isfinite(layer.weight.grad).all()
        # Least squares on a saturated sigmoid has a vanishing gradient in any precision (about e^-12 at
        # a logit of 12); the log losses keep one of order 1 however far the logit goes.
        if name != "mse":
            assert layer.weight.grad.abs().item() > 0.1
    # bce's generator loss is the softplus of -logit: at -40 it is 40, not a clamped log(1e-12).
    if name == "bce":
        assert loss.generator(logits[3:]).item() == pytest.approx(40.0)


@pytest.mark.parametrize(
    "shape, start, features", [((1, 8, 8), (2, 2), 512), ((1, 28, 28), (7, 7), 512), ((3, 32, 32), (8, 8), 512)]
)
def test_dcgan_follows_seed_001_tables_1_and_2(shape, start, features):
    generator, discriminator = build_pair("dcgan", NetworkSpec(shape, 100, 0))
    first = generator.input[0]
    # Table 1: input 100 -> 128 maps of (H/4, W/4), e.g. 8192 = 128 * 8 * 8 for 32x32 images.
    assert (first.in_features, first.out_features) == (100, 128 * math.prod(start))
    convs = [
        (m.in_channels, m.out_channels, m.kernel_size, m.padding)
        for m in generator.modules()
        if isinstance(m, torch.nn.Conv2d)
    ]
    assert convs == [(128, 128, (3, 3), (1, 1)), (128, 64, (3, 3), (1, 1)), (64, shape[0], (3, 3), (1, 1))]
    assert [m.eps for m in generator.modules() if isinstance(m, torch.nn.BatchNorm2d)] == [1e-5, 0.8, 0.8]
    d_convs = [(m.in_channels, m.out_channels) for m in discriminator.modules() if isinstance(m, torch.nn.Conv2d)]
    assert d_convs == [(shape[0], 16), (16, 32), (32, 64), (64, 128)]
    assert discriminator.output.in_features == features
    images = generator(torch.randn(6, 100))
    assert images.shape == (6, *shape) and images.abs().max() <= 1.0
    scores = discriminator(images)
    assert scores.shape == (6,) and torch.isfinite(scores).all()  # logits: the losses apply the sigmoid


def test_dcgan_discriminator_of_8x8_images_learns_to_tell_batches_apart():
    # With four stride-2 convolutions an 8x8 image ends as 1x1 maps, and the last batch norm then
    # gives every batch the same feature means: D stayed at 0.5 for real and fake batches alike.
    torch.manual_seed(0)
    _, discriminator = build_pair("dcgan", NetworkSpec((1, 8, 8), 100, 0))
    optimizer = torch.optim.Adam(discriminator.parameters(), lr=2e-3)
    loss = LOSSES.get("bce")
    for _ in range(40):
        bright = 0.5 + 0.1 * torch.randn(32, 1, 8, 8)
        dark = -0.5 + 0.1 * torch.randn(32, 1, 8, 8)
        value = loss.discriminator(discriminator(bright), discriminator(dark))
        optimizer.zero_grad()
        value.backward()
        optimizer.step()
    assert discriminator(bright).mean() > 0.8 and discriminator(dark).mean() < 0.2


def test_dccgan_conditions_both_networks_on_the_label():
    spec = NetworkSpec((1, 28, 28), 100, 0, num_classes=10)
    generator, discriminator = build_pair("dccgan", spec)
    # Table 3: the generator's input is latent + label embedding, 110 wide.
    assert generator.input[0].in_features == 110
    generator.eval()
    z = torch.randn(4, 100)
    with torch.no_grad():
        as_three = generator(z, torch.full((4,), 3))
        as_seven = generator(z, torch.full((4,), 7))
        assert not torch.equal(as_three, as_seven)
        discriminator.eval()
        assert not torch.equal(
            discriminator(as_three, torch.full((4,), 3)), discriminator(as_three, torch.full((4,), 7))
        )


def test_dc_networks_refuse_sizes_they_cannot_build():
    with pytest.raises(GanstudyError, match="multiples of 4; got 30x30"):
        build_pair("dcgan", NetworkSpec((1, 30, 30), 100, 0))
    with pytest.raises(GanstudyError, match="at least 2 classes"):
        build_pair("dccgan", NetworkSpec((1, 8, 8), 100, 0, num_classes=1))


@pytest.mark.parametrize("name, size, widths", [("cnn28", 28, [512, 256, 128]), ("cnn64", 64, [512, 256, 128, 64])])
def test_the_thesis_xray_cnns_follow_table_4_3(name, size, widths):
    generator, discriminator = build_pair(name, NetworkSpec((1, size, size), 100, 0))
    transposed = [m for m in generator.modules() if isinstance(m, torch.nn.ConvTranspose2d)]
    # Input 100 -> hidden maps -> one grey channel of size x size (784 or 4096 outputs).
    assert [m.in_channels for m in transposed] == [100, *widths] and transposed[-1].out_channels == 1
    images = generator(torch.randn(3, 100))
    assert images.shape == (3, 1, size, size)
    convs = [m.out_channels for m in discriminator.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs == [*widths[::-1], 1]
    assert discriminator(images).shape == (3,)
    with pytest.raises(
        GanstudyError,
        match=f"network {name} makes {size}x{size} images, the data are 8x8: set dataset.image_size to {size}",
    ):
        build_pair(name, NetworkSpec((1, 8, 8), 100, 0))
