"""A study's plan (ganstudy.plan.study_plan) built as code, without Snakemake, from fixture study folders:
what it runs and with which launch line, each check with its message, each row of the guide's edit table
(which spec and job files go stale, which finished runs no longer match), and the changes a run makes
before its jobs (the lock, the rewritten files, the archived runs)."""

from __future__ import annotations

import copy
import json
import logging
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from scipy.stats import mannwhitneyu, norm

from conftest import REPO, SCHEMA, install
from ganstudy.config.validate import validate_study_config
from ganstudy.core.atomic import write_json
from ganstudy.core.resources import SCORING_GMAC_PER_SECOND, extractor_gmac
from ganstudy.errors import GanstudyError
from ganstudy.plan.invocation import FORCE_OPTIONS, NO_JOB_OPTIONS, Invocation, builds_jobs, forces_jobs
from ganstudy.plan.scoring_layout import LEAST, ScoringLayout
from ganstudy.plan.study_files import PlannerFilesNotices
from ganstudy.plan.study_lock import release
from ganstudy.plan.study_plan import PlanRefused, StudyPlan, apply_plan
from ganstudy.train.job import job_record

DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def plan(
    tmp_path: Path, edit=None, *, dry_run: bool = False, site: str | None = None, executing: bool = False
) -> StudyPlan:
    """The plan of the default study (``edit`` applied to a copy) in ``tmp_path``/results on a profile's site."""
    study = copy.deepcopy(DEFAULT)
    study["results_dir"] = str(tmp_path / "results")
    if site:
        study["site"] = f"profiles/{site}/site.yaml"
    if edit:
        edit(study)
    return StudyPlan(
        validate_study_config(study, SCHEMA), Invocation(workflow_dir=str(REPO), dry_run=dry_run, executing=executing)
    )


def finish(plan: StudyPlan) -> None:
    """The study's folder as a finished run of ``plan`` leaves it: its spec, job and compute files, its data's
    manifest and each run's record of the job it ran (what training writes into run.json)."""
    for path, content in plan.files.study_files.items():
        write_json(path, content)
    write_json(Path(plan.study_dir) / "data" / "manifest.json", {"settings": plan.files.specs["data"]["dataset"]})
    for setup, trial in plan.runs:
        write_json(
            Path(plan.study_dir) / "runs" / setup / f"trial{trial}" / "run.json", {"job": job_record(plan.jobs[setup])}
        )


def test_a_job_of_more_ranks_than_cores_asks_for_one_node_where_no_scheduler_places_them(tmp_path):
    # 3 one-core ranks on nodes of 2 cores: mpiexec on this machine starts them all here; Slurm asks for 2 nodes.
    def edit(study):
        study["compute"].update(node_cores=2)
        study["setups"]["grid2x2"]["ranks"] = 3

    assert plan(tmp_path, edit).layout.nodes(3) == 1
    assert plan(tmp_path, edit, site="slurm").layout.nodes(3) == 2


def test_the_default_study_plans_20_runs_their_files_and_a_launch_line_of_one_rank(tmp_path):
    made = plan(tmp_path, dry_run=True)
    # Its trials are a schedule (8, then 10): every run up to the most; the first look tests the first 8.
    assert made.runs == [(setup, trial) for setup in ("grid1x1", "grid2x2") for trial in range(10)]
    assert made.look_runs(1) == [(setup, trial) for setup in ("grid1x1", "grid2x2") for trial in range(8)]
    names = {str(path.relative_to(made.study_dir)) for path in made.files.study_files}
    assert names == {
        "specs/data.json",
        "specs/classifier.json",
        "specs/reference.json",
        "specs/evaluation.json",
        "jobs/grid1x1.json",
        "jobs/grid2x2.json",
        "site/compute.json",
    }
    # max_ranks 1: each job is one rank, on this machine's mpiexec.
    assert [made.layout.ranks(setup) for setup in made.setups] == [1, 1]
    assert made.launch_line(1) == "mpiexec -n 1"
    # 10 against 10 trials at the last look (C(20, 10) splits, more than auto counts: asymptotic); the first
    # look spends 2 - 2 Phi(1.96 / sqrt(0.8)) of alpha 0.05.
    design = next(line for level, line in made.notices if line.startswith("design:"))
    smallest = mannwhitneyu(range(10), range(10, 20), method="asymptotic").pvalue
    assert f"10 against 10 trials: smallest Holm p {smallest:.3g}" in design
    looks = next(line for level, line in made.notices if line.startswith("trials on a schedule"))
    spent = 2 - 2 * norm.cdf(norm.ppf(0.975) / math.sqrt(0.8))
    assert f"looks at 8, 10 trials per set-up, alpha spent by each look {spent:.3g}, 0.05" in looks
    assert made.files.stale == [] and made.files.changed == {} and made.files.made_before is False
    # Pair-iterations per rank: the 2x2 trains 4 pairs on its one rank, the 1x1 one; the 2x2 goes first.
    iterations = {name: setup["iterations"] for name, setup in made.config["setups"].items()}
    assert made.train_priority("grid2x2", 0) == 4 * iterations["grid2x2"] > iterations["grid1x1"]
    assert made.train_priority("grid1x1", 0) == iterations["grid1x1"]


