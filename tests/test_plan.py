"""The plan as code (ganstudy.plan), without Snakemake: how a study's training jobs lay out on a site's
nodes, what could never be laid out, and the launchers' lines, ganstudy's and a plugin's. One dry-run
checks that a launcher from a plugin reaches the training jobs' shell lines."""

from __future__ import annotations

import copy
import json
import math
import os

import pytest

from conftest import REPO, SCHEMA, install, planned_jobs
from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.config.validate import dataset_settings, validate_study_config
from ganstudy.errors import GanstudyError
from ganstudy.plan.known_data import known_data
from ganstudy.plan.launchers import LAUNCHERS, RankLayout
from ganstudy.plan.layout import ClassesUnknown, StudyLayout
from ganstudy.plan.parts import part_problems
from ganstudy.plan.site import read_site, scheduler_resources, with_site
from ganstudy.plan.study_files import (
    ArgumentsFiles,
    as_json,
    moved_to_spec,
    out_of_date,
    refresh,
    relocated,
    results_dir_problem,
    stale_files,
)
from ganstudy.train.job import job_settings, older_paths_named
from test_workflow import SHRUNKEN, snakemake


def planned(study: dict, site: str | None = None, classes: int | None = 10) -> StudyLayout:
    """The layout of ``study`` (validated, defaults filled) on a profile's site, as the workflow makes it."""
    config = validate_study_config(copy.deepcopy(study), SCHEMA)
    config["compute"], _ = with_site(config["compute"], read_site(site and f"profiles/{site}/site.yaml", REPO))
    if config["compute"]["node_cores"] is None:
        config["compute"]["node_cores"] = 2
    return StudyLayout.from_config(config, classes, "test site")


GRIDS = {
    "setups": {
        "g18": {"mode": "grid", "grid": {"shape": "18x18"}},
        "g2": {"mode": "grid", "grid": {"shape": "2x2"}, "ranks": 2},
        "auto": {"mode": "grid", "grid": {"shape": "auto", "max_cells": 9}},
        "classes": {"mode": "per_class", "network": "dcgan"},
        "dp": {"mode": "data_parallel", "ranks": 4},
        "one": {"mode": "single"},
    },
    "compute": {"max_ranks": 400},
}


def test_a_set_up_has_a_rank_per_cell_or_class_up_to_max_ranks_and_its_own_ranks_where_set():
    layout = planned(GRIDS, "summit")
    assert {name: layout.ranks(name) for name in GRIDS["setups"]} == {
        "g18": 324,
        "g2": 2,
        "auto": 9,
        "classes": 10,
        "dp": 4,
        "one": 1,
    }
    assert {name: layout.pairs(name) for name in GRIDS["setups"]} == {
        "g18": 324,
        "g2": 4,
        "auto": 9,
        "classes": 10,
        "dp": 1,
        "one": 1,
    }
    assert layout.pairs_per_rank("g2") == 2.0
    capped = planned({**GRIDS, "compute": {"max_ranks": 4}}, "summit")
    assert (capped.ranks("g18"), capped.ranks("classes"), capped.ranks("dp"), capped.ranks("g2")) == (4, 4, 4, 2)
    # Without ranks, a data-parallel set-up takes max_ranks.
    assert planned({"setups": {"dp": {"mode": "data_parallel"}}, "compute": {"max_ranks": 4}}).ranks("dp") == 4


def test_summit_nodes_hold_a_rank_per_gpu_and_jsrun_gets_resource_sets_of_their_cores():
    layout = planned(GRIDS, "summit")
    # 6 GPUs a node, one a rank: 324 ranks on 54 nodes, each rank with 42 / 6 = 7 cores.
    assert (layout.ranks_per_node, layout.gpus_per_rank, layout.nodes(324), layout.nodes(7)) == (6, 1, 54, 2)
    line = LAUNCHERS.get("jsrun").line(layout.rank_layout(324))
    assert line == "jsrun -n 324 -r 6 -a 1 -c 7 -g 1 -b packed:7"
    two = planned({**GRIDS, "compute": {"max_ranks": 400, "gpus_per_rank": 2}}, "summit")
    assert (
        two.ranks_per_node == 3
        and LAUNCHERS.get("jsrun").line(two.rank_layout(4)) == "jsrun -n 4 -r 3 -a 1 -c 14 -g 2 -b packed:14"
    )


