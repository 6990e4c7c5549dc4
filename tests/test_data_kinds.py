"""Data kinds and data-set entries: every data set names a registered kind, a study whose network cannot
learn its data stops before any job, and a loader that breaks the data-set contract is named."""

from __future__ import annotations

import copy
import textwrap

import pytest

from conftest import install
from ganstudy.contracts import HeldOutEvaluation, HeldOutScorer
from ganstudy.data.kinds import IMAGES, PAIRS, SHOWERS, all_kinds, get_kind, kind_for_task
from ganstudy.data.loaders import DATASETS, LoadOptions, get_dataset
from ganstudy.data.prepare import prepare_dataset
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.metrics import metric_problems
from ganstudy.models import get_network
from ganstudy.plan.parts import part_problems
from test_workflow import SHRUNKEN, snakemake


def test_every_data_set_names_a_registered_kind_and_every_kind_a_task():
    kinds = {kind.name for kind in all_kinds()}
    assert kinds >= {"images", "pairs", "showers"}
    # ganstudy's own (a plugin installed in this environment may add more).
    own = [name for name in DATASETS if DATASETS.origin(name).distribution == "ganstudy"]
    assert {name: get_dataset(name).kind for name in own} == {
        "calorimeter": "showers",
        "cifar10": "images",
        "cifar100": "images",
        "digits": "images",
        "fashion_mnist": "images",
        "image_folder": "images",
        "mnist": "images",
        "npz": "images",
        "paired_folder": "pairs",
    }
    # Classes known before reading size per-class jobs; folders and user arrays are counted once read.
    assert get_dataset("cifar100").classes == 100 and get_dataset("image_folder").classes is None
    assert [kind_for_task(task) for task in ("noise", "paired", "energy")] == [IMAGES, PAIRS, SHOWERS]
    assert kind_for_task(get_network("pix2pix").task) is get_kind("pairs")
    with pytest.raises(
        GanstudyError, match="data kinds of networks trained by task 'hinge': none; name the job's kind"
    ):
        kind_for_task("hinge")


def test_only_held_out_kinds_are_scored_on_the_test_split():
    # Held-out kinds name importable parts that keep their contracts (ganstudy.contracts).
    for kind in (PAIRS, SHOWERS):
        assert isinstance(kind.part(kind.held_out.scorer, HeldOutScorer), type)
        assert callable(kind.part(kind.held_out.evaluate, HeldOutEvaluation))
    assert IMAGES.held_out is None and IMAGES.classes and not PAIRS.classes
    assert metric_problems(IMAGES, ["fid", "class_fid"], "classifier") == []
    assert metric_problems(PAIRS, ["l1", "fid"], "inception") == []


def test_a_network_that_cannot_learn_the_data_is_refused_before_any_job(tmp_path, env):
    config = copy.deepcopy(SHRUNKEN)
    config["setups"]["bce"]["network"] = "pix2pix"
    done = snakemake(tmp_path, config, "-n", env=env)
    problem = (
        "setups.bce.network: network 'pix2pix' is trained by task 'paired', but dataset 'digits' holds images with "
        "classes, whose networks are trained by task 'noise'"
    )
    assert done.returncode != 0 and problem in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]
    assert not (tmp_path / "results").exists()


def test_part_problems_name_each_key(default_config):
    config = copy.deepcopy(default_config)
    config["dataset"]["name"] = "cifar7"
    assert part_problems(config)[0].startswith("dataset.name: unknown data set 'cifar7'")
    config["dataset"]["name"] = "calorimeter"
    problems = part_problems(config)
    assert any(p.startswith("evaluation.metrics ['fid'") and "do not score calorimeter showers" in p for p in problems)
    assert any(p.startswith("setups.") and "network 'perceptron4' is trained by task 'noise'" in p for p in problems)


LOADERS = textwrap.dedent("""
    import numpy as np
    from ganstudy.data.loaders import DataSet, RawDataset

    def _images(n=20):
        return np.random.default_rng(0).uniform(0, 1, (n, 1, 8, 8)).astype(np.float32)

    def no_conditions(path, options):
        return RawDataset(_images(), np.zeros(20, np.int64), "test")

    def float64(path, options):
        return RawDataset(_images().astype(np.float64), np.zeros(20, np.int64), "test")

    def too_many_classes(path, options):
        return RawDataset(_images(), np.arange(20, dtype=np.int64) % 4, "test")

    def not_raw(path, options):
        return {"images": _images()}

    PAIRS_WITHOUT_CONDITIONS = DataSet(no_conditions, kind="pairs", classes=1)
    DOUBLES = DataSet(float64)
    THREE_CLASSES = DataSet(too_many_classes, classes=3)
    DICT = DataSet(not_raw)
    NOT_A_DATA_SET = no_conditions
""")