def test_a_plan_that_is_not_shown_does_no_statistics_and_a_cluster_job_s_reads_no_study_file(tmp_path):
    # --list-rules, --lint and a cluster job's own Snakemake: no design lines (scipy is not even imported
    # for them: benchmarks/parse_time.py), and a job's plan reads no arguments or spec file of the study.
    listed = plan(tmp_path)
    assert not [line for _, line in listed.notices if line.startswith(("design:", "trials on a schedule"))]
    finish(listed)
    arguments = listed.files.arguments.path("look/look1")
    arguments.parent.mkdir(parents=True)
    arguments.write_text("--something\nelse\n")
    Path(listed.files.spec_file("data")).write_text("{}")
    study = copy.deepcopy(DEFAULT) | {"results_dir": str(tmp_path / "results")}
    config = validate_study_config(study, SCHEMA)
    job = StudyPlan(config, Invocation(workflow_dir=str(REPO), main_process=False))
    main = StudyPlan(config, Invocation(workflow_dir=str(REPO)))
    for made in (job, main):
        made.files.arguments.record("look/look1", ["--look", 1])
    assert job.files.stale == [] and job.files.arguments.stale == set()
    assert main.files.stale == [Path(main.files.spec_file("data"))] and main.files.arguments.stale == {arguments}


def test_snakemake_s_notices_of_missing_metadata_are_dropped_only_for_the_files_the_plan_writes(tmp_path):
    made = plan(tmp_path)
    arguments = made.files.arguments.record("train/grid1x1/trial0", ["--trial", 0])
    notices = PlannerFilesNotices(("spec", "arguments"), made.files.writes)

    def kept(message: str) -> bool:
        return notices.filter(logging.LogRecord("snakemake.logging", logging.INFO, __file__, 0, message, None, None))

    # Snakemake's dry-run notice, and its report's warning per file (snakemake.workflow, snakemake.report).
    jobs = "3 jobs have missing provenance/metadata so that it in part cannot be used to trigger re-runs.\n"
    assert not kept(jobs + "Rules with missing metadata: arguments spec")
    assert kept(jobs + "Rules with missing metadata: arguments spec train")
    warning = "Missing metadata for file {}. Maybe metadata was deleted or it was created using an older version"
    assert not kept(warning.format(made.files.spec_file("data"))) and not kept(warning.format(arguments))
    assert not kept(warning.format(f"{made.study_dir}/jobs/grid2x2.json"))
    assert kept(warning.format(f"{made.study_dir}/runs/grid1x1/trial0/run.json"))
    assert kept("Building DAG of jobs...")


def shipped(tmp_path: Path, name: str) -> StudyPlan:
    """The dry-run plan of a study of config/studies, its results in ``tmp_path``."""
    study = yaml.safe_load((REPO / "config" / "studies" / f"{name}.yaml").read_text())
    study["results_dir"] = str(tmp_path / "results")
    return StudyPlan(validate_study_config(study, SCHEMA), Invocation(workflow_dir=str(REPO), dry_run=True))


def test_the_thesis_grid_gets_a_rank_per_cell_and_the_per_class_study_a_rank_per_class(tmp_path):
    thesis = shipped(tmp_path / "thesis", "lipizzaner_mnist_4lp")
    assert [trial for setup, trial in thesis.runs if setup == "grid18x18"] == list(range(8))
    assert thesis.layout.ranks("grid18x18") == 324
    cifar = shipped(tmp_path / "cifar", "dcgan_cifar100")
    assert {setup: cifar.layout.ranks(setup) for setup in cifar.setups} == {"dcgan": 1, "dccgan": 1, "per_class": 100}
    assert cifar.launch_line(100) == "mpiexec -n 100"
    # The seed's layout: each rank's generator and discriminator on a GPU of their own, as the compute options
    # the training jobs read say (beside the job files, which hold what decides the results only).
    assert cifar.files.compute_options["gpus_per_rank"] == 2