def test_a_cpu_site_fits_cores_over_threads_ranks_on_a_node_and_asks_for_no_gpu():
    layout = planned({**GRIDS, "compute": {"max_ranks": 400, "node_cores": 64, "threads_per_job": 4}}, "slurm")
    assert (layout.ranks_per_node, layout.gpus_per_rank, layout.nodes(324)) == (16, 0, math.ceil(324 / 16))
    assert LAUNCHERS.get("srun").line(layout.rank_layout(8)) == "srun -n 8 --cpus-per-task=4 --kill-on-bad-exit=1"
    gpu = planned(GRIDS, "slurm-gpu")
    # GPU nodes of 32 cores and 4 GPUs: each rank gets its share of the cores, 8, as its torch threads.
    assert gpu.threads == 8
    line = "srun -n 2 --gpus-per-task=1 --cpus-per-task=8 --kill-on-bad-exit=1"
    assert LAUNCHERS.get("srun").line(gpu.rank_layout(2)) == line
    # On the CPU of GPU nodes one thread, as on a CPU site (more would change a grid's bits with its rank
    # count); a number chosen is kept, unless a node's ranks could never get them.
    assert planned({**GRIDS, "compute": {"device": "cpu"}}, "slurm-gpu").threads == 1
    assert planned({**GRIDS, "compute": {"threads_per_job": 2}}, "slurm-gpu").threads == 2
    too_many = planned({**GRIDS, "compute": {"threads_per_job": 9}}, "slurm-gpu")
    assert too_many.problems(None) == [
        "compute.threads_per_job=9 for each of the 4 ranks a node of site 'test site' holds is more than its 32 cores: "
        "the jobs could never start; lower threads_per_job to 8 or remove it (null: the node's cores shared among its "
        "ranks)"
    ]
    assert LAUNCHERS.get("mpiexec").line(gpu.rank_layout(2)) == "mpiexec -n 2"
    # Only Slurm's plugin reads the signal and the GPU binding resources.
    assert LAUNCHERS.get("srun").resources(300) == {"tasks_per_gpu": 0, "slurm_extra": "--signal=USR1@300"}
    assert LAUNCHERS.get("mpiexec").resources(300) == {} == LAUNCHERS.get("jsrun").resources(300)


def test_a_per_class_set_up_on_data_of_unknown_classes_is_left_to_its_job_naming_the_key():
    layout = planned(GRIDS, "summit", classes=None)
    with pytest.raises(
        ClassesUnknown,
        match=r"set-up 'classes' trains one pair per class of dataset 'digits', whose number of classes is "
        r"known only once it is read: set setups.classes.ranks",
    ):
        layout.ranks("classes")
    assert "classes" not in layout.known_ranks() and layout.known_ranks()["g18"] == 324
    # Given ranks, it is planned; a rank holds one or more classes.
    fixed = planned(
        {**GRIDS, "setups": {**GRIDS["setups"], "classes": {"mode": "per_class", "ranks": 5}}}, "summit", classes=None
    )
    assert fixed.ranks("classes") == 5 and fixed.pairs_per_rank("classes") == 1.0


def test_what_could_never_be_laid_out_is_named_each_with_its_key():
    study = {
        "setups": {
            "wide": {"mode": "grid", "grid": {"shape": "2x2"}, "ranks": 5},
            "many": {"mode": "per_class", "network": "dcgan", "ranks": 11},
            "big": {"mode": "single", "batch_size": 2000},
            "dp": {"mode": "data_parallel", "batch_size": 10, "data_parallel": {"accumulation_steps": 4}},
        },
        "compute": {
            "max_ranks": 2,
            "train_minutes": 60,
            "max_train_minutes": 30,
            "wall_warning_minutes": 60,
            "mem_mb_per_rank": 100,
        },
    }
    problems = planned(study).problems(training_images=1500)
    assert problems[:3] == [
        "setups.wide.ranks: 5 ranks for 4 grid cells; a rank holds at least one: set ranks to at most 4",
        "setups.many.ranks: 11 ranks for 10 classes; a rank holds at least one: set ranks to at most 10",
        "setups.big.batch_size: 2000 is larger than the training split's 1500 images: lower batch_size",
    ]
    assert problems[3].startswith("set-up 'dp': ") and "10" in problems[3]
    assert [problem.split(" ")[0] for problem in problems[4:]] == [
        "compute.max_train_minutes=30",
        "compute.wall_warning_minutes=60",
        "compute.mem_mb_per_rank=100",
    ]
    # The split's size unknown before any job: no batch is judged.
    assert not any(problem.startswith("setups.big") for problem in planned(study).problems(training_images=None))
    assert planned(GRIDS, "summit").problems(training_images=1500) == []


