"""The plugin contracts in code (ganstudy.contracts): every built-in part keeps them, and a lab's part that
breaks one is refused when it is loaded, naming the part, its package and what it lacks, before it is
called. Each lab part is installed as pip would (dist-info and entry points, conftest.install)."""

from __future__ import annotations

import textwrap

import pytest

from conftest import install
from ganstudy import contracts
from ganstudy.data.kinds import KINDS, all_kinds, get_kind
from ganstudy.data.loaders import DATASETS, get_dataset
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.metrics import METRICS, compute_columns, get_metric
from ganstudy.models import NETWORKS, NetworkSpec, build_pair, get_network
from ganstudy.registry import contract_problems, resolve_part
from ganstudy.train.tasks import TASKS, Task


def test_every_built_in_part_keeps_its_contract():
    for registry in (NETWORKS, DATASETS, KINDS, METRICS, TASKS):
        assert [registry.get(name) for name in registry], registry.kind
    for name in METRICS:
        resolve_part(get_metric(name).compute, f"metric '{name}'", contracts.MetricCompute)
    for name in NETWORKS:
        if isinstance(get_network(name).build, str):
            resolve_part(get_network(name).build, f"network '{name}'", contracts.NetworkBuilder)
    for kind in all_kinds():
        kind.part(kind.sample_figure, contracts.SampleFigure)
        if kind.held_out is not None:
            kind.part(kind.held_out.scorer, contracts.HeldOutScorer)
            kind.part(kind.held_out.evaluate, contracts.HeldOutEvaluation)
        for figure in kind.figures:
            kind.part(figure.draw, contracts.KindFigureDraw)
    assert [figure.name for kind in all_kinds() for figure in kind.figures] == ["showers"]
    with pytest.raises(GanstudyError, match="data kind 'showers' has no figure 'profiles'; its figures: showers"):
        get_kind("showers").figure("profiles")


def test_a_callable_is_held_to_the_arguments_it_is_called_with():
    assert contract_problems(lambda spec: None, contracts.ShapeCheck) == []
    assert contract_problems(lambda *args, **kwargs: None, contracts.ShapeCheck) == []
    assert contract_problems(lambda spec, shape=None: None, contracts.ShapeCheck) == []  # a default: not required
    assert contract_problems(lambda: None, contracts.ShapeCheck) == [
        "takes (), but is called as (spec) (ganstudy.contracts.ShapeCheck)"
    ]
    assert contract_problems(lambda spec, size: None, contracts.ShapeCheck) == [
        "takes (spec, size), but is called as (spec) (ganstudy.contracts.ShapeCheck)"
    ]
    assert contract_problems("not callable", contracts.ShapeCheck) == ["is of type str, not a callable"]


LAB = textwrap.dedent("""
    from ganstudy.data.loaders import DataSet
    from ganstudy.evaluate.metrics import Metric
    from ganstudy.models import Network
    from ganstudy.train.tasks import Task


    def build_with_a_size(spec, size):
        raise AssertionError("never called: refused by its signature")


    TWO_ARGUMENT_BUILDER = Network(build_with_a_size)
    # A reference is imported, and checked, when the first pair is built.
    LATE_BUILDER = Network("lab_parts:build_with_a_size")
    CHECK_WITHOUT_SPEC = Network("ganstudy.models.perceptron:build", fits=lambda: None)
    PATH_ONLY = DataSet(load=lambda path: None, count_classes=lambda path, depth: 3)
    TWO_COLUMNS = Metric("a metric whose compute wants the real images too", "lower", frozenset({"images"}),
                         "lab_parts:compute_with_reals")


    def compute_with_reals(scoring, reals):
        raise AssertionError("never called: refused by its signature")


    class ScoreWithoutBatch(Task):
        def judge(self, discriminator, images):
            return discriminator(images)


    class Scorer:
        def __init__(self, split_path, count, seed, network, device, setup):
            pass

        def score(self):
            return 0.0


    def evaluate(generator_path, run_record_path, split_path, settings, study_seed, trial, out_path):
        raise AssertionError("never called: refused by its signature")
""")
POINTS = textwrap.dedent("""
    [ganstudy.networks]
    c_two_arguments = lab_parts:TWO_ARGUMENT_BUILDER
    c_late = lab_parts:LATE_BUILDER
    c_no_spec = lab_parts:CHECK_WITHOUT_SPEC
    [ganstudy.datasets]
    c_path_only = lab_parts:PATH_ONLY
    [ganstudy.metrics]
    c_two_columns = lab_parts:TWO_COLUMNS
    [ganstudy.tasks]
    c_no_batch = lab_parts:ScoreWithoutBatch
    [ganstudy.kinds]
    c_voxels = lab_parts:VOXELS
""")
KIND = textwrap.dedent("""
    from ganstudy.data.kinds import DataKind, HeldOut

    VOXELS = DataKind(name="c_voxels", description="voxel grids", task="energy", sample_figure="lab_parts:evaluate",
                      held_out=HeldOut("a voxel generator on held-out grids", "score-voxels", "lab_parts:Scorer",
                                       "lab_parts:evaluate", "voxel_score"), conditions=True, classes=False)
""")