def test_the_lipi_ring_study_trains_a_torus_and_two_rings_of_nine_cells_beside_the_paper_s_findings(tmp_path):
    ring = shipped(tmp_path, "lipi_ring_digits")
    grids = {setup: ring.jobs[setup]["settings"]["grid"] for setup in ring.setups}
    # The torus is recorded as before rings existed; the rings say what they are.
    assert grids["torus3x3"]["shape"] == "3x3" and "topology" not in grids["torus3x3"]
    for radius in (1, 2):
        ring_grid = grids[f"ring9_r{radius}"]
        assert (ring_grid["shape"], ring_grid["topology"], ring_grid["ring_radius"]) == ("1x9", "ring", radius)
    # Only the topology and the budget differ: the cells train as the default study's grids do.
    settings = {
        setup: {k: v for k, v in ring.jobs[setup]["settings"].items() if k not in ("grid", "iterations")}
        for setup in ring.setups
    }
    assert settings["ring9_r1"] == settings["ring9_r2"] == settings["torus3x3"]
    assert {k: v for k, v in grids["torus3x3"].items() if k != "shape"} == {
        k: v for k, v in grids["ring9_r2"].items() if k not in ("shape", "topology", "ring_radius")
    }
    # Nine cells each: no figure of scores against grid size.
    assert ring.grid_sizes == {9}
    # The paper's findings, quality and cost, against the torus, for each ring.
    for setup in ("ring9_r1", "ring9_r2"):
        fid, cost = ring.references[setup]["fid"], ring.references[setup]["cost"]
        assert (fid["versus"], fid["finding"], cost["versus"], cost["finding"]) == (
            "torus3x3",
            "no_difference",
            "torus3x3",
            "lower",
        )
        assert cost["change"] == [-0.412, -0.142]


def test_a_site_changes_the_launch_line_and_the_compute_options_but_no_file_that_decides_a_result(tmp_path):
    finish(plan(tmp_path))
    summit = plan(tmp_path, site="summit")
    # Summit's 6 GPUs a node: one rank per GPU, 42 / 6 = 7 cores a resource set.
    assert summit.launch_line(1) == "jsrun -n 1 -r 6 -a 1 -c 7 -g 1 -b packed:7"
    assert summit.files.compute_options["node_gpus"] == 6
    # Each GPU rank's torch threads: its resource set's cores.
    assert summit.files.compute_options["threads"] == 7 and plan(tmp_path).files.compute_options["threads"] == 1
    # The compute options' file now says something else, and is no rerun trigger.
    assert json.loads(Path(summit.files.compute_file).read_text())["node_gpus"] == 0
    assert summit.files.stale == [] and summit.files.changed == {}


def test_a_cluster_plan_says_what_will_decide_a_training_job_s_memory_before_its_data_exist(tmp_path):
    def said(made: StudyPlan) -> list[str]:
        return [line for _, line in made.notices if line.startswith("training jobs' memory")]

    fresh = plan(tmp_path, site="slurm")
    split = Path(fresh.study_dir) / "data" / "train.npz"
    assert said(fresh) == [
        f"training jobs' memory (mem_mb, <TBD> in a plan) is set once rule prepare_dataset has written {split}: per "
        "node, each rank's libraries and networks plus twice that split, and a quarter more (ganstudy.core.resources); "
        "compute.mem_mb_per_rank sets it in advance. Scoring jobs' memory and wall time likewise grow with the "
        "images they score, read from the data's manifest"
    ]
    # Nothing to say where the memory is set, on this machine (no scheduler), or once the split exists.
    assert said(plan(tmp_path, _set("compute.mem_mb_per_rank", 2000), site="slurm")) == []
    assert said(plan(tmp_path)) == []
    split.parent.mkdir(parents=True)
    split.write_bytes(b"")
    assert said(plan(tmp_path, site="slurm")) == []


def _inception(study) -> None:
    study["evaluation"].update(extractor="inception", inception_weights="weights/inception.pth")


def _scoring(tmp_path: Path, site: str | None, *edits) -> ScoringLayout:
    def edit(study):
        for change in edits:
            change(study)

    # A dry-run: the Inception weights need not be here.
    return plan(tmp_path, edit, dry_run=True, site=site).scoring