def test_a_node_too_small_for_its_ranks_is_refused_naming_the_site_and_a_retry_asks_for_more_time():
    layout = planned(
        {
            "setups": {"g": {"mode": "grid", "grid": {"shape": "2x2"}}},
            "compute": {
                "max_ranks": 4,
                "node_mem_mb": 3000,
                "mem_mb_per_rank": 1000,
                "train_minutes": 40,
                "max_train_minutes": 100,
            },
        },
        "slurm",
    )
    # 2 cores a node (this test's), one thread a rank: 2 ranks share a node, 2,000 MB of its 3,000.
    assert layout.memory_mb("g", 10**6) == 2000
    small = planned(
        {
            "setups": {"g": {"mode": "grid", "grid": {"shape": "2x2"}}},
            "compute": {"max_ranks": 4, "node_mem_mb": 1500, "mem_mb_per_rank": 1000},
        },
        "slurm",
    )
    with pytest.raises(
        GanstudyError,
        match=r"set-up g: its ranks on one node need 2000 MB, more than a node's 1500 MB "
        r"\(node_mem_mb, site 'test site'\)",
    ):
        small.memory_mb("g", 10**6)
    assert [layout.runtime_minutes(attempt) for attempt in (1, 2, 3)] == [40, 80, 100]


TOY = """
from ganstudy.plan.launchers import Launcher, SchedulerSetting

TOY = Launcher(lambda layout: f"toyrun --ranks {layout.ranks} --per-node {layout.ranks_per_node}",
               (SchedulerSetting("account", "toy_bank", ("TOY_BANK",), "the toy scheduler refuses every job"),))
"""


def test_a_launcher_from_a_plugin_is_found_by_its_name_and_an_unknown_one_is_refused_listing_the_registered(
    site, tmp_path
):
    install(site, "toy-launcher", "[ganstudy.launchers]\ntoyrun = toy_launch:TOY\n", "toy_launch", TOY)
    described = tmp_path / "site.yaml"
    described.write_text("name: toy\nlauncher: toyrun\nnode_cores: 8\n")
    toy = read_site(str(described), REPO)
    assert LAUNCHERS.get("toyrun").line(RankLayout(4, 8, 8, 0, 1)) == "toyrun --ranks 4 --per-node 8"
    assert (
        "toy_bank in the profile's default-resources, account in the site file, or TOY_BANK"
        in (scheduler_resources(toy, {}, {})[1][0][1])
    )
    assert scheduler_resources(toy, {}, {"TOY_BANK": "lab"}) == (
        {"toy_bank": "lab"},
        [("info", "site 'toy': every cluster job is submitted with account lab (TOY_BANK)")],
    )
    described.write_text("launcher: flux\n")
    with pytest.raises(
        GanstudyError,
        match=rf"site file {described}: launcher: unknown launcher 'flux'; registered launchers: "
        r"jsrun, mpiexec, srun, toyrun",
    ):
        read_site(str(described), REPO)


# A lab's training mode, declared as ganstudy's are: 3 pairs on up to one rank each, scored while it trains.
TOY_MODE = """
from ganstudy.train.mode_needs import TrainingMode

def three(setup, classes):
    return 3

TOY = TrainingMode("toy_train:train", pairs=three, pair_name="toy pairs", ranks="per_pair", scores_in_training=True)
"""


# A lab's mode with options of its own: a JSON schema of the set-up's mode_options.
OPTIONS_MODE = """
from ganstudy.train.mode_needs import TrainingMode

OPTIONS = {"type": "object", "properties": {"temperature": {"type": "number", "minimum": 0, "default": 1.0}}}
TOY = TrainingMode("toy_train:train", options=OPTIONS)
"""


