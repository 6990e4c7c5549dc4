"""The example plugin (examples/sngan-plugin), installed as a user installs a package, runs its study
through the workflow in modes single, grid and data_parallel; a plugin that breaks its contract is
named, with its package and what to fix, before any job or when its job starts."""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from conftest import REPO
from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.config.validate import validate_study_config
from ganstudy.errors import GanstudyError
from ganstudy.train.network_check import check_pair
from test_workflow import snakemake

EXAMPLE = REPO / "examples" / "sngan-plugin"
ORIGIN = "sngan_plugin.networks:SNDCGAN (from ganstudy-sngan-plugin 0.1.0)"


def example_study(**evaluation) -> dict:
    """The example's study, shrunken to seconds per job (same set-ups, modes and plugin parts)."""
    config = yaml.safe_load((EXAMPLE / "study.yaml").read_text())
    # One trial: the modes, parts and records are the point here, not the statistics (6 jobs fewer).
    config["trials"] = 1
    config["classifier"] = {"epochs": 3, "min_accuracy": 0.0}
    for setup in config["setups"].values():
        setup.update(iterations=2, score_period=1, score_samples=50)
        if setup.get("mode") == "grid":
            setup["grid"].update(fitness_sample_size=50, score_sample_size=50)
    config["evaluation"] = {
        "samples": 100,
        "batch_size": 50,
        "isc_splits": 2,
        "metrics": ["fid", "isc", "class_fid", "mmd", "coverage"],
        **evaluation,
    }
    return config