def test_a_scoring_job_gets_a_gpu_and_its_share_of_cores_only_where_a_network_extracts_on_gpu_nodes(tmp_path):
    gpu = _scoring(tmp_path, "slurm-gpu", _inception)
    # slurm-gpu's nodes: 32 cores and 4 GPUs, 8 cores beside each; srun binds the job's GPU as a rank's.
    assert (gpu.gpus, gpu.device, gpu.threads) == (1, "cuda", 8)
    assert gpu.launch_line() == "srun -n 1 --gpus-per-task=1 --cpus-per-task=8 --kill-on-bad-exit=1"
    # Summit's GPUs are reached through jsrun only: a resource set of 42 / 6 cores and one GPU.
    assert _scoring(tmp_path, "summit", _inception).launch_line() == "jsrun -n 1 -r 6 -a 1 -c 7 -g 1 -b packed:7"
    assert _scoring(tmp_path, "slurm-gpu", _inception, _set("compute.threads_per_job", 4)).threads == 4
    # The data set's classifier (a small CNN), device cpu on GPU nodes, a CPU cluster, this machine: the CPU,
    # with the threads of the study's other jobs (on GPU nodes a GPU rank's share of cores, else one).
    for layout, threads in (
        (_scoring(tmp_path, "slurm-gpu"), 8),
        (_scoring(tmp_path, "slurm-gpu", _inception, _set("compute.device", "cpu")), 1),
        (_scoring(tmp_path, "slurm", _inception), 1),
        (_scoring(tmp_path, None, _inception), 1),
    ):
        assert (layout.gpus, layout.device, layout.threads, layout.launch_line()) == (0, "cpu", threads, "")


def test_a_scoring_job_s_memory_and_wall_time_grow_with_the_images_it_scores(tmp_path):
    manifest = {"image_shape": [1, 8, 8], "files": {"test": {"images": 360}, "train": {"images": 1437}}}
    gpu = _scoring(tmp_path, "slurm-gpu", _inception)
    # Hand-computed: the libraries beside CUDA (3,072 MB), Inception's 92 MB file twice, and per image held (2,000
    # samples and the reference split's 1,437, the training split) 64 values as float32 and uint8 and 2,048 + 1,008
    # features.
    per_image = (64 * 5 + 3056 * 4) / 2**20
    assert gpu.memory_mb("evaluate", manifest) == math.ceil((3072 + 2 * 92 + 3437 * per_image) * 1.25)
    assert gpu.memory_mb("quality_statistics", manifest) == math.ceil((3072 + 2 * 92 + 1437 * per_image) * 1.25)
    more = _scoring(tmp_path, "slurm-gpu", _inception, _set("evaluation.samples", 50_000))
    assert more.memory_mb("evaluate", manifest) == math.ceil((3072 + 184 + 51_437 * per_image) * 1.25)
    # 50,000 Inception passes: minutes on a GPU (the floor), hours on one CPU thread.
    assert more.runtime_minutes("evaluate", manifest) == LEAST["evaluate"][1] == 15
    # A small study's jobs ask for what they asked before their size was estimated.
    small = _scoring(tmp_path, None)
    assert [small.memory_mb(job, manifest) for job in ("evaluate", "quality_statistics")] == [2000, 4000]
    assert [small.runtime_minutes(job, manifest) for job in ("evaluate", "quality_statistics")] == [15, 60]
    cpu = _scoring(tmp_path, "slurm-gpu", _inception, _set("compute.device", "cpu"), _set("evaluation.samples", 50_000))
    seconds = 50_000 * 5.7 / SCORING_GMAC_PER_SECOND["cpu"]
    assert cpu.runtime_minutes("evaluate", manifest) == math.ceil(seconds / 60 * 2 * 1.25) > 60
    # A larger DINOv2 costs more: its multiply-adds from the weights' size, 4 bytes a parameter, 257 tokens.
    weights = tmp_path / "vit.pth"
    with open(weights, "wb") as file:
        file.truncate(300 * 2**20)
    assert extractor_gmac("dinov2", str(weights)) == pytest.approx(300 * 2**20 / 4 * 257 / 1e9)
    assert extractor_gmac("dinov2", None) == 78.0


def test_a_scoring_job_s_memory_is_left_to_snakemake_s_tbd_until_its_inputs_exist(tmp_path):
    made = plan(tmp_path, _inception, dry_run=True, site="slurm-gpu")
    resources = made.scoring_resources("evaluate")
    assert (resources["gpu"], resources["cpus_per_task"]) == (1, 8)
    generator = tmp_path / "generator.pt"
    # Snakemake marks the resource <TBD> for a FileNotFoundError naming one of the job's inputs.
    with pytest.raises(FileNotFoundError) as missing:
        resources["mem_mb"]({}, [str(generator)])
    assert missing.value.filename == str(generator)
    generator.write_bytes(b"")
    manifest = {"image_shape": [1, 8, 8], "files": {"train": {"images": 1437}, "test": {"images": 360}}}
    write_json(Path(made.study_dir) / "data" / "manifest.json", manifest)
    assert resources["mem_mb"]({}, [str(generator)]) == made.scoring.memory_mb("evaluate", manifest)
    assert resources["runtime"]({}, [str(generator)]) == made.scoring.runtime_minutes("evaluate", manifest)