def test_a_plugin_mode_s_options_are_checked_against_its_schema_and_reach_its_settings_with_defaults(site):
    install(site, "toy-options", "[ganstudy.modes]\ntoy_options = toy_options:TOY\n", "toy_options", OPTIONS_MODE)
    (site / "toy_train.py").write_text("def train(context):\n    return context.setup.mode_options\n")

    def study(**setup) -> dict:
        return validate_study_config({**copy.deepcopy(SHRUNKEN), "setups": {"toy": setup}}, SCHEMA)

    config = study(mode="toy_options", mode_options={"temprature": 2})
    assert part_problems(config) == [
        "setups.toy.mode_options: unknown key 'temprature' (did you mean 'temperature'?); allowed here: temperature "
        "(the options schema of training mode 'toy_options', toy_options:TOY (from toy-options 1.2))"
    ]
    config = study(mode="toy_options", mode_options={"temperature": -1})
    assert part_problems(config) == [
        "setups.toy.mode_options: 'temperature': -1 is less than the minimum of 0 (the options schema of training "
        "mode 'toy_options', toy_options:TOY (from toy-options 1.2))"
    ]
    # Valid options, and none given: the schema's defaults filled in; the mode reads them from its settings.
    for given, read in (({"temperature": 0.5}, {"temperature": 0.5}), ({}, {"temperature": 1.0})):
        config = study(mode="toy_options", mode_options=given)
        assert part_problems(config) == []
        settings = TrainingSettings.of(job_settings(config["setups"]["toy"]))
        assert settings.mode_options == read and settings.network_options == {}
    # ganstudy's own modes take none; a set-up without any keeps the settings it had before modes had options.
    config = study(mode="single", mode_options={"temperature": 0.5})
    assert part_problems(config) == [
        "setups.toy.mode_options: training mode 'single' takes no options, got ['temperature']; remove them"
    ]
    config = study(mode="single")
    assert part_problems(config) == [] and "mode_options" not in job_settings(config["setups"]["toy"])
    assert TrainingSettings.of(job_settings(config["setups"]["toy"])).mode_options == {}


@pytest.mark.workflow
def test_a_study_plans_its_training_jobs_with_a_plugins_launcher_and_mode(site, tmp_path, env):
    # One package with both parts (importlib.metadata reads "toy-mode-1.2" and "toy-launcher-1.2" as one "toy").
    points = "[ganstudy.launchers]\ntoyrun = toy_launch:TOY\n[ganstudy.modes]\ntoy_three = toy_mode:TOY\n"
    install(site, "toyparts", points, "toy_launch", TOY)
    (site / "toy_mode.py").write_text(TOY_MODE)
    (site / "toy_train.py").write_text("def train(context):\n    raise NotImplementedError\n")
    (tmp_path / "site.yaml").write_text("name: toy cluster\nlauncher: toyrun\nnode_cores: 4\n")
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))}
    setups = {**SHRUNKEN["setups"], "toy": {"mode": "toy_three", "iterations": 2, "trials": 1}}
    config = {**SHRUNKEN, "site": str(tmp_path / "site.yaml"), "compute": {"max_ranks": 2}, "setups": setups}
    done = snakemake(tmp_path, config, "-n", "-p", env=env)
    assert done.returncode == 0, done.stdout[-3000:]
    assert len(planned_jobs(done.stdout)) == 10  # 2 trials of 4 set-ups, 1 of grid_seq and of toy
    toy = [job for job in planned_jobs(done.stdout) if job["wildcards"].startswith("setup=toy,")]
    assert [job["Shell command"].split(" ganstudy")[0] for job in toy] == ["toyrun --ranks 2 --per-node 4"]
    shells = [job["Shell command"] for job in planned_jobs(done.stdout)]
    assert shells and all(
        line.startswith(
            ("toyrun --ranks 1 --per-node 4 ganstudy train", "toyrun --ranks 2 --per-node 4 ganstudy train")
        )
        for line in shells
    ), shells
    assert any(line.startswith("toyrun --ranks 2 ") for line in shells)
    assert "site 'toy cluster': no account for the scheduler (toy_bank" in done.stdout + done.stderr


