"""Registries find parts through entry points, as a plugin's installed package declares them, or as
module:attribute; a part that does not import, has the wrong type or a name two packages claim is
refused with a message that names it, its package and what to fix."""

from __future__ import annotations

import pytest

from conftest import install
from ganstudy.errors import GanstudyError
from ganstudy.models import NETWORKS, Network, NetworkSpec, build_pair, get_network
from ganstudy.registry import Registry, instance_of

GROUP = "ganstudy.networks"


def fresh() -> Registry[Network]:
    # A registry of its own: the package's shared one caches what it has loaded.
    return Registry("network", GROUP, instance_of(Network))


def test_built_in_networks_are_entry_points_of_ganstudy_itself():
    assert {"perceptron4", "dcgan", "dccgan", "cnn28", "cnn64", "pix2pix", "calo3d"} <= set(NETWORKS.names())
    assert get_network("dccgan").conditional and get_network("pix2pix").task == "paired"
    origin = NETWORKS.origin("dcgan")
    assert (origin.reference, origin.distribution) == ("ganstudy.models.builtin:DCGAN", "ganstudy")


def test_a_builder_named_by_reference_is_imported_when_the_first_pair_is_built(site):
    (site / "refnets.py").write_text(
        "from ganstudy.models import Network\n"
        "GOOD = Network('ganstudy.models.perceptron:build')\nBAD = Network('refnets_absent:build')\n"
    )
    spec = NetworkSpec(image_shape=(1, 8, 8), latent_dim=4, hidden_units=8)
    generator, discriminator = build_pair("refnets:GOOD", spec)
    assert (type(generator).__name__, type(discriminator).__name__) == (
        "PerceptronGenerator",
        "PerceptronDiscriminator",
    )
    with pytest.raises(
        GanstudyError,
        match=r"network 'refnets:BAD' \(refnets:BAD\): its builder: module 'refnets_absent' does not import",
    ):
        build_pair("refnets:BAD", spec)


def test_a_plugin_package_registers_a_network_like_the_built_ins(site):
    install(
        site,
        "labnets",
        "[ganstudy.networks]\ntiny = labnets_models:TINY\n",
        "labnets_models",
        "from ganstudy.models.builtin import PERCEPTRON4 as TINY\n",
    )
    registry = fresh()
    assert "tiny" in registry.names() and registry.get("tiny") is get_network("perceptron4")
    assert str(registry.origin("tiny")) == "labnets_models:TINY (from labnets 1.2)"


def test_a_study_may_name_a_part_as_module_and_attribute(site):
    (site / "mynets.py").write_text("from ganstudy.models.builtin import DCGAN as MINE\n")
    assert fresh().get("mynets:MINE") is get_network("dcgan")
    with pytest.raises(GanstudyError, match="module 'mynets' has no attribute 'OTHER'"):
        fresh().get("mynets:OTHER")
    with pytest.raises(GanstudyError, match="module 'absent' does not import .*install its package"):
        fresh().get("absent:NET")


def test_a_plugin_that_does_not_import_is_named_with_its_package(site):
    install(
        site,
        "brokennets",
        "[ganstudy.networks]\nbroken = brokennets_models:NET\n",
        "brokennets_models",
        "import a_dependency_that_is_not_installed\n",
    )
    with pytest.raises(GanstudyError) as error:
        fresh().get("broken")
    message = str(error.value)
    assert "network 'broken'" in message and "brokennets_models:NET (from brokennets 1.2)" in message
    assert "does not import: ModuleNotFoundError" in message and "fix or reinstall brokennets" in message


def test_a_plugin_of_the_wrong_type_is_refused(site):
    install(
        site,
        "wrongnets",
        "[ganstudy.networks]\nwrong = wrongnets_models:NET\n",
        "wrongnets_models",
        "NET = lambda spec: None\n",
    )
    with pytest.raises(
        GanstudyError,
        match=r"network 'wrong' \(wrongnets_models:NET \(from wrongnets 1.2\)\) is of type function, not Network",
    ):
        fresh().get("wrong")


def test_a_name_two_packages_register_is_refused_naming_both(site):
    install(site, "nets_a", "[ganstudy.networks]\ntwin = nets_a_models:NET\n")
    install(site, "nets_b", "[ganstudy.networks]\ntwin = nets_b_models:NET\n")
    with pytest.raises(GanstudyError) as error:
        fresh().get("twin")
    message = str(error.value)
    assert (
        "registered 2 times" in message
        and "nets_a_models:NET from nets_a" in message
        and "nets_b_models:NET from nets_b" in message
    )


def test_an_unknown_name_lists_the_registered_ones():
    with pytest.raises(
        GanstudyError, match="unknown network 'perceptron5'; registered networks: .*perceptron4.*module:attribute"
    ):
        fresh().get("perceptron5")


def test_a_stale_installation_is_told_to_reinstall():
    # A group ganstudy's installed metadata does not declare: what an installation older than its
    # pyproject.toml looks like.
    with pytest.raises(GanstudyError, match="entry points in group 'ganstudy.not_installed' are missing.*reinstall it"):
        Registry("network", "ganstudy.not_installed", instance_of(Network)).get("dcgan")