def _set(path: str, value):
    def edit(study):
        *keys, last = path.split(".")
        section = study
        for key in keys:
            section = section.setdefault(key, {})
        section[last] = value

    return edit


# The guide's edit table (docs/guide.md, "Editing a finished study"): an edit -> the spec and job files
# that then say something else, and the set-ups whose finished runs no longer match their job.
EDITS = {
    "a metric added": (_set("evaluation.metrics", ["fid", "isc", "kid"]), {"specs/evaluation.json"}, set()),
    "evaluation.samples": (_set("evaluation.samples", 1000), {"specs/evaluation.json"}, set()),
    "a training key": (_set("setups.grid1x1.lr", 0.001), {"jobs/grid1x1.json"}, {"grid1x1"}),
    "the seed": (
        _set("seed", 7),
        {"specs/data.json", "specs/classifier.json", "specs/evaluation.json", "jobs/grid1x1.json", "jobs/grid2x2.json"},
        {"grid1x1", "grid2x2"},
    ),
    "a dataset key": (
        _set("dataset.test_fraction", 0.25),
        {"specs/data.json", "jobs/grid1x1.json", "jobs/grid2x2.json"},
        {"grid1x1", "grid2x2"},
    ),
    # Grids score during training with the classifier: their runs are made from it.
    "a classifier key": (
        _set("classifier.epochs", 20),
        {"specs/classifier.json", "jobs/grid1x1.json", "jobs/grid2x2.json"},
        {"grid1x1", "grid2x2"},
    ),
    "statistics.alpha": (_set("statistics.alpha", 0.01), set(), set()),
    "the set-ups reordered": (lambda study: study.update(setups=dict(reversed(study["setups"].items()))), set(), set()),
    "trials raised": (_set("trials", 10), set(), set()),
}


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_an_edit_of_a_finished_study_makes_stale_exactly_the_files_and_runs_it_changes(tmp_path, edit):
    change, stale, changed = EDITS[edit]
    finish(plan(tmp_path))
    edited = plan(tmp_path, change)
    assert {str(path.relative_to(edited.study_dir)) for path in edited.files.stale} == stale
    assert {setup for setup, _ in edited.files.changed} == changed
    assert all(trial < 10 for _, trial in edited.files.changed)


def test_a_set_up_added_plans_its_runs_and_changes_no_finished_one(tmp_path):
    finish(plan(tmp_path))
    added = plan(
        tmp_path, lambda study: study["setups"].update(grid3x3={**study["setups"]["grid2x2"], "grid": {"shape": "3x3"}})
    )
    assert [run for run in added.runs if run[0] == "grid3x3"] == [("grid3x3", trial) for trial in range(10)]
    assert added.files.stale == [] and added.files.changed == {}
    assert added.grid_sizes == {1, 4, 9}


def test_a_set_up_removed_leaves_its_runs_unplanned_and_changes_nothing_else(tmp_path):
    finish(plan(tmp_path))
    removed = plan(tmp_path, lambda study: study["setups"].pop("grid1x1"))
    assert removed.runs == [("grid2x2", trial) for trial in range(10)]
    assert removed.files.stale == [] and removed.files.changed == {} and removed.grid_sizes == {4}


def test_a_sweep_added_plans_the_set_ups_it_makes_and_its_spec_file(tmp_path):
    finish(plan(tmp_path))

    def sweep(study):
        study["setups"]["lr"] = {**study["setups"]["grid1x1"], "sweep": {"lr": [0.001, 0.002]}}

    swept = plan(tmp_path, sweep)
    made = ["lr__lr=0.001", "lr__lr=0.002"]
    assert [setup for setup in swept.setups if setup.startswith("lr__")] == made
    assert swept.files.specs["sweeps"] == {"lr": {name: {"lr": float(name.split("=")[1])} for name in made}}
    assert swept.files.stale == [] and swept.files.changed == {}
    assert {str(path.relative_to(swept.study_dir)) for path in swept.files.study_files} >= {
        "specs/sweeps.json",
        "jobs/lr__lr=0.001.json",
    }


