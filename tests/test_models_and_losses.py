import math

import pytest
import torch

from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.classifier import ImageClassifier
from ganstudy.train.losses import LOSSES


@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 28, 28), (3, 32, 32)])
def test_perceptron4_maps_noise_to_images_and_images_to_probabilities(shape):
    generator, discriminator = build_pair("perceptron4", NetworkSpec(shape, 64, 256))
    images = generator(torch.randn(5, 64))
    assert images.shape == (5, *shape)
    assert images.abs().max() <= 1.0
    scores = discriminator(images)
    assert scores.shape == (5,) and torch.all((scores > 0) & (scores < 1))
    # Lipizzaner's 4LP: latent -> 256 -> 256 -> pixels.
    linears = [m for m in generator.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(64, 256), (256, 256), (256, math.prod(shape))]


@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 28, 28), (3, 32, 32)])
def test_classifier_gives_penultimate_features_and_logits(shape):
    model = ImageClassifier(shape, 10)
    hidden, logits = model.features(torch.zeros(4, *shape))
    assert hidden.shape == (4, 50) and logits.shape == (4, 10)


def test_bce_losses_match_hand_computed_values():
    d_real, d_fake = torch.tensor([0.8]), torch.tensor([0.3])
    loss = LOSSES.get("bce")
    assert loss.discriminator(d_real, d_fake).item() == pytest.approx(-math.log(0.8) - math.log(0.7), rel=1e-6)
    assert loss.generator(d_fake).item() == pytest.approx(-math.log(0.3), rel=1e-6)


def test_mse_losses_match_hand_computed_values():
    d_real, d_fake = torch.tensor([0.8, 0.6]), torch.tensor([0.3, 0.1])
    loss = LOSSES.get("mse")
    assert loss.discriminator(d_real, d_fake).item() == pytest.approx((0.04 + 0.16) / 2 + (0.09 + 0.01) / 2, rel=1e-6)
    assert loss.generator(d_fake).item() == pytest.approx((0.49 + 0.81) / 2, rel=1e-6)


def test_heuristic_generator_loss_is_half_negative_log():
    loss = LOSSES.get("heuristic")
    assert loss.generator(torch.tensor([0.25, 0.5])).item() == pytest.approx(
        -0.5 * (math.log(0.25) + math.log(0.5)) / 2, rel=1e-6
    )
    assert math.isfinite(loss.generator(torch.tensor([0.0])).item())
