"""Class assignment, labelled generators (per-class mixture, conditional), their artifacts, the
conditional mode and the ANOVA diagnostic."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from conftest import SCHEMA
from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.config.validate import validate_study_config
from ganstudy.core.checkpoint import save_state
from ganstudy.data.arrays import Split, load_split
from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.artifact import load_generator, sample_labelled, save_generator
from ganstudy.models.mixture import ConditionalGenerator, MixtureGenerator
from ganstudy.parallel.rank_work import assign_classes
from ganstudy.parallel.world import gpu_indices, mpi_world
from ganstudy.stats.anova import pixel_anova
from ganstudy.train.job import job_settings
from ganstudy.train.modes import TrainingContext, get_mode


def test_classes_are_assigned_once_each_and_balanced_by_sample_count():
    counts = {0: 100, 1: 90, 2: 60, 3: 50, 4: 40, 5: 10}
    blocks = assign_classes(counts, 3)
    assert sorted(label for block in blocks for label in block) == sorted(counts)
    # Largest first onto the least-loaded rank: 100, 90, 60, then 50 -> rank 2, 40 -> rank 1, 10 -> rank 0.
    assert blocks == [[0, 5], [1, 4], [2, 3]]
    assert [sum(counts[c] for c in block) for block in blocks] == [110, 130, 110]
    assert assign_classes(counts, 1) == [[0, 1, 2, 3, 4, 5]]
    assert assign_classes(counts, 6) == [[0], [1], [2], [3], [4], [5]]


def test_equal_classes_spread_evenly_over_ranks():
    blocks = assign_classes({c: 10 for c in range(10)}, 4)
    assert sorted(len(block) for block in blocks) == [2, 2, 3, 3]


def test_more_ranks_than_classes_is_an_error_that_says_what_to_do():
    with pytest.raises(GanstudyError, match="11 MPI ranks for 10 classes would leave 1 rank"):
        assign_classes({c: 5 for c in range(10)}, 11)


def test_two_gpus_per_rank_give_generator_and_discriminator_their_own_gpu():
    assert gpu_indices(local_rank=0, gpus_per_rank=2, gpu_count=6) == [0, 1]
    assert gpu_indices(local_rank=2, gpus_per_rank=2, gpu_count=6) == [4, 5]
    assert gpu_indices(local_rank=3, gpus_per_rank=2, gpu_count=6) == [0, 1]  # round-robin when ranks outnumber GPUs
    assert gpu_indices(local_rank=5, gpus_per_rank=1, gpu_count=6) == [5]


def _mixture(labels=(0, 1, 2), weights=(0.5, 0.3, 0.2)):
    spec = NetworkSpec((1, 8, 8), 8, 16)
    torch.manual_seed(0)
    return MixtureGenerator([build_pair("perceptron4", spec)[0] for _ in labels], weights, labels), spec


def test_a_labelled_mixture_labels_each_sample_with_its_component_class():
    mixture, spec = _mixture(labels=(4, 7, 9))
    z = torch.randn(10, spec.latent_dim)
    with torch.no_grad():
        images, labels = mixture.sample(z)
        assert labels.tolist() == [4] * 5 + [7] * 3 + [9] * 2
        torch.testing.assert_close(images[5:8], mixture.components[1](z[5:8]), rtol=0, atol=1e-6)


def test_a_conditional_generator_feeds_the_prior_labels_to_its_network():
    spec = NetworkSpec((1, 8, 8), 16, 0, num_classes=3)
    torch.manual_seed(0)
    network, _ = build_pair("dccgan", spec)
    model = ConditionalGenerator(network, [0.25, 0.25, 0.5], [0, 1, 2]).eval()
    z = torch.randn(8, 16)
    with torch.no_grad():
        images, labels = model.sample(z, batch_size=3)
        assert labels.tolist() == [0, 0, 1, 1, 2, 2, 2, 2]
        torch.testing.assert_close(images, network(z, labels), rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind", ["mixture", "conditional"])
def test_labelled_artifacts_round_trip(kind, tmp_path):
    if kind == "mixture":
        model, spec = _mixture()
        network = "perceptron4"
    else:
        spec = NetworkSpec((1, 8, 8), 16, 0, num_classes=3)
        model, network = ConditionalGenerator(build_pair("dccgan", spec)[0], [0.2, 0.3, 0.5], [0, 1, 2]), "dccgan"
    model.eval()
    save_generator(tmp_path / "g.pt", model, network, spec)
    loaded, loaded_spec = load_generator(tmp_path / "g.pt")
    assert loaded_spec == spec and type(loaded) is type(model) and loaded.labels == model.labels
    a = sample_labelled(model, spec.latent_dim, 50, 3, 16)
    b = sample_labelled(loaded, spec.latent_dim, 50, 3, 16)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_a_format_2_generator_still_loads_as_an_unlabelled_mixture(tmp_path):
    spec = NetworkSpec((1, 8, 8), 8, 16)
    generator, _ = build_pair("perceptron4", spec)
    save_state(
        tmp_path / "old.pt",
        {
            "format": "ganstudy-generator/2",
            "network": "perceptron4",
            "spec": {"image_shape": [1, 8, 8], "latent_dim": 8, "hidden_units": 16},
            "weights": [1.0],
            "components": [generator.state_dict()],
        },
    )
    loaded, _ = load_generator(tmp_path / "old.pt")
    assert isinstance(loaded, MixtureGenerator) and loaded.labels is None


def _setup(**keys):
    return validate_study_config({"setups": {"s": {"score_period": 0, **keys}}}, SCHEMA)["setups"]["s"]


def _train(setup, data):
    return get_mode(setup["mode"])(
        TrainingContext(TrainingSettings.of(job_settings(setup)), data, 3, 0, mpi_world(), torch.device("cpu"))
    )


def test_conditional_mode_returns_a_generator_that_samples_the_class_prior(digits_dir):
    data = load_split(digits_dir / "train.npz")
    small = Split(data.images[:300], data.labels[:300])
    result = _train(_setup(mode="conditional", network="dccgan", iterations=1, batch_size=50, latent_dim=16), small)
    assert isinstance(result.generator, ConditionalGenerator) and result.spec.num_classes == 10
    _, labels = sample_labelled(result.generator, 16, 3000, 1, 500)
    prior = np.bincount(small.labels, minlength=10) / len(small.labels)
    assert np.abs(np.bincount(labels.numpy(), minlength=10) / 3000 - prior).max() < 1 / 3000 + 1e-12


@pytest.mark.parametrize(
    "mode, network, message",
    [
        ("single", "dccgan", "network 'dccgan' is conditional: train it with mode 'conditional'"),
        ("per_class", "dccgan", "network 'dccgan' is conditional"),
        ("conditional", "dcgan", "mode 'conditional' trains a conditional network such as dccgan, not 'dcgan'"),
    ],
)
def test_a_network_that_does_not_fit_the_mode_is_a_clear_error(digits_dir, mode, network, message):
    with pytest.raises(GanstudyError, match=message):
        _train(_setup(mode=mode, network=network, iterations=1), load_split(digits_dir / "train.npz"))


def test_anova_matches_the_textbook_formula_and_scipy():
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2], [5, 7, 6])
    images = (
        rng.normal(size=(18, 3, 4, 4)).astype(np.float32)
        + labels[:, None, None, None] * np.array([0.5, 0, 2])[None, :, None, None]
    )
    table = pixel_anova(Split(images, labels))
    assert table.channel.tolist() == ["red", "green", "blue"]
    for channel in range(3):
        x = images[:, channel].mean(axis=(1, 2), dtype=np.float64)
        groups = [x[labels == g] for g in range(3)]
        between = sum(len(g) * (g.mean() - x.mean()) ** 2 for g in groups) / (3 - 1)
        within = sum(((g - g.mean()) ** 2).sum() for g in groups) / (18 - 3)
        row = table.iloc[channel]
        assert row.F == pytest.approx(between / within, rel=1e-10)
        assert row.p_value == pytest.approx(stats.f.sf(between / within, 2, 15), rel=1e-10)
        assert (row.df_between, row.df_within) == (2, 15)
    # The blue channel's class offset is large: classes differ far more than images within a class.
    assert table.iloc[2].p_value < 1e-6


def test_digits_images_differ_more_between_than_within_classes(digits_dir):
    table = pixel_anova(load_split(digits_dir / "train.npz"))
    assert table.channel.tolist() == ["grey"] and table.iloc[0].p_value < 1e-6