def test_a_dry_run_gives_stale_stages_the_edited_config_as_their_input_and_says_so(tmp_path):
    finish(plan(tmp_path))
    config_file = tmp_path / "study.yaml"
    config_file.write_text("study: digits_grid\n")
    study = copy.deepcopy(DEFAULT) | {"results_dir": str(tmp_path / "results"), "seed": 7}
    config = validate_study_config(study, SCHEMA)
    invocation = Invocation(workflow_dir=str(REPO), config_files=(str(config_file),), dry_run=True)
    edited = StudyPlan(config, invocation)
    assert edited.files.spec_inputs("data") == [edited.files.spec_file("data"), str(config_file)]
    assert edited.files.spec_inputs("reference") == [edited.files.spec_file("reference")]
    job = f"{edited.study_dir}/jobs/grid1x1.json"
    assert edited.edited_run_inputs("grid1x1", 0) == [str(config_file)]
    assert edited.train_input("grid1x1", 0, "job", job, ancient=lambda path: ("ancient", path)) == job
    assert "a run moves them" in edited.files.changed_warning() and "specs/data.json" in edited.files.stale_warning()


def test_a_run_that_matches_its_job_reads_its_inputs_as_ancient(tmp_path):
    made = plan(tmp_path)
    finish(made)

    def given(name: str, path: str):
        return made.train_input("grid2x2", 3, name, f"{made.study_dir}/{path}", ancient=lambda path: ("ancient", path))

    assert given("job", "jobs/grid2x2.json") == ("ancient", f"{made.study_dir}/jobs/grid2x2.json")
    assert given("train", "data/train.npz") == ("ancient", f"{made.study_dir}/data/train.npz")
    assert given("classifier", "classifier/classifier.pt") == ("ancient", f"{made.study_dir}/classifier/classifier.pt")
    assert given("held_out", "data/test.npz") == [] and made.edited_run_inputs("grid2x2", 3) == []
    # A rule whose input is not the file the set-up's job reads is a bug, named.
    with pytest.raises(GanstudyError, match="rule train's input train is .*/data/test.npz, but grid2x2's job reads"):
        given("train", "data/test.npz")


def test_applying_a_plan_takes_the_lock_rewrites_stale_files_and_archives_changed_runs(tmp_path):
    finish(plan(tmp_path))
    edited = plan(tmp_path, _set("setups.grid1x1.lr", 0.001), executing=True)
    said: list[str] = []
    lock = apply_plan(edited, said.append, said.append)
    try:
        study = Path(edited.study_dir)
        assert lock.is_file()
        assert json.loads((study / "jobs" / "grid1x1.json").read_text()) == json.loads(
            json.dumps(edited.jobs["grid1x1"])
        )
        assert not any((study / "runs" / "grid1x1").glob("trial*/run.json"))
        # finish() finished every run up to the schedule's most: 10 per set-up.
        assert len(list((study / "runs" / "grid2x2").glob("trial*/run.json"))) == 10
        archived = list(study.glob("archive/*/archived/grid1x1/trial*.json"))
        assert len(archived) == 10
        assert any("10 finished run(s) no longer match the config; they move" in line for line in said)
        # A second run of the same study is refused while this one holds the lock.
        with pytest.raises(Exception, match="one run per study at a time"):
            apply_plan(plan(tmp_path), said.append, said.append)
    finally:
        release(lock)
    # Applied, the plan of the same config finds nothing left to change.
    again = plan(tmp_path, _set("setups.grid1x1.lr", 0.001))
    assert again.files.stale == [] and again.files.changed == {}


def _results_dir_a_file(study):
    Path(study["results_dir"]).write_text("")


