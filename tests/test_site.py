"""The site (what a node is) comes with the profile, not the study: a study leaves node hardware to it,
may override a key on purpose (the DAG warns, naming both values), and a missing or bad site file is
named before any job."""

from __future__ import annotations

import os
import re
import socket

import pytest
import yaml

from conftest import REPO, planned_jobs
from ganstudy.errors import GanstudyError
from ganstudy.plan.site import SITE_KEYS, read_site, resolve_node_cores, scheduler_resources, with_site
from test_workflow import SHRUNKEN, snakemake

SCHEMA = REPO / "workflow" / "schemas" / "site.schema.yaml"


def test_every_profile_carries_a_valid_site_and_names_it():
    for profile in ("local", "slurm", "slurm-gpu", "summit"):
        options = yaml.safe_load((REPO / "profiles" / profile / "config.v8+.yaml").read_text())
        assert options["config"] == [f"site=profiles/{profile}/site.yaml"]
        site = read_site(f"profiles/{profile}/site.yaml", REPO)
        assert set(SITE_KEYS) <= set(site) and (site["node_cores"] is None or site["node_cores"] >= 1)
    assert read_site("profiles/slurm-gpu/site.yaml", REPO)["node_gpus"] > 0
    assert read_site("profiles/slurm/site.yaml", REPO)["node_gpus"] == 0


def test_no_site_is_this_machine_without_gpus():
    site = read_site(None, REPO)
    assert site == {
        "name": "this machine",
        "launcher": "mpiexec",
        "node_cores": None,
        "node_gpus": 0,
        "gpus_per_rank": 1,
        "node_mem_mb": None,
        "modules": [],
        "account": None,
        "partition": None,
        "constraint": None,
    }
    # null cores: the planning machine's, named.
    assert resolve_node_cores({"node_cores": None}) == ({"node_cores": os.cpu_count()}, socket.gethostname())
    assert resolve_node_cores({"node_cores": 42}) == ({"node_cores": 42}, None)
    # The schema's defaults are what the site description documents.
    described = yaml.safe_load(SCHEMA.read_text())["properties"]
    assert set(described) == {"name", "launcher", *SITE_KEYS, "account", "partition", "constraint"}


