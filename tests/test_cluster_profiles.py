"""The cluster profiles: dry-runs as a user types them, the Summit profile against recording LSF
commands that really run the jobs, and a shrunken study through a real single-node Slurm."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO, SCHEMA, TINY, planned_jobs, require_slurm, shown_status, with_user_data
from ganstudy.config.validate import load_study_config

pytestmark = pytest.mark.workflow

STUDIES = sorted((REPO / "config" / "studies").glob("*.yaml"))
# ci/slurm.py's partition besides the default one, and its node's feature.
OTHER_PARTITION = "gpu"
FEATURE = "ganstudy-ci"


def dry_run(profile: str, config: Path | None, env: dict, results: Path, without: str | None = None) -> str:
    """Snakemake's plan of ``config`` (None: the default study) under ``profile``, its study in ``results`` (the
    checkout's own results/ may hold the user's study, finished or running); with ``without``, a package that
    planning must not import (python -X importtime lists what it did)."""
    # --forceall: every job, whatever the study's folder holds.
    command = ["snakemake", "--profile", profile, "-n", "--forceall"] + (
        ["--configfile", str(config)] if config else []
    )
    command += ["--config", f"results_dir={results}"]
    done = subprocess.run(
        command,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "PYTHONPROFILEIMPORTTIME": "1"} if without else env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # Snakemake's default disk_mb (input.size_mb, a coroutine) warned "coroutine ... was never awaited": the
    # profiles set it.
    assert "RuntimeWarning" not in done.stderr, done.stderr[-3000:]
    if without:
        assert not re.search(rf"^import time:.*\|\s+{re.escape(without)}$", done.stderr, re.MULTILINE), (
            f"the plan imported {without}"
        )
        assert re.search(r"^import time:.*\|\s+ganstudy\.models$", done.stderr, re.MULTILINE)  # it did list the imports
    return done.stdout + done.stderr


def _rule_text() -> str:
    return "".join(path.read_text() for path in sorted((REPO / "workflow" / "rules").glob("*.smk")))


@pytest.mark.parametrize("profile", ["summit", "slurm", "slurm-gpu", "local"])
def test_each_profile_plans_the_default_study_by_name_on_its_site(profile, env, tmp_path):
    # By name, from the repository root, as README says (the root links each name to profiles/<name>).
    out = dry_run(profile, None, env, tmp_path)
    # The study names no hardware: the site does. Summit's and slurm-gpu's nodes have GPUs (a GPU per
    # rank, bound by jsrun or srun); the slurm site's are CPU nodes, whose jobs ask for no GPU. Its
    # compute.max_ranks is 1 (a laptop packs its one-core jobs side by side): one rank per job.
    launcher = {
        "summit": "jsrun -n 1 -r 6 -a 1 -c 7 -g 1 -b packed:7",
        "slurm": "srun -n 1 --kill-on-bad-exit=1",
        "slurm-gpu": "srun -n 1 --gpus-per-task=1 --cpus-per-task=8 --kill-on-bad-exit=1",
        "local": "mpiexec -n 1",
    }[profile]
    assert f"{launcher} ganstudy train @{tmp_path}/digits_grid/arguments/train/grid2x2/trial0.args" in out
    site = {"summit": "summit", "slurm": "slurm", "slurm-gpu": "slurm-gpu", "local": "this machine"}[profile]
    assert f"site '{site}': " in out
    # Said once, by the plan: no account for a cluster's scheduler (the tests' environment sets none); the
    # cores a null node_cores stands for, and whose.
    account = "project" if profile == "summit" else "account"  # in the scheduler's words (LSF: bsub -P)
    assert out.count(f"no {account} for the scheduler") == (0 if profile == "local" else 1), out[-3000:]
    if profile in ("slurm", "local"):
        assert f"cores (node_cores null: those of {socket.gethostname()}, where Snakemake runs)" in out
    # What goes to the scheduler: the jobs of every rule that is not declared `localrule: True` in the rule
    # files (nor `all`, which runs nothing), counted from Snakemake's own job stats.
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", out.split("Job stats:")[1].split("\n\n")[0], re.MULTILINE))
    declared = r"^(?:rule|checkpoint) (\w+):\n(?:    .*\n)*?    localrule: True$"
    local = set(re.findall(declared, _rule_text(), re.MULTILINE))
    submitted = sum(int(count) for rule, count in stats.items() if rule not in local | {"all", "total"})
    assert submitted == 35 or profile == "local", stats  # prepare, classifier, reference: 3; train, evaluate: 16 each
    said = f"To the scheduler: {submitted} of these {stats['total']} jobs. Where Snakemake runs"
    assert (said in out) == (profile != "local"), out[-3000:]
    # Where a job's logs go, the scheduler's own included, is in the plan.
    scheduler_logs = {"summit": "logs/lsf under the working directory", "local": None}.get(
        profile, ".snakemake/slurm_logs/rule_<rule>/<wildcards>/<job id>.log under the working directory"
    )
    assert (f"Logs: each job's own output in {tmp_path}/digits_grid/logs/" in out) == (profile != "local"), out[-3000:]
    assert scheduler_logs is None or scheduler_logs in out, out[-3000:]
    assert out.count("leaves node_cores null") == (1 if profile == "slurm" else 0)
    jobs = _jobs(out, "grid2x2")
    gpus = {"summit": 1, "slurm": 0, "slurm-gpu": 1}.get(profile)
    if profile != "local":  # the local executor prints no resources
        assert jobs and all("tasks=1," in j and re.search(rf"\bgpu={gpus}\b", j) for j in jobs)
        # A GPU rank's share of its node's cores (Summit 42 / 6, slurm-gpu 32 / 4); one on CPU nodes.
        cores = {"summit": 7, "slurm": 1, "slurm-gpu": 8}[profile]
        assert all(f"cpus_per_task={cores}," in j for j in jobs), jobs[0]
        # The Slurm plugin's own resources on the Slurm sites only: Summit's plan carries none.
        slurm_only = ("tasks_per_gpu=0", "slurm_extra=--signal=USR1@300")
        assert all(all((key in j) == profile.startswith("slurm") for key in slurm_only) for j in jobs), jobs[0]
        # One rank: no mpi resource (Snakemake's Slurm plugin refuses an MPI job of one task), launched all the same.
        assert all(", mpi=, " in j for j in jobs)
    if profile == "slurm":
        assert "--gpus-per-task" not in out


def test_a_profile_that_still_names_the_launcher_as_a_resource_is_stopped_with_where_it_goes_now(env):
    done = subprocess.run(
        ["snakemake", "--profile", "slurm", "-n", "--forceall", "--set-resources", "train:mpi=srun"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "the profile sets `set-resources: train: mpi:`: the launcher is now the site's key `launcher:`" in out, out[
        -2000:
    ]


def test_no_slurm_profile_submits_job_arrays():
    # With the Slurm plugin pair we pin, arrays can hang a run or train the wrong trial (profiles/README.md).
    for profile in ("slurm", "slurm-gpu"):
        settings = yaml.safe_load((REPO / "profiles" / profile / "config.v8+.yaml").read_text())
        assert not {"slurm-array-jobs", "slurm-array-limit"} & set(settings), (
            f"{profile}: see profiles/README.md, No job arrays"
        )


def test_no_embedded_study_describes_node_hardware():
    # Node hardware is the site's; a study may override gpus_per_rank on purpose (Lupo Pasini et al.'s layout).
    for study in [REPO / "config" / "config.yaml", *STUDIES]:
        compute = (yaml.safe_load(study.read_text()) or {}).get("compute", {})
        assert not {"node_cores", "node_gpus", "node_mem_mb", "modules"} & set(compute), study.name


# Summit's launch geometry where the studies' layouts differ: (set-up, number of jobs if checked, what every
# job of it asks for, its launch line).
SUMMIT_GEOMETRY = {
    # 324 ranks, 6 per node with a GPU each -> 54 whole nodes.
    "lipizzaner_mnist_4lp": [
        ("grid18x18", 8, "nodes=54,", "jsrun -n 324 -r 6 -a 1 -c 7 -g 1 -b packed:7 ganstudy train")
    ],
    # The same 324 cells on one node: 6 ranks of 54 cells, a GPU each.
    "thesis_18x18_one_node": [
        ("grid18x18", 8, "nodes=1,", "jsrun -n 6 -r 6 -a 1 -c 7 -g 1 -b packed:7 ganstudy train")
    ],
    # Seed 001's layout: two GPUs per rank -> 3 ranks of 14 cores per node; 100 ranks -> 34 nodes.
    "dcgan_cifar100": [
        ("per_class", None, "nodes=34,", "jsrun -n 100 -r 3 -a 1 -c 14 -g 2 -b packed:14 ganstudy train"),
        ("dcgan", None, "nodes=1,", "jsrun -n 1 "),
    ],
}


@pytest.mark.parametrize("study", STUDIES, ids=lambda p: p.stem)
def test_the_cluster_profiles_plan_every_study(study, env, tmp_path):
    config = yaml.safe_load(study.read_text())
    # A sweep's set-ups as the study expands them: one per combination, each with the study's trials.
    expanded = load_study_config(study, SCHEMA)
    runs = sum(setup.get("trials") or expanded["trials"] for setup in expanded["setups"].values())
    # Summit's plan only where its launch geometry is checked: the rest of the plan is the profile's no more
    # than slurm's (each plan is seconds of the suite).
    for profile in ("summit", "slurm") if study.stem in SUMMIT_GEOMETRY else ("slurm",):
        # Every Snakemake start plans the study (a cluster job step too): torch, seconds to import, is left to the jobs.
        results = tmp_path / profile / "results"
        out = dry_run(
            profile,
            with_user_data(study, tmp_path / profile),
            env,
            results,
            without="torch" if profile == "slurm" else None,
        )
        assert re.search(rf"^train\s+{runs}$", out, re.MULTILINE)
        if config["dataset"].get("smote", {}).get("strategy", "none") != "none":
            assert re.search(r"^smote_samples\s+1$", out, re.MULTILINE)
        # The preparing job asks for the memory the study sets (3DGAN's showers: 40 GB), else 2 GB.
        wanted = config.get("compute", {}).get("prepare_mem_mb", 2000)
        job = out.split("rule prepare_dataset:")[1].split("\n\n")[0]
        assert f"mem_mb={wanted}," in job, job
        # Every job reads its arguments from a file (@FILE): its shell line stays short whatever the number of
        # runs and the names of the set-ups (measured with the study's folder at results/, as a user's is).
        commands = [
            line.removeprefix("Shell command: ").replace(str(results), "results")
            for line in out.splitlines()
            if line.startswith("Shell command: ")
        ]
        long = [command for command in commands if len(command) >= 300]
        assert not long, long[0]
        geometry = SUMMIT_GEOMETRY.get(study.stem, []) if profile == "summit" else []
        for setup, count, nodes, launch in geometry:
            jobs = _jobs(out, setup)
            assert jobs and (count is None or len(jobs) == count), setup
            assert all(nodes in j and launch in j for j in jobs), jobs[0]


def _jobs(out: str, setup: str) -> list[str]:
    """Each training job of ``setup``: its resources and shell command."""
    return [
        f"{job.get('resources', '')}\n{job.get('Shell command', '')}"
        for job in planned_jobs(out)
        if job["wildcards"].startswith(f"setup={setup},")
    ]


def test_summit_profile_submits_whole_node_jobs_to_lsf_and_launches_ranks_with_jsrun(tmp_path, env):
    fake = tmp_path / "lsf"
    fake.mkdir()
    lsf_env = {**env, "PATH": f"{REPO / 'tests' / 'fake_lsf'}{os.pathsep}{env['PATH']}", "FAKE_LSF_DIR": str(fake)}
    # One set-up of two ranks: the fake jsrun starts them with mpiexec, as a local run does (the real Slurm test
    # below trains every mode under its launcher). One thread each on this machine, not a Summit rank's 7 cores.
    study = {**TINY, "setups": {"dp": TINY["setups"]["dp"]}, "compute": {**TINY["compute"], "threads_per_job": 1}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    command = [
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "study.yaml"),
        "--profile",
        str(REPO / "profiles" / "summit"),
        "--default-resources",
        "lsf_project=GEN150",
        "lsf_queue=batch",
        "lsf_alloc_flags='gpumps smt4'",
        # One node kind for every job (a site's constraint): bsub -R "select[...]".
        "lsf_select='model==POWER9'",
        "nodes=1",
        "runtime=30",
        "wall_warning_minutes=0",
        "--jobs",
        "2",
        # The fake LSF answers at once: asked every 2 s, not the profile's 10, the test waits less on its polls.
        "--seconds-between-status-checks",
        "2",
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=lsf_env, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    submitted = {}
    for job in (fake / "jobs").iterdir():
        args = (job / "args").read_text().splitlines()
        submitted[args[args.index("-J") + 1] + "/" + job.name] = args
    rules = sorted(name.split("/")[0].split(".")[0] for name in submitted)
    # Light rules run on the login node; the rest are LSF jobs.
    assert rules == ["evaluate", "prepare_dataset", "reference_statistics", "train", "train_classifier"]
    train = [args for name, args in submitted.items() if name.startswith("train.")]
    # Each job is named by its rule and wildcards (set-up, trial): bjobs and the log's name say what it trains.
    assert [args[1] for args in train] == ["train.dp.0"]
    for args in train:
        assert args[2:6] == ["-nnodes", "1", "-W", "2:00"] and f"logs/lsf/{args[1]}.%J.out" in args
        assert args[args.index("-P") + 1] == "GEN150" and args[args.index("-q") + 1] == "batch"
        assert args[args.index("-alloc_flags") + 1] == "gpumps smt4"
        assert args[args.index("-R") + 1] == "select[model==POWER9]"
        # LSF warns the job with SIGUSR1 compute.wall_warning_minutes before its wall time.
        assert args[args.index("-wa") + 1] == "USR1" and args[args.index("-wt") + 1] == "5"
    assert not any("-wa" in args for name, args in submitted.items() if not name.startswith("train."))
    jsrun = (fake / "jsrun.log").read_text().splitlines()
    # Each job's arguments file: results/tiny/arguments/train/<set-up>/trial0.args.
    assert [Path(line.split(" ganstudy train @")[1].split()[0]).parent.name for line in jsrun] == ["dp"]
    assert all(line.startswith("jsrun -n 2 -r 6 -a 1 -c 7 -g 1 -b packed:7 ganstudy train") for line in jsrun)
    record = json.loads((tmp_path / "results" / "tiny" / "runs" / "dp" / "trial0" / "run.json").read_text())
    assert record["world_size"] == 2


def test_lsf_status_maps_bjobs_states(tmp_path, env, monkeypatch):
    from ganstudy.plan.lsf import status

    jobs = tmp_path / "jobs"
    for job, rc in (("1", None), ("2", "0"), ("3", "1")):
        (jobs / job).mkdir(parents=True)
        if rc is not None:
            (jobs / job / "rc").write_text(rc)
    monkeypatch.setenv("FAKE_LSF_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", f"{REPO / 'tests' / 'fake_lsf'}{os.pathsep}{os.environ['PATH']}")
    assert [status(job) for job in ("1", "2", "3", "99")] == ["running", "success", "failed", "failed"]


@pytest.fixture()
def slurm(slurm_daemons):
    if not slurm_daemons["available"]:
        require_slurm(slurm_daemons["why"])


def slurm_study(tmp_path: Path, env: dict, compute: dict, setups: dict, *extra: str) -> str:
    """Run TINY with these set-ups instead of its own through the real Slurm, with these compute settings and
    ``extra`` command-line arguments; Snakemake's output."""
    config = {
        **TINY,
        "setups": setups,
        "compute": {**TINY["compute"], "node_cores": os.cpu_count(), "train_minutes": 10, **compute},
    }
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    command = [
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "study.yaml"),
        "--profile",
        str(REPO / "profiles" / "slurm"),
        "--jobs",
        "2",
        *extra,
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout + done.stderr