REFUSALS = {
    "results_dir is a file": (_results_dir_a_file, "results_dir: .* is a file, not a folder"),
    "an unknown network": (
        _set("setups.grid1x1.network", "perceptron5"),
        "setups.grid1x1.network: unknown network 'perceptron5'; registered networks: calo3d, cnn28",
    ),
    "an unknown data set": (
        _set("dataset.name", "digitz"),
        "dataset.name: unknown data set 'digitz'; registered data sets: ",
    ),
    "a global batch the ranks cannot share": (
        lambda study: study.update(setups={"dp": {"mode": "data_parallel", "batch_size": 30, "ranks": 4}}),
        r"set-up 'dp': the global batch_size 30 does not split into 4 rank\(s\) x 1 micro-batch\(es\)",
    ),
    "too little memory per rank": (
        _set("compute.mem_mb_per_rank", 100),
        "compute.mem_mb_per_rank=100 is below the 512 MB a rank needs",
    ),
    "a wall time cap below the wall time": (
        lambda study: study["compute"].update(train_minutes=60, max_train_minutes=30),
        "compute.max_train_minutes=30 is below compute.train_minutes=60",
    ),
    "a wall-time warning no earlier than the wall time": (
        lambda study: study["compute"].update(train_minutes=5, wall_warning_minutes=5),
        "compute.wall_warning_minutes=5 must be below compute.train_minutes=5",
    ),
    "an unknown reference key": (
        _set("setups.grid1x1.reference", {"kid": {"mean": 1.0, "sd": 0.1, "trials": 5, "source": "a paper"}}),
        "setups.grid1x1.reference.kid: not among evaluation.metrics",
    ),
    "a finding against a set-up the study lacks": (
        _set("setups.grid1x1.reference", {"fid": {"versus": "torus", "finding": "no_difference", "source": "a paper"}}),
        r"setups.grid1x1.reference.fid.versus: 'torus' is not another set-up of this study \(grid1x1, grid2x2\)",
    ),
    "a finding without the set-up it is against": (
        _set("setups.grid1x1.reference", {"cost": {"finding": "lower", "source": "a paper"}}),
        "setups.grid1x1.reference.cost: a finding needs both versus .* and finding",
    ),
    "a reference with neither number nor finding": (
        _set("setups.grid1x1.reference", {"fid": {"source": "a paper"}}),
        r"setups.grid1x1.reference.fid: give the paper's number \(mean\) or its finding",
    ),
    "a cost with a mean": (
        _set("setups.grid1x1.reference", {"cost": {"mean": 3.0, "source": "a paper"}}),
        "setups.grid1x1.reference.cost: cost takes a finding against another set-up",
    ),
    "a batch larger than the data": (
        _set("setups.grid2x2.batch_size", 5000),
        "setups.grid2x2.batch_size: 5000 is larger",
    ),
    "more ranks than cells": (_set("setups.grid2x2.ranks", 5), "setups.grid2x2.ranks: 5 ranks for 4 grid cells"),
    "a ring radius too large for the ring": (
        lambda study: study["setups"]["grid2x2"]["grid"].update(shape="1x4", topology="ring", ring_radius=2),
        "set-up 'grid2x2': grid.ring_radius 2 on a ring of 4 cells: .* set grid.ring_radius to at most 1",
    ),
    "a ring of several rows": (
        lambda study: study["setups"]["grid2x2"]["grid"].update(topology="ring"),
        "set-up 'grid2x2': grid.shape 2x2 for a ring: a ring's cells lie in one row, write grid.shape 1x4",
    ),
    "more ranks than classes": (
        lambda study: study.update(setups={"pc": {"mode": "per_class", "network": "dcgan", "ranks": 12}}),
        "setups.pc.ranks: 12 ranks for 10 classes",
    ),
    "a set-up a sweep makes": (
        lambda study: study["setups"]["grid2x2"].update(ranks=4, sweep={"grid.shape": ["2x2", "1x2"]}),
        "setups.grid2x2__grid.shape=1x2.ranks: 4 ranks for 2 grid cells",
    ),
    "fewer cores than GPU ranks": (
        lambda study: study.update(site="profiles/summit/site.yaml", compute={**study["compute"], "node_cores": 4}),
        "compute.node_cores=4 leaves the 6 ranks a node of site 'summit' holds",
    ),
}


@pytest.mark.parametrize("refusal", REFUSALS, ids=list(REFUSALS))
def test_a_study_that_can_never_run_is_refused_naming_its_key_after_what_the_plan_said_before(tmp_path, refusal):
    edit, message = REFUSALS[refusal]
    with pytest.raises(PlanRefused, match=message) as refused:
        plan(tmp_path, edit)
    assert refused.value.notices[0][1].startswith("site '")


@pytest.mark.parametrize("refusal", REFUSALS, ids=list(REFUSALS))
def test_validate_config_refuses_what_the_plan_refuses(tmp_path, refusal, capsys):
    from ganstudy.cli.main import main

    edit, message = REFUSALS[refusal]
    study = copy.deepcopy(DEFAULT)
    study["results_dir"] = str(tmp_path / "results")
    edit(study)
    config = tmp_path / "study.yaml"
    config.write_text(yaml.safe_dump(study))
    assert main(["validate-config", str(config)]) == 2
    said = capsys.readouterr()
    assert "valid;" not in said.out and re.search(message, said.err), said.err
    assert said.err.startswith(f"ganstudy validate-config: error: {config}: ")


def test_a_missing_user_file_stops_a_real_run_and_is_only_listed_by_a_dry_run(tmp_path):
    missing = str(tmp_path / "no_such_classifier.pt")
    with pytest.raises(PlanRefused, match=f"classifier.weights {missing}"):
        plan(tmp_path, _set("classifier.weights", missing))
    listed = plan(tmp_path, _set("classifier.weights", missing), dry_run=True)
    assert any(level == "warning" and missing in line for level, line in listed.notices)
    assert listed.inputs.user_file(missing) == []