def test_a_site_file_without_a_launcher_is_refused_naming_the_choices(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text("name: our gpu nodes\nnode_gpus: 4\n")
    with pytest.raises(
        GanstudyError,
        match=rf"site file {re.escape(str(site))} names no launcher: add how a training job starts its "
        r"ranks, `launcher: srun` \(Slurm\), `launcher: jsrun` \(LSF\) or `launcher: mpiexec`",
    ):
        read_site(str(site), REPO)


def test_a_missing_or_bad_site_file_is_named(tmp_path):
    with pytest.raises(
        GanstudyError,
        match=r"site file profiles/nowhere/site.yaml \(config key site, set by the profile\) is not a file",
    ):
        read_site("profiles/nowhere/site.yaml", REPO)
    bad = tmp_path / "site.yaml"
    bad.write_text("node_gpu: 4\nnode_cores: 0\n")
    with pytest.raises(GanstudyError) as error:
        read_site(str(bad), REPO)
    assert (
        f"site file {bad}" in str(error.value) and "node_gpu" in str(error.value) and "node_cores" in str(error.value)
    )
    assert f"site file {bad} names no launcher" in str(error.value)


def test_the_study_fills_what_it_leaves_null_from_the_site_and_its_overrides_are_listed():
    site = read_site("profiles/summit/site.yaml", REPO)
    compute = {
        "max_ranks": 6,
        "node_cores": None,
        "node_gpus": None,
        "gpus_per_rank": 2,
        "node_mem_mb": None,
        "modules": None,
    }
    merged, overrides = with_site(compute, site)
    assert (merged["node_cores"], merged["node_gpus"], merged["gpus_per_rank"], merged["max_ranks"]) == (42, 6, 2, 6)
    assert overrides == [
        "compute.gpus_per_rank: the study sets 2 where the site 'summit' says 1; the study's value is used (node "
        "hardware belongs in the site file, profiles/<name>/site.yaml: remove the key from the study unless the "
        "study needs it)"
    ]
    # A study value equal to the site's is no override.
    assert with_site({**compute, "gpus_per_rank": 1}, site)[1] == []


def _gpus(out: str, rule: str = "train") -> list[int]:
    """The GPUs each planned job of ``rule`` asks Slurm for (resource gpu)."""
    return [int(re.search(r"(?<![a-z_])gpu=(\d+)", job["resources"]).group(1)) for job in planned_jobs(out, rule)]


@pytest.mark.workflow
def test_one_study_asks_for_gpus_only_on_a_gpu_site_and_an_override_is_said(tmp_path, env):
    config = {**SHRUNKEN, "compute": {"max_ranks": 2}}
    cpu = snakemake(
        tmp_path,
        config,
        "-n",
        "--executor",
        "slurm",
        "--jobs",
        "4",
        "--config",
        "site=profiles/slurm/site.yaml",
        env=env,
    )
    assert cpu.returncode == 0, cpu.stderr[-3000:]
    assert "site 'slurm': " in cpu.stdout and set(_gpus(cpu.stdout)) == {0}
    # Scored on Inception: on GPU nodes each scoring job asks for a GPU and its 8 cores, and srun binds it.
    inception = {**config, "evaluation": {**SHRUNKEN["evaluation"], "extractor": "inception"}}
    inception["evaluation"]["inception_weights"] = "weights/inception.pth"
    gpu = snakemake(
        tmp_path,
        inception,
        "-n",
        "-p",
        "--executor",
        "slurm",
        "--jobs",
        "4",
        "--config",
        "site=profiles/slurm-gpu/site.yaml",
        env=env,
    )
    assert gpu.returncode == 0, gpu.stderr[-3000:]
    # Each job asks for a GPU per rank: one-rank set-ups 1, the 2-rank ones 2.
    assert "site 'slurm-gpu': " in gpu.stdout and set(_gpus(gpu.stdout)) == {1, 2}
    scoring = planned_jobs(gpu.stdout, "evaluate")
    assert scoring and set(_gpus(gpu.stdout, "evaluate")) == {1}
    for job in scoring:
        assert "cpus_per_task=8" in job["resources"], job
        command = job["Shell command"]
        srun = "srun -n 1 --gpus-per-task=1 --cpus-per-task=8 --kill-on-bad-exit=1"
        assert command.startswith(f"{srun} ganstudy evaluate @"), command
        # (--threads: what Snakemake grants the job, here capped by the dry-run's cores.)
        assert " --device cuda > " in command, command
    assert set(_gpus(cpu.stdout, "evaluate")) == {0}
    # A study that still carries another site's hardware runs, with a warning naming both values.
    old = {**config, "compute": {"max_ranks": 2, "node_gpus": 6, "node_cores": 42}}
    done = snakemake(
        tmp_path, old, "-n", "--executor", "slurm", "--jobs", "4", "--config", "site=profiles/slurm/site.yaml", env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout + done.stderr
    assert "compute.node_gpus: the study sets 6 where the site 'slurm' says 0; the study's value is used" in said
    assert set(_gpus(done.stdout)) == {1, 2}


def test_every_cluster_job_gets_the_account_and_partition_from_the_profile_the_site_or_the_environment():
    slurm, summit, local = (read_site(f"profiles/{name}/site.yaml", REPO) for name in ("slurm", "summit", "local"))
    resources, notices = scheduler_resources(slurm, {"runtime": "30"}, {})
    assert resources == {}
    assert notices == [
        (
            "warning",
            "site 'slurm': no account for the scheduler (slurm_account in the profile's default-resources, account "
            "in the site file, or SBATCH_ACCOUNT / SLURM_ACCOUNT in the environment): Slurm charges your default "
            "account, and a centre without one refuses every job",
        ),
        (
            "warning",
            "site 'slurm': no partition for the scheduler (slurm_partition in the profile's default-resources, "
            "partition in the site file, or SBATCH_PARTITION / SLURM_PARTITION in the environment): every job waits "
            "in the cluster's default partition, whose nodes may not be the site's",
        ),
    ]
    # The profile wins over the site file, which wins over the environment; each source is named.
    environ = {"SBATCH_ACCOUNT": "from-env", "SBATCH_PARTITION": "env-partition"}
    resources, notices = scheduler_resources({**slurm, "partition": "gpu"}, {"slurm_account": "abc123"}, environ)
    assert resources == {"slurm_account": "abc123", "slurm_partition": "gpu"}
    assert notices == [
        (
            "info",
            "site 'slurm': every cluster job is submitted with account abc123 (slurm_account in the profile), "
            "partition gpu (partition in the site file)",
        )
    ]
    assert scheduler_resources(slurm, {}, environ)[0] == {
        "slurm_account": "from-env",
        "slurm_partition": "env-partition",
    }
    # The summit profile's own default: an empty project, quoted as Snakemake passes it on, and queue batch.
    resources, notices = scheduler_resources(summit, {"lsf_project": "''", "lsf_queue": "batch"}, {})
    assert resources == {"lsf_queue": "batch"}
    assert [level for level, _ in notices] == ["info", "warning"]
    # In LSF's words: a queue and a project, not a partition and an account.
    assert notices[0][1] == "site 'summit': every cluster job is submitted with queue batch (lsf_queue in the profile)"
    assert notices[1][1].startswith("site 'summit': no project for the scheduler (lsf_project")
    assert (
        "lsf_project in the profile's default-resources, account in the site file, or LSB_DEFAULTPROJECT"
        in (notices[1][1])
    )
    resources, _ = scheduler_resources(summit, {"lsf_project": "''"}, {"LSB_DEFAULTPROJECT": "GEN150"})
    assert resources == {"lsf_project": "GEN150"}
    assert scheduler_resources(local, {}, {}) == ({}, [])


def test_a_site_constraint_pins_every_cluster_job_to_one_node_kind():
    # Issue 82: trials on other CPU kinds train other bits; a site pins its jobs to one kind. No
    # constraint is no warning (any node is a choice), unlike a missing account or partition.
    slurm, summit = (read_site(f"profiles/{name}/site.yaml", REPO) for name in ("slurm", "summit"))
    given = {"slurm_account": "abc", "slurm_partition": "cpu"}
    assert scheduler_resources(slurm, given, {}) == (
        given,
        [
            (
                "info",
                "site 'slurm': every cluster job is submitted with account abc (slurm_account in the profile), "
                "partition cpu (slurm_partition in the profile)",
            )
        ],
    )
    resources, notices = scheduler_resources({**slurm, "constraint": "zen4"}, given, {})
    assert resources == {**given, "constraint": "zen4"}
    assert notices[0][1].endswith("constraint zen4 (constraint in the site file)")
    assert scheduler_resources(slurm, given, {"SBATCH_CONSTRAINT": "icelake"})[0]["constraint"] == "icelake"
    # The summit profile's empty lsf_select (as Snakemake passes it on) leaves the site's constraint.
    resources, _ = scheduler_resources(
        {**summit, "constraint": "model==EPYC"}, {"lsf_project": "GEN150", "lsf_select": "''"}, {}
    )
    assert resources == {"lsf_project": "GEN150", "lsf_select": "model==EPYC"}