@pytest.mark.parametrize(
    "attribute, problem",
    [
        ("PAIRS_WITHOUT_CONDITIONS", "returned no conditions, but its kind 'pairs' has"),
        ("DOUBLES", "returned images of float64 (20, 1, 8, 8), not float32 (N, C, H, W)"),
        ("THREE_CLASSES", "returned labels 0..3, outside its declared classes 0..2"),
        ("DICT", "returned dict, not a RawDataset"),
        ("NOT_A_DATA_SET", "is of type function, not DataSet"),
    ],
)
def test_a_loader_that_breaks_the_contract_is_named(site, tmp_path, attribute, problem):
    (site / "lab_loaders.py").write_text(LOADERS)
    name = f"lab_loaders:{attribute}"
    with pytest.raises(GanstudyError) as error:
        prepare_dataset(name, None, 0.25, 1, tmp_path / "out", LoadOptions())
    assert problem in str(error.value) and name in str(error.value)
    assert not (tmp_path / "out").exists()


def test_a_network_that_cannot_build_for_a_standard_data_set_s_images_is_named_while_planning(default_config):
    config = copy.deepcopy(default_config)
    config["setups"] = {
        "cnn": {**config["setups"]["grid1x1"], "network": "cnn28"},
        "dc": {**config["setups"]["grid1x1"], "network": "dcgan"},
    }
    assert part_problems(config) == [
        "setups.cnn.network: network cnn28 makes 28x28 images, the data are 8x8: set dataset.image_size to 28 "
        "(dataset 'digits' gives 8x8 images with 1 channel(s))"
    ]
    # Resized as the message says, both fit; a size the DC-GAN cannot upsample to is named.
    config["dataset"]["image_size"] = 28
    assert part_problems(config) == []
    config["dataset"]["image_size"] = 30
    assert part_problems(config)[0].startswith(
        "setups.cnn.network: network cnn28 makes 28x28 images, the data are 30x30"
    )
    assert "setups.dc.network: the DC-GAN networks upsample twice by 2" in part_problems(config)[1]


LAB_NETWORKS = textwrap.dedent("""
    from ganstudy.models import Network

    WIDTH = {"type": "object", "properties": {"width": {"type": "integer", "minimum": 1, "default": 64}}}
    # Left open on purpose: options the network passes on unread.
    FREE = {**WIDTH, "additionalProperties": True}
    CLOSED_BY_DEFAULT = Network("ganstudy.models.perceptron:build", options=WIDTH)
    OPEN = Network("ganstudy.models.perceptron:build", options=FREE)
""")


def test_a_plugin_s_options_schema_is_closed_unless_it_says_otherwise(default_config, site):
    # JSON Schema lets unnamed keys through by default: a misspelt option would pass the plan unread.
    (site / "lab_networks.py").write_text(LAB_NETWORKS)
    config = copy.deepcopy(default_config)
    setup = config["setups"]["grid1x1"]
    config["setups"] = {"lab": {**setup, "network": "lab_networks:CLOSED_BY_DEFAULT", "network_options": {"widht": 8}}}
    [problem] = part_problems(config)
    assert problem.startswith("setups.lab.network_options: unknown key 'widht' (did you mean 'width'?)"), problem
    assert "the options schema of network 'lab_networks:CLOSED_BY_DEFAULT'" in problem
    config["setups"]["lab"].update(network_options={"width": 8})
    assert part_problems(config) == [] and config["setups"]["lab"]["network_options"] == {"width": 8}
    config["setups"]["lab"].update(network="lab_networks:OPEN", network_options={"widht": 8})
    assert part_problems(config) == [] and config["setups"]["lab"]["network_options"] == {"widht": 8, "width": 64}


LAB_DRAWN = textwrap.dedent("""
    import numpy as np

    from ganstudy.data.loaders import DataSet, RawDataset

    OPTIONS = {"type": "object", "properties": {"per_class": {"type": "integer", "minimum": 2, "default": 6},
                                                "seed": {"type": "integer", "default": 3}}}


    def draw(path, options):
        # Drawn from the options it is given: their size and seed.
        per_class, seed = options.dataset_options["per_class"], options.dataset_options["seed"]
        rng = np.random.default_rng(seed)
        images = rng.uniform(0, 1, (2 * per_class, 1, 8, 8)).astype(np.float32)
        return RawDataset(images, np.repeat(np.arange(2), per_class), f"drawn with seed {seed}")


    DRAWN = DataSet(draw, classes=2, image_shape=(1, 8, 8), options=OPTIONS)
""")