def test_a_spec_file_is_rewritten_only_when_it_says_something_else_and_a_new_one_beside_old_results_is_dated_1970(
    tmp_path,
):
    said: list[str] = []
    spec, job = tmp_path / "specs" / "data.json", tmp_path / "jobs" / "s.json"
    files = {spec: {"seed": 1, "dataset": {"name": "digits"}}, job: {"iterations": 5}}
    refresh(files, made_before=True, log=said.append)
    # New beside results made before spec files existed: the spec is ancient (its stage is kept), a job file not.
    assert spec.stat().st_mtime == 0 and job.stat().st_mtime > 0 and said == []
    assert stale_files(files) == []
    # The order of keys is no change; a value is.
    assert not out_of_date(spec, {"dataset": {"name": "digits"}, "seed": 1})
    files[spec] = {"seed": 2, "dataset": {"name": "digits"}}
    assert stale_files(files) == [spec]
    refresh(files, made_before=True, log=said.append)
    assert said == [f"rewrote {spec}: the config has changed what it describes"] and spec.stat().st_mtime > 0
    assert json.loads(spec.read_text()) == {"dataset": {"name": "digits"}, "seed": 2}


def test_an_arguments_file_that_says_something_else_is_stale_until_written(tmp_path):
    said: list[str] = []
    files = ArgumentsFiles(tmp_path / "arguments", made_before=True)
    path = files.record("train/s/trial0", ["--trial", 0], kept=True)
    assert path == tmp_path / "arguments" / "train" / "s" / "trial0.args" and files.stale == set()
    files.write_all(said.append)
    # New beside results made before arguments files existed, for a kept job: ancient.
    assert path.read_text() == "--trial\n0\n" and path.stat().st_mtime == 0 and said == []
    files.record("train/s/trial0", ["--trial", 1])
    assert files.stale == {path}
    files.write_all(said.append)
    assert path.read_text() == "--trial\n1\n" and files.stale == set()
    assert said == [f"rewrote {path}: the config has changed the job's arguments"]
    # A job that is not kept gets a new file dated now.
    other = files.record("stats", ["--out", "x"])
    files.write_all(said.append)
    assert other.stat().st_mtime > 0


def test_an_arguments_file_of_a_study_whose_folder_lay_elsewhere_is_the_same_job_and_keeps_its_date(tmp_path):
    current = ["--spec", "/new/s/specs/evaluation.json", "--generator", "/new/s/runs/a/trial0/generator.pt"]
    current += ["--trial", 0]
    older = "--spec\nresults/s/specs/evaluation.json\n--generator\nresults/s/runs/a/trial0/generator.pt\n--trial\n0\n"
    files = ArgumentsFiles(tmp_path / "arguments", made_before=False, root="/new/s")
    path = files.path("evaluate/a/trial0")
    path.parent.mkdir(parents=True)
    path.write_text(older)
    os.utime(path, (1000, 1000))
    files.record("evaluate/a/trial0", current)
    assert files.stale == set()
    said: list[str] = []
    files.write_all(said.append)
    assert path.read_text().splitlines() == list(map(str, current)) and path.stat().st_mtime == 1000
    assert said == [
        f"rewrote {path} in the current form: it was written when the study's folder lay elsewhere, now at /new/s, "
        "nothing to redo"
    ]
    text = "".join(f"{line}\n" for line in current)
    # Another file, another trial, or paths under two other folders: another job.
    for other in (
        older.replace("trial0/generator", "trial1/generator"),
        older.replace("--trial\n0", "--trial\n1"),
        older.replace("results/s/specs", "scratch/s/specs"),
    ):
        assert not relocated(other, text, "/new/s"), other
    assert relocated(older, text, "/new/s") and not relocated(text, text.replace("/new/s", "/new/t"), "/new/s")


def test_a_job_record_naming_the_study_s_files_from_the_working_directory_is_the_same_job():
    current = {"seed": 1, "inputs": {"train": "data/train.npz", "classifier": "classifier/classifier.pt"}}
    older = {"seed": 1, "inputs": {"train": "results/s/data/train.npz", "classifier": "/a/s/classifier/classifier.pt"}}
    assert older_paths_named(older, current) == current
    # Another file of the study, or the user's weights at another path, are not renamed.
    other = {"seed": 1, "inputs": {"train": "results/s/data/test.npz", "classifier": "classifier/classifier.pt"}}
    assert older_paths_named(other, current) == other
    weights = {"inputs": {"train": "data/train.npz", "inception": "w/pt_inception.pth"}}
    assert older_paths_named({"inputs": {**weights["inputs"], "inception": "v/w/pt_inception.pth"}}, weights) != weights