def test_the_options_that_build_no_job_are_the_installed_snakemake_s_and_change_nothing():
    from snakemake.cli import get_argument_parser

    options = {option for action in get_argument_parser()._actions for option in action.option_strings}
    assert sorted(NO_JOB_OPTIONS - options) == [] and sorted(FORCE_OPTIONS - options) == []
    assert forces_jobs(["-n", "-F"]) and forces_jobs(["--forcerun=train"]) and not forces_jobs(["-n", "--cores", "1"])
    assert builds_jobs(["--profile", "profiles/local", "--configfile", "study.yaml"])
    assert not builds_jobs(["--profile", "profiles/local", "--lint"])
    assert not builds_jobs(["--dag=dot"]) and not builds_jobs(["--lt"])


TOY_MODE = """
from ganstudy.train.mode_needs import TrainingMode

def three(setup, classes):
    return 3

BAD = TrainingMode("toy_study_train:train", pairs=lambda setup: 3)

TOY = TrainingMode("toy_study_train:train", pairs=three, pair_name="toy pairs", ranks="per_pair",
                   scores_in_training=True)
"""


def test_a_plugin_s_mode_plans_by_its_own_declaration(site, tmp_path):
    points = "[ganstudy.modes]\ntoy_study = toy_study_mode:TOY\ntoy_study_bad = toy_study_mode:BAD\n"
    install(site, "toystudymode", points, "toy_study_mode", TOY_MODE)

    def toy(ranks=None):
        def edit(study):
            study["compute"] = {"max_ranks": 8}
            study["setups"]["toy"] = {"mode": "toy_study", "iterations": 2, "ranks": ranks}

        return edit

    # Its function's module is not installed: named before any job, by its set-up's key.
    with pytest.raises(PlanRefused, match=r"setups.toy.mode: training mode 'toy_study' names 'toy_study_train:train'"):
        plan(tmp_path, toy())
    (site / "toy_study_train.py").write_text("def train(context):\n    raise NotImplementedError\n")
    made = plan(tmp_path, toy())
    assert (made.layout.pairs("toy"), made.layout.ranks("toy"), made.layout.ranks("grid2x2")) == (3, 3, 4)
    # It scores while it trains, so its jobs read the classifier and the real statistics.
    assert {"classifier", "reference"} <= set(made.inputs.train("toy"))
    with pytest.raises(PlanRefused, match="setups.toy.ranks: 5 ranks for 3 toy pairs"):
        plan(tmp_path, toy(ranks=5))
    # A declaration that breaks its contract is refused by its registry, naming what differs.
    with pytest.raises(PlanRefused, match=r"setups.bad.mode: training mode 'toy_study_bad' .* takes \(setup\), but is"):
        plan(tmp_path, lambda study: study["setups"].update(bad={"mode": "toy_study_bad", "iterations": 2}))


def test_a_mode_s_needs_refuse_a_network_or_gpus_it_cannot_train_with_and_an_unknown_mode_lists_the_registered(
    tmp_path,
):
    with pytest.raises(
        PlanRefused,
        match=r"setups.grid2x2.mode: mode grid trains with 1 GPU\(s\) per rank, but compute.gpus_per_rank is 2",
    ):
        plan(tmp_path, lambda study: study.update(site="profiles/summit/site.yaml", compute={"gpus_per_rank": 2}))
    with pytest.raises(
        PlanRefused,
        match=r"setups.grid1x1.network: network 'dccgan' takes class labels, but mode 'grid' feeds no labels: "
        r"train it in mode conditional or data_parallel",
    ):
        plan(tmp_path, _set("setups.grid1x1.network", "dccgan"))
    with pytest.raises(
        PlanRefused,
        match=r"setups.grid1x1.mode: unknown training mode 'gird'; registered training modes: conditional, "
        r"data_parallel, grid, per_class, single",
    ):
        plan(tmp_path, _set("setups.grid1x1.mode", "gird"))


def test_what_the_workflow_imports_at_every_parse_leaves_out_scipy_pandas_and_torch():
    # Every Snakemake process (on a cluster, each job's own) parses the Snakefile: the modules its files import
    # at the top, read from the files themselves.
    files = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
    modules = sorted(
        {found for path in files for found in re.findall(r"^from (ganstudy[\w.]*) import", path.read_text(), re.M)}
    )
    assert "ganstudy.plan.study_plan" in modules
    code = f"import sys\nfor name in {modules!r}: __import__(name)\n" + (
        "print(sorted(m for m in ('scipy', 'pandas', 'torch', 'sklearn') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