def slurm_job(job: str) -> dict[str, str]:
    """``scontrol show job``'s fields of a job (ci/slurm.py keeps finished jobs for an hour)."""
    shown = subprocess.run(["scontrol", "--oneliner", "show", "job", job], capture_output=True, text=True, check=True)
    return dict(field.split("=", 1) for field in shown.stdout.split() if "=" in field)


def failed_jobs(log: str) -> str:
    """What Snakemake printed of each failed job (its error and, with show-failed-logs, its Slurm log)."""
    blocks = [log[start.start() : start.start() + 3000] for start in re.finditer(r"^Error in rule ", log, re.MULTILINE)]
    return "\n---\n".join(blocks) or f"no job failed; the end of Snakemake's output:\n{log[-3000:]}"


def test_a_shrunken_study_runs_through_slurm_on_gpu_nodes_one_gpu_per_rank(slurm, tmp_path, env):
    # ci/slurm.py's node advertises 4 GPUs without devices: Slurm grants and binds them, torch sees none, so the
    # study trains on the CPU on purpose (device cpu); device auto would stop there, naming what Slurm gave.
    # (A CPU node's srun line, without --gpus-per-task, is checked by the dry-runs.)
    # TINY's data-parallel set-up of 2 ranks and one of a single rank: Snakemake's Slurm plugin refuses an MPI job
    # of one task, so that job carries no mpi resource and still starts with srun, its GPU bound. (The grid and
    # per-class modes start under srun with their GPUs bound in tests/test_cross_node.py, across two nodes.)
    setups = {"dp": TINY["setups"]["dp"], "single": {"mode": "single", "iterations": 1, "hidden_units": 32}}
    # --config replaces the profile's config list, its site included: each job's own Snakemake must still get
    # the profile's site (srun and the GPUs below), which the plan passes on with --config.
    # The account and partition from variables that sbatch itself does not read: only the plan's -A and -p
    # can put the jobs there (ci/slurm.py's second partition, not the default).
    # The node kind too (issue 82: a site's constraint, here from the environment): sbatch -C.
    charged = {
        **env,
        "SLURM_ACCOUNT": "ganstudy-ci",
        "SLURM_PARTITION": OTHER_PARTITION,
        "SBATCH_CONSTRAINT": FEATURE,
    }
    log = slurm_study(tmp_path, charged, {"node_gpus": 2, "device": "cpu"}, setups, "--config", "trials=1")
    assert "site=profiles/slurm/site.yaml: the profile's" in log
    assert (
        "every cluster job is submitted with account ganstudy-ci (SLURM_ACCOUNT), partition gpu (SLURM_PARTITION), "
        f"constraint {FEATURE} (SBATCH_CONSTRAINT)"
    ) in log
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", log)
    # prepare, classifier, reference statistics, 2 trainings, 2 evaluations
    assert len(submitted) == 7, failed_jobs(log)
    # Trained on the CPU: one thread per rank, as on a CPU site (the dry-runs check a GPU rank's share of cores).
    threads, cores = 1, ""
    for setup, ranks in (("dp", 2), ("single", 1)):
        assert (
            f"srun -n {ranks} --gpus-per-task=1{cores} --kill-on-bad-exit=1 ganstudy train "
            f"@results/tiny/arguments/train/{setup}/trial0.args" in log
        )
        record = json.loads((tmp_path / "results" / "tiny" / "runs" / setup / "trial0" / "run.json").read_text())
        assert record["world_size"] == ranks
        assert len(record["ranks"]) == ranks and all(rank["rss_mb"] > 100 for rank in record["ranks"])
        given = [rank["scheduler"] for rank in record["ranks"]]
        # Slurm granted the job its GPUs and bound one to each rank, a different one per rank, visible to CUDA.
        bound = [rank["SLURM_STEP_GPUS"] for rank in given]
        assert all("," not in gpu for gpu in bound) and len(set(bound)) == ranks, given
        assert all(rank["CUDA_VISIBLE_DEVICES"] == rank["SLURM_STEP_GPUS"] for rank in given), given
        # The run names the Slurm job that trained it, one that Snakemake submitted.
        assert record["scheduler_job"].removeprefix("Slurm job ") in submitted, record["scheduler_job"]
    assert (tmp_path / "results" / "tiny" / "tables" / "pvalues_fid.md").is_file()
    # What Slurm gave a training and a scoring job is what the plan printed for them.
    for rule, wildcards in (("train", "setup=dp, trial=0"), ("evaluate", "setup=dp, trial=0")):
        planned = next(job for job in planned_jobs(log, rule) if job["wildcards"] == wildcards)
        resources = dict(item.split("=", 1) for item in planned["resources"].split(", "))
        given = slurm_job(re.search(rf"Job {planned['jobid']} has been submitted with SLURM jobid (\d+)", log)[1])
        assert (given["Account"], given["Partition"]) == ("ganstudy-ci", OTHER_PARTITION), given
        assert (resources["slurm_account"], resources["slurm_partition"]) == ("ganstudy-ci", OTHER_PARTITION)
        assert resources["constraint"] == given["Features"] == FEATURE, given
        assert given["MinMemoryNode"] == f"{resources['mem_mb']}M", (given, resources)
        # sbatch --gpus: the job's TRES per job (TRES itself lists gres only with accounting).
        gpus = re.search(r"gres:gpu:(\d+)", given.get("TresPerJob", ""))
        if rule == "train":
            assert (given["NumTasks"], given["CPUs/Task"]) == (resources["tasks"], resources["cpus_per_task"]), given
            assert resources["cpus_per_task"] == str(threads) and gpus and gpus[1] == resources["gpu"] == "2", given
        else:
            assert not gpus, given
    # ganstudy status links each trial to its Slurm job.
    shown = shown_status(tmp_path / "results", "tiny", env)
    rows = [line for line in shown.splitlines() if " done " in line]
    assert len(rows) == 2 and all(re.search(r"  Slurm job \d+", row) for row in rows), shown