def package_sha256(package: Path) -> str:
    """The source hash run.json should carry, computed here over the installed package's files."""
    digest = hashlib.sha256()
    for file in sorted(package.rglob("*.py")):
        digest.update(str(file.relative_to(package)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


@pytest.mark.workflow
def test_the_example_plugin_s_study_runs_in_three_modes(tmp_path, plugin_env, plugin_site):
    config = example_study()
    done = snakemake(tmp_path, config, "--cores", "2", env=plugin_env, timeout=1200)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    study = tmp_path / "results" / config["study"]
    scores = pd.read_csv(study / "scores.csv")
    assert sorted(set(zip(scores["setup"], scores["trial"]))) == [
        (s, t) for s in ("data_parallel", "grid2x2", "single") for t in (0,)
    ]
    assert scores.query("metric == 'fid'")["value"].notna().all()
    # The plugin's metric: its two columns for every run, and its own tables beside FID's.
    mmd, bandwidth = (scores.query("metric == @column")["value"] for column in ("mmd", "mmd_bandwidth"))
    assert len(mmd) == len(bandwidth) == 3 and mmd.notna().all() and (bandwidth > 0).all(), scores.tail(12)
    assert (study / "tables" / "summary_mmd.csv").is_file()
    # ganstudy's own coverage beside the plugin's metric, in the same scoring job.
    assert (
        scores.query("metric == 'coverage'")["value"].between(0, 1).all()
        and len(scores.query("metric == 'coverage'")) == 3
    )
    score = json.loads((study / "scores" / "single" / "trial0.json").read_text())
    assert score["metric_parts"]["mmd"]["distribution"] == "ganstudy-sngan-plugin"
    assert score["metric_parts"]["fid"]["distribution"] == "ganstudy"
    for setup, ranks in (("single", 1), ("grid2x2", 2), ("data_parallel", 2)):
        record = json.loads((study / "runs" / setup / "trial0" / "run.json").read_text())
        assert record["world_size"] == ranks
        # The options as the plugin's schema completed them, and where the network came from.
        assert record["settings"]["network_options"] == {"base_channels": 32, "spectral_norm": True}
        network = record["parts"]["network"]
        assert (network["distribution"], network["version"]) == ("ganstudy-sngan-plugin", "0.1.0")
        assert network["source_sha256"] == package_sha256(plugin_site / "sngan_plugin")
        assert (study / "runs" / setup / "trial0" / "samples.png").read_bytes()[:4] == b"\x89PNG"
    # The plugin's network has no hand-stacked form: on a CPU the grid trains its cells one by one and says so once.
    log = (study / "logs" / "train" / "grid2x2" / "trial0.log").read_text()
    assert (
        log.count(
            "network sndcgan has no hand-stacked form, and its general one is slower than the loop on a CPU "
            "(compute.stack_layout whole stacks it): each rank trains its cells one after another"
        )
        == 1
    )
    manifest = json.loads((study / "data" / "manifest.json").read_text())
    assert "sngan_plugin.shapes" in json.dumps(manifest)
    # The plugin's data set is in the provenance like its network: in the manifest and in every run.
    assert (manifest["part"]["distribution"], manifest["part"]["version"]) == ("ganstudy-sngan-plugin", "0.1.0")
    assert manifest["part"]["source_sha256"] == package_sha256(plugin_site / "sngan_plugin")
    assert (
        json.loads((study / "runs" / "single" / "trial0" / "run.json").read_text())["parts"]["dataset"]
        == manifest["part"]
    )


@pytest.mark.parametrize(
    "options, network, problem",
    [
        (
            {"base_channel": 8},
            "sndcgan",
            "setups.single.network_options: unknown key 'base_channel' (did you mean 'base_channels'?); allowed "
            f"here: base_channels, spectral_norm (the options schema of network 'sndcgan', {ORIGIN})",
        ),
        (
            {"base_channels": 2},
            "sndcgan",
            "setups.single.network_options: 'base_channels': 2 is less than the minimum of 4",
        ),
        (
            {"base_channels": 8},
            "perceptron4",
            "setups.single.network_options: network 'perceptron4' takes no options, got ['base_channels']",
        ),
    ],
)
def test_options_that_fail_the_plugin_s_schema_stop_the_dag(tmp_path, plugin_env, options, network, problem):
    config = example_study()
    config["setups"]["single"].update(network=network, network_options=options)
    done = snakemake(tmp_path, config, "-n", env=plugin_env)
    assert done.returncode != 0 and problem in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]
    assert not (tmp_path / "results").exists()


BROKEN = textwrap.dedent("""
    import torch
    from torch import nn
    from ganstudy.errors import GanstudyError
    from ganstudy.models import Network
    from ganstudy.train.job import job_settings

    class Flat(nn.Module):
        def __init__(self, spec):
            super().__init__()
            self.layer = nn.Linear(spec.latent_dim, 64)
        def forward(self, z):
            return self.layer(z)

    class Image(Flat):
        def forward(self, z):
            return torch.tanh(self.layer(z)).view(-1, 1, 8, 8)

    class Detached(Image):
        def forward(self, z):
            return super().forward(z).detach()

    class Critic(nn.Module):
        def __init__(self, spec):
            super().__init__()
            self.layer = nn.Linear(64, 1)
        def forward(self, images):
            return self.layer(images.flatten(1)).squeeze(1)

    class Columns(Critic):
        def forward(self, images):
            return self.layer(images.flatten(1))

    ONE_MODULE = Network(lambda spec: Image(spec))
    FLAT = Network(lambda spec: (Flat(spec), Critic(spec)))
    DETACHED = Network(lambda spec: (Detached(spec), Critic(spec)))
    COLUMNS = Network(lambda spec: (Image(spec), Columns(spec)))
    FAILS = Network(lambda spec: (Image(spec), Critic(spec).missing))
    NOT_A_NETWORK = Image

    def _refuse(spec):
        raise GanstudyError("makes 32x32 images only: set dataset.image_size to 32")

    REFUSES = Network(_refuse)
""")


@pytest.mark.parametrize(
    "attribute, problem",
    [
        ("ONE_MODULE", "built Image, not a (generator, discriminator) tuple of torch modules"),
        ("FLAT", "generator returned (2, 64) for 2 rows, not images of shape (2, 1, 8, 8)"),
        ("COLUMNS", "discriminator answered (2, 1) for 2 rows, not (2,) (what task 'noise' takes)"),
        ("DETACHED", "gave a generator loss whose gradient does not reach the generator's parameters"),
        ("FAILS", "did not build for NetworkSpec("),
        ("NOT_A_NETWORK", "is of type type, not Network"),
        # The builder's own refusal, with whose it is.
        ("REFUSES", "(lab_networks:REFUSES): makes 32x32 images only: set dataset.image_size to 32"),
    ],
)
def test_a_network_that_breaks_the_contract_is_named_when_its_job_starts(site, attribute, problem):
    from ganstudy.config.validate import training_settings
    from ganstudy.models import NetworkSpec

    (site / "lab_networks.py").write_text(BROKEN)
    name = f"lab_networks:{attribute}"
    config = validate_study_config(
        {"setups": {"s": {"network": name}}}, REPO / "workflow" / "schemas" / "config.schema.yaml"
    )
    # The settings of a noise network, given without looking the broken entry up (job_settings would).
    setup = TrainingSettings.of(training_settings(config["setups"]["s"], "noise"))
    state = torch.random.get_rng_state()
    with pytest.raises(GanstudyError) as error:
        check_pair(setup, NetworkSpec((1, 8, 8), setup.latent_dim, setup.hidden_units))
    assert problem in str(error.value) and f"'{name}'" in str(error.value), str(error.value)
    # The check draws from a stream of its own: the training's random numbers are untouched.
    assert torch.equal(torch.random.get_rng_state(), state)


@pytest.mark.parametrize(
    "network, spec",
    [
        ("perceptron4", dict(image_shape=(1, 8, 8))),
        ("dcgan", dict(image_shape=(1, 8, 8))),
        ("dccgan", dict(image_shape=(1, 8, 8), num_classes=3)),
        ("cnn28", dict(image_shape=(1, 28, 28))),
        ("cnn64", dict(image_shape=(3, 64, 64))),
        ("pix2pix", dict(image_shape=(3, 16, 16), condition_shape=(1, 16, 16))),
        ("calo3d", dict(image_shape=(1, 13, 13, 7), condition_shape=(1,))),
    ],
)
def test_every_built_in_network_keeps_the_contract_plugins_are_held_to(network, spec):
    from ganstudy.models import NetworkSpec
    from ganstudy.train.job import job_settings

    config = validate_study_config(
        {"setups": {"s": {"network": network, "hidden_units": 8, "latent_dim": 8}}},
        REPO / "workflow" / "schemas" / "config.schema.yaml",
    )
    setup = TrainingSettings.of(job_settings(config["setups"]["s"]))
    check_pair(setup, NetworkSpec(latent_dim=8, hidden_units=8, **spec))


def test_the_plugin_s_mmd_metric_matches_an_independent_computation(plugin_site, monkeypatch):
    monkeypatch.syspath_prepend(str(plugin_site))
    from sngan_plugin.mmd import mmd_rbf

    generator = torch.Generator().manual_seed(3)
    real, fake = torch.randn(60, 4, generator=generator), 0.7 * torch.randn(40, 4, generator=generator) + 0.4
    found = mmd_rbf(real, fake)
    # Gretton et al.'s unbiased MMD^2 written out with loops over the pairs, scipy's distances.
    from scipy.spatial.distance import cdist, pdist

    x, y = real.numpy().astype(np.float64), fake.numpy().astype(np.float64)
    sigma = np.median(pdist(x))
    k = lambda a, b: np.exp(-cdist(a, b, "sqeuclidean") / (2 * sigma**2))  # noqa: E731
    n, m = len(x), len(y)
    xx = sum(k(x[i : i + 1], x[j : j + 1])[0, 0] for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    yy = sum(k(y[i : i + 1], y[j : j + 1])[0, 0] for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    wanted = xx + yy - 2 * k(x, y).mean()
    assert found["mmd_bandwidth"] == pytest.approx(sigma, rel=1e-12)
    assert found["mmd"] == pytest.approx(wanted, rel=1e-9) and found["mmd"] > 0
    # Two samples of one distribution: near 0 (the estimate is unbiased, so either sign).
    same = mmd_rbf(real[:30], real[30:])["mmd"]
    assert abs(same) < 0.2 * found["mmd"]