@pytest.fixture
def lab(site):
    # Names of their own: the registries keep what they loaded for the rest of the test process.
    install(site, "lab-parts", POINTS, "lab_parts", LAB + KIND)


def refusal(call) -> str:
    with pytest.raises(GanstudyError) as error:
        call()
    return str(error.value)


def test_a_network_s_builder_and_shape_check_are_checked_when_it_is_loaded(lab):
    assert refusal(lambda: get_network("c_two_arguments")) == (
        "network 'c_two_arguments' (lab_parts:TWO_ARGUMENT_BUILDER (from lab-parts 1.2)) its build takes (spec, "
        "size), but is called as (spec) (ganstudy.contracts.NetworkBuilder); fix it in its package"
    )
    assert "its fits takes (), but is called as (spec)" in refusal(lambda: get_network("c_no_spec"))
    # A builder named by reference is checked where it is imported, before it is called.
    spec = NetworkSpec((1, 8, 8), 8, 8)
    assert refusal(lambda: build_pair("c_late", spec)) == (
        "network 'c_late' (lab_parts:LATE_BUILDER (from lab-parts 1.2)): its builder: 'lab_parts:build_with_a_size' "
        "takes (spec, size), but is called as (spec) (ganstudy.contracts.NetworkBuilder); fix it in its package"
    )


def test_a_data_set_s_loader_and_class_counter_are_checked_when_it_is_loaded(lab):
    said = refusal(lambda: get_dataset("c_path_only"))
    assert said.startswith("data set 'c_path_only' (lab_parts:PATH_ONLY (from lab-parts 1.2)) ")
    assert "its load takes (path), but is called as (path, options) (ganstudy.contracts.Loader)" in said
    assert "its count_classes takes (path, depth), but is called as (path) (ganstudy.contracts.ClassCounter)" in said


def test_a_metric_s_compute_is_checked_before_it_is_called(lab):
    assert refusal(lambda: compute_columns("c_two_columns", object())) == (
        "metric 'c_two_columns' (lab_parts:TWO_COLUMNS (from lab-parts 1.2)): 'lab_parts:compute_with_reals' takes "
        "(scoring, reals), but is called as (scoring) (ganstudy.contracts.MetricCompute); fix it in its package"
    )


def test_a_task_s_overrides_take_what_the_methods_they_override_take(lab):
    assert refusal(lambda: TASKS.get("c_no_batch")) == (
        "training task 'c_no_batch' (lab_parts:ScoreWithoutBatch (from lab-parts 1.2)) judge takes (self, "
        "discriminator, images), but is called as (self, discriminator, images, batch) "
        "(ganstudy.train.tasks.Task.judge); fix it in its package"
    )
    assert contract_problems(Task, Task) == []


def test_a_kind_s_parts_are_checked_against_their_contracts_when_a_job_imports_them(lab):
    kind = get_kind("c_voxels")
    where = "data kind 'c_voxels' (lab_parts:VOXELS (from lab-parts 1.2))"
    said = refusal(lambda: kind.part(kind.held_out.scorer, contracts.HeldOutScorer))
    assert said.startswith(
        f"{where}: 'lab_parts:Scorer' __init__ takes (self, split_path, count, seed, network, device, setup), "
        "but is called as (self, split_path, count, seed, network, device, setup, ranks)"
    )
    assert "score takes (self), but is called as (self, generator) (ganstudy.contracts.HeldOutScorer.score)" in said
    # The scoring function of before the job object (one argument per input) is named as such.
    said = refusal(lambda: kind.part(kind.held_out.evaluate, contracts.HeldOutEvaluation))
    assert said.startswith(
        f"{where}: 'lab_parts:evaluate' takes (generator_path, run_record_path, split_path, settings, "
        "study_seed, trial, out_path), but is called as (job) (ganstudy.contracts.HeldOutEvaluation)"
    )
    assert "is called as (generator, spec, data, seed, path)" in refusal(
        lambda: kind.part(kind.sample_figure, contracts.SampleFigure)
    )