def test_a_data_set_s_options_are_checked_against_its_schema_and_reach_its_loader(default_config, site, tmp_path):
    from ganstudy.config.validate import dataset_settings
    from ganstudy.data.settings import DatasetSettings

    install(site, "lab-drawn", "[ganstudy.datasets]\ndrawn = lab_drawn:DRAWN\n", "lab_drawn", LAB_DRAWN)
    config = copy.deepcopy(default_config)
    config["dataset"] |= {"name": "drawn", "options": {"per_clas": 10}}
    [problem] = part_problems(config)
    assert problem == (
        "dataset.options: unknown key 'per_clas' (did you mean 'per_class'?); allowed here: per_class, seed (the "
        "options schema of data set 'drawn', lab_drawn:DRAWN (from lab-drawn 1.2))"
    )
    config["dataset"]["options"] = {"per_class": 10}
    assert part_problems(config) == [] and config["dataset"]["options"] == {"per_class": 10, "seed": 3}
    # The preparing job's settings carry them (a change re-prepares the data and retrains what used them).
    section = dataset_settings(config["dataset"])
    assert section["options"] == {"per_class": 10, "seed": 3}
    manifest = prepare_dataset("drawn", None, 0.25, 1, tmp_path / "data", DatasetSettings.of(section).load_options())
    assert manifest["class_counts"]["all"] == {"0": 10, "1": 10} and manifest["source"] == "drawn with seed 3"
    # A data set without an options schema takes none; without options the section is as it always was,
    # so that the data of a study prepared before data sets had options are not prepared again.
    config["dataset"] = {**default_config["dataset"], "options": {"per_class": 10}}
    assert part_problems(config) == [
        "dataset.options: data set 'digits' takes no options, got ['per_class']; remove them"
    ]
    assert "options" not in dataset_settings(default_config["dataset"])


LAB_KIND = textwrap.dedent("""
    from ganstudy.data.kinds import DataKind, HeldOut

    VOXELS = DataKind(name="voxels", description="voxel grids", task="energy", sample_figure="lab_kind.figures:draw",
                      held_out=HeldOut("a voxel generator on held-out grids", "score-voxels", "lab_kind.scoring:Scorer",
                                       "ganstudy.evaluate.showers:evaluate_showers", "voxel_score"),
                      conditions=True, classes=False)
""")


def test_a_kind_whose_parts_are_not_installed_is_named_while_planning(site):
    # Its figure and scorer modules were left out of the package: found without importing anything.
    install(site, "lab-kind", "[ganstudy.kinds]\nvoxels = lab_kind:VOXELS\n", "lab_kind", LAB_KIND)
    origin = "lab_kind:VOXELS (from lab-kind 1.2)"
    assert get_kind("voxels").missing_parts() == [
        f"data kind 'voxels' ({origin}) names 'lab_kind.figures:draw', but module 'lab_kind.figures' is not installed: "
        "fix its package or install it",
        f"data kind 'voxels' ({origin}) names 'lab_kind.scoring:Scorer', but module 'lab_kind.scoring' is not "
        "installed: fix its package or install it",
    ]
    assert [kind.missing_parts() for kind in (IMAGES, PAIRS, SHOWERS)] == [[], [], []]


def test_a_plugin_kind_s_in_training_score_is_found_by_status_and_the_convergence_check(site):
    import pandas as pd

    from ganstudy.report.status import _score_cell
    from ganstudy.stats.convergence import run_curve
    from ganstudy.train.progress import score_columns

    install(site, "lab-kind", "[ganstudy.kinds]\nvoxels = lab_kind:VOXELS\n", "lab_kind", LAB_KIND)
    columns = score_columns()
    assert columns[:2] == ("fid", "fid_best")
    assert {"l1", "showers", "voxel_score"} <= set(columns)
    losses = pd.DataFrame(
        {"iteration": [1, 2, 3, 4], "d_loss": [0.5] * 4, "g_loss": [1.0] * 4, "voxel_score": [3.0, None, 2.0, 1.5]}
    )
    column, curve = run_curve(losses, columns)
    assert column == "voxel_score" and curve.to_dict() == {1: 3.0, 3: 2.0, 4: 1.5}
    assert _score_cell({"iteration": "4", "d_loss": "0.5", "voxel_score": "1.5"}, columns) == "voxel_score 1.5"