def test_an_arguments_file_that_held_its_spec_s_settings_is_rewritten_and_keeps_its_date(tmp_path):
    said: list[str] = []
    evaluation, reference = tmp_path / "specs" / "evaluation.json", tmp_path / "specs" / "reference.json"
    specs = {evaluation: {"evaluation": {"samples": 100, "metrics": ("fid",)}, "seed": 3}}
    specs[reference] = {"fid_features": "logits"}
    files = ArgumentsFiles(tmp_path / "arguments", made_before=True, specs=specs)
    older = '--settings\n{"metrics":["fid"],"samples":100}\n--generator\ng.pt\n--seed\n3\n--trial\n0\n'
    path = files.path("evaluate/s/trial0")
    path.parent.mkdir(parents=True)
    path.write_text(older)
    os.utime(path, (1000, 1000))
    files.record("evaluate/s/trial0", ["--spec", evaluation, "--generator", "g.pt", "--trial", 0], kept=True)
    assert files.stale == set()
    files.write_all(said.append)
    assert path.read_text() == f"--spec\n{evaluation}\n--generator\ng.pt\n--trial\n0\n" and path.stat().st_mtime == 1000
    assert said == [f"rewrote {path} in the current form: its settings are in its spec file now, nothing to redo"]
    # A spec that holds the settings alone (the reference statistics' layer), for a step without a seed.
    layer = files.record("reference_statistics", ["--spec", reference, "--out", "r.npz"])
    layer.write_text('--settings\n{"fid_features":"logits"}\n--out\nr.npz\n')
    assert moved_to_spec(layer.read_text(), files.contents[layer], specs)
    # Another seed, another setting or another argument beside them: another job, which is redone.
    for changed in (
        older.replace("--seed\n3", "--seed\n4"),
        older.replace("100", "200"),
        older.replace("g.pt", "h.pt"),
    ):
        path.write_text(changed)
        files.record("evaluate/s/trial0", ["--spec", evaluation, "--generator", "g.pt", "--trial", 0])
        assert files.stale == {path}, changed
        files.stale.clear()


def test_a_results_folder_that_is_a_file_or_not_writable_is_named(tmp_path):
    assert results_dir_problem(str(tmp_path / "results"), str(tmp_path / "results" / "s")) is None
    (tmp_path / "file").write_text("")
    assert results_dir_problem(str(tmp_path / "file"), str(tmp_path / "file" / "s")) == (
        f"results_dir: {tmp_path / 'file'} is a file, not a folder: move it away or set results_dir to a folder"
    )
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.access(locked, os.W_OK):  # root writes anywhere
        return
    assert "is not writable for you" in results_dir_problem(str(locked / "r"), str(locked / "r" / "s"))


def test_the_data_s_classes_and_training_images_are_known_before_any_job_for_a_built_in_data_set(tmp_path):
    dataset = validate_study_config({}, SCHEMA)["dataset"]
    known = known_data(tmp_path, dataset)
    # The 1,797 digits less a test fraction of 0.2 rounded up: 1,797 - 360.
    assert (known.manifest, known.classes, known.training_images) == (None, 10, 1797 - math.ceil(0.2 * 1797))
    smote = known_data(tmp_path, {**dataset, "smote": {**dataset["smote"], "strategy": "balance"}})
    assert smote.training_images is None
    # A prepared split's manifest, made from this dataset section, says it instead.
    (tmp_path / "data").mkdir()
    manifest = {
        "settings": json.loads(as_json(dataset_settings(dataset))),
        "num_classes": 10,
        "files": {"train": {"images": 1234}},
    }
    (tmp_path / "data" / "manifest.json").write_text(json.dumps(manifest))
    assert known_data(tmp_path, dataset).training_images == 1234
    # One made from other settings is not this config's.
    (tmp_path / "data" / "manifest.json").write_text(json.dumps({**manifest, "settings": {"name": "mnist"}}))
    assert known_data(tmp_path, dataset).manifest is None
