"""Across nodes, through a real two-node Slurm (ci/slurm_nodes.py: two network namespaces, each a host
with its own name, address, slurmd and GPUs; one controller; the file system shared): a shrunken study's
MPI jobs placed on both nodes by srun give the one-rank bits, bind each node's GPUs by node-local rank,
and ask Slurm for what the nodes hold."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from conftest import REPO, TINY, assert_same_generators, planned_jobs, require_slurm
from ganstudy.parallel.world import gpu_indices
from ganstudy.report.placement import placement_problems

pytestmark = pytest.mark.workflow

SCRIPT = REPO / "ci" / "slurm_nodes.py"
GPUS_PER_NODE = 2
# Four ranks on two nodes of two GPUs (two ranks per node), and a grid of three ranks that leaves the
# second node half empty. (A 2x2 grid with one rank per node is the lost-node test's.)
STUDY = {
    **TINY,
    "study": "nodes",
    "setups": {
        "grid3": {
            **TINY["setups"]["grid"],
            "iterations": 2,
            "grid": {**TINY["setups"]["grid"]["grid"], "shape": "3x1"},
        },
        "per_class": {**TINY["setups"]["per_class"], "iterations": 2},
        # One iteration: four data-parallel ranks on this machine's 2 cores are the module's slowest runs (twice: on
        # the nodes and again as the reference), and one pass over the data crosses the nodes' all-reduce at every step.
        "dp": TINY["setups"]["dp"],
    },
    # Slurm's GPUs here are device files without a GPU: the ranks train on the CPU on purpose.
    "compute": {"max_ranks": 4, "device": "cpu", "train_minutes": 10},
}
RANKS = {"grid3": 3, "per_class": 4, "dp": 4}


def cluster_command(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *arguments], capture_output=True, text=True, timeout=300)


def namespaces_and_links() -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    return re.findall(r"ganstudy-gsnode\d", listed) + re.findall(r"^(gsbr0|gsv\d)\b", links, re.MULTILINE)


def cluster_daemons() -> list[str]:
    import psutil

    # process_iter's info is None for a process it cannot read (a zombie another test left, say).
    commands = (" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"]))
    return [command for command in commands if re.search(r"slurm-nodes|slurmd -N gsnode", command)]


@pytest.fixture(scope="module")
def nodes(slurm_daemons, env):
    """The two-node cluster for this module; its clients' environment (SLURM_CONF names it)."""
    if not slurm_daemons["available"]:
        require_slurm(slurm_daemons["why"])
    if os.geteuid() != 0 or shutil.which("ip") is None:
        require_slurm("the two-node Slurm needs root and iproute2 (network namespaces)")
    started = cluster_command("start")
    if started.returncode != 0:
        require_slurm(f"the two-node Slurm did not start: {started.stderr.strip()[-2000:]}")
    try:
        yield {**env, "SLURM_CONF": "/etc/slurm-nodes/slurm.conf"}
    finally:
        stopped = cluster_command("stop", started.stdout.strip())
        assert stopped.returncode == 0, stopped.stderr
        assert namespaces_and_links() == [] and cluster_daemons() == []


def study_command(folder: Path, study: dict, node_gpus: int, targets: list[str]) -> list[str]:
    """Snakemake on ``study``'s ``targets`` with --profile slurm-gpu and a site of two-core nodes of
    ``node_gpus`` GPUs."""
    site = {
        "name": "two namespaces",
        "launcher": "srun",
        "node_cores": os.cpu_count(),
        "node_gpus": node_gpus,
        "gpus_per_rank": 1,
    }
    (folder / "site.yaml").write_text(yaml.safe_dump(site))
    (folder / "study.yaml").write_text(yaml.safe_dump(study))
    return [
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(folder),
        "--configfile",
        str(folder / "study.yaml"),
        "--profile",
        str(REPO / "profiles" / "slurm-gpu"),
        "--config",
        f"site={folder / 'site.yaml'}",
        "--jobs",
        "2",
        "--latency-wait",
        "5",
        *targets,
    ]


def run_targets(study: dict, setups) -> list[str]:
    return [f"results/{study['study']}/runs/{setup}/trial0/run.json" for setup in setups]


def slurm_jobs(log: str, env: dict) -> dict[str, dict]:
    """Each training job's record as Slurm holds it (scontrol show job -d), by set-up."""
    jobs = {}
    for job_id in re.findall(r"has been submitted with SLURM jobid (\d+)", log):
        shown = subprocess.run(
            ["scontrol", "show", "job", "-d", job_id], capture_output=True, text=True, env=env, check=True
        ).stdout
        fields = dict(re.findall(r"(\S+?)=(\S*)", shown))
        setup = re.search(r"rule_train_wildcards_(\w+?)_\d+$", fields["Comment"])
        if setup:
            jobs[setup.group(1)] = {**fields, "per_node": re.findall(r"Nodes=(\S+) CPU_IDs=(\S+) Mem=(\d+)", shown)}
    return jobs


def hostnames(hostlist: str, env: dict) -> list[str]:
    return subprocess.run(
        ["scontrol", "show", "hostnames", hostlist], capture_output=True, text=True, env=env, check=True
    ).stdout.split()


@pytest.fixture(scope="module")
def study_on_two_nodes(nodes, tmp_path_factory):
    """STUDY's trainings on the two nodes (through the data, classifier and reference statistics they
    need): its folder and Snakemake's output."""
    folder = tmp_path_factory.mktemp("nodes")
    done = subprocess.run(
        study_command(folder, STUDY, GPUS_PER_NODE, run_targets(STUDY, RANKS)),
        capture_output=True,
        text=True,
        env=nodes,
        timeout=1500,
    )
    assert done.returncode == 0, training_logs(folder) + done.stderr[-5000:]
    return folder, done.stdout + done.stderr


def training_logs(folder: Path) -> str:
    """The end of every training job's log (srun's and the ranks' output): Snakemake's own output, which
    is all a failure shows in CI, names a failed job's log but its end is cut off there."""
    logs = sorted((folder / "results" / "nodes" / "logs" / "train").glob("*/*.log"))
    return "".join(f"--- {log.relative_to(folder)}:\n{log.read_text(errors='replace')[-2500:]}\n" for log in logs)


def run_record(folder: Path, setup: str) -> dict:
    return json.loads((folder / "results" / "nodes" / "runs" / setup / "trial0" / "run.json").read_text())


@pytest.mark.parametrize("setup", sorted(RANKS))
def test_ranks_run_on_both_nodes_and_give_the_one_rank_bits(setup, study_on_two_nodes, env, tmp_path):
    folder, log = study_on_two_nodes
    assert (
        f"srun -n {RANKS[setup]} --gpus-per-task=1 --kill-on-bad-exit=1 ganstudy train "
        f"@results/nodes/arguments/train/{setup}/trial0.args" in log
    )
    record = run_record(folder, setup)
    assert record["world_size"] == RANKS[setup]
    # srun's block distribution: two ranks on the first node, the rest on the second.
    assert record["hosts"] == ["gsnode1", "gsnode1", "gsnode2", "gsnode2"][: RANKS[setup]]
    # The same job file in this machine's own namespace: one rank (data parallelism: as many ranks as on
    # the nodes, since its sums' order follows the rank count; see tests/test_data_parallel_mpi.py).
    ranks = ["mpiexec", "-n", str(RANKS[setup])] if setup == "dp" else []
    done = subprocess.run(
        [*ranks, "ganstudy", "train", f"results/nodes/jobs/{setup}.json", "--trial", "0", "--out-dir", str(tmp_path)],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_generators(folder / "results" / "nodes" / "runs" / setup / "trial0", tmp_path)


@pytest.mark.parametrize("setup", sorted(RANKS))
def test_each_node_binds_its_own_gpus_by_node_local_rank(setup, study_on_two_nodes):
    folder, _ = study_on_two_nodes
    record = run_record(folder, setup)
    for host, rank in zip(record["hosts"], record["ranks"]):
        given = rank["scheduler"]
        visible = given["CUDA_VISIBLE_DEVICES"].split(",")
        # The device select_devices trains on when CUDA is there: node-local rank 0 gets its node's first GPU.
        device = visible[gpu_indices(rank["node_rank"], 1, len(visible))[0]]
        assert device == str(rank["node_rank"]) == given["SLURM_STEP_GPUS"], (host, rank)
    assert [rank["node_rank"] for rank in record["ranks"]] == [0, 1, 0, 1][: RANKS[setup]]
    # ganstudy placement finds nothing wrong but the CPU this test trains on on purpose.
    assert {problem.split(" trained on the CPU")[0] for problem in placement_problems(record)} == {
        f"rank {rank} on {host}" for rank, host in enumerate(record["hosts"])
    }


def test_slurm_gives_each_training_job_the_nodes_tasks_gpus_and_memory_it_asked_for(study_on_two_nodes, nodes):
    folder, log = study_on_two_nodes
    jobs = slurm_jobs(log, nodes)
    assert sorted(jobs) == sorted(RANKS)
    asked = {
        re.search(r"setup=(\w+)", job["wildcards"]).group(1): dict(re.findall(r"(\w+)=([^,]+)", job["resources"]))
        for job in planned_jobs(log)
    }
    for setup, job in jobs.items():
        tasks, memory = RANKS[setup], int(asked[setup]["mem_mb"])
        assert (job["NumNodes"], job["NumTasks"], job["JOB_GRES"], job["MinMemoryNode"]) == (
            "2",
            str(tasks),
            f"gpu:{tasks}",
            f"{memory}M",
        ), job
        # Per node as Slurm placed it (a line may name several nodes: gsnode[1-2]); the three-rank grid
        # leaves one core of the second node free.
        per_node = {
            node: (cpus, int(mem)) for nodes_, cpus, mem in job["per_node"] for node in hostnames(nodes_, nodes)
        }
        assert per_node == {"gsnode1": ("0-1", memory), "gsnode2": ("0-1" if tasks == 4 else "0", memory)}, job
        # And the GPUs on each node, as Slurm told the ranks there.
        record = run_record(folder, setup)
        on_node = {
            host: rank["scheduler"]["SLURM_GPUS_ON_NODE"] for host, rank in zip(record["hosts"], record["ranks"])
        }
        assert on_node == {"gsnode1": "2", "gsnode2": str(tasks - 2)}


# One rank per node (nodes of one GPU), a grid long enough to lose a node in the middle, checkpointed at
# every iteration, with a heartbeat that notices a lost rank within seconds. It joins the study above
# (same data, classifier and reference statistics), whose finished trainings must survive untouched.
HEARTBEAT_S = 10
# Slurm marks a silent node DOWN after SlurmdTimeout (ci/slurm_nodes.py: 20 s) and ends its jobs; this is
# that with room for a busy machine and Snakemake's status polls.
NODE_DOWN_S = 240
LOST = {
    **STUDY,
    # Enough iterations that the job still runs when the test cuts the node after its second checkpoint,
    # and no more: the retry trains the rest and the reference run all of them, on 2 cores shared with
    # the other test worker, where ranks that wait on each other spin (100 iterations took 780-910 s in CI).
    "setups": {
        "lost": {
            "mode": "grid",
            "iterations": 30,
            "hidden_units": 32,
            "checkpoint_period": 1,
            "grid": {
                "shape": "2x2",
                "fitness_sample_size": 50,
                "score_sample_size": 50,
                "heartbeat_timeout": HEARTBEAT_S,
            },
        }
    },
    "compute": {**STUDY["compute"], "max_ranks": 2},
}


class LostNodePhases(UserWarning):
    """Where the lost-node test's time went: CI's output shows only failures and warnings."""


class Phases:
    """Seconds from the start to each step of the lost-node test, for its failure messages and its line in
    the warnings summary (where CI's output shows it)."""

    def __init__(self, log: Path) -> None:
        self.start, self.marks = time.monotonic(), []
        self.log, self.attempts = log, [""]

    def follow(self) -> None:
        """Keeps each attempt's training log: a retried job starts the log afresh, and the first attempt's
        end (the heartbeat's verdict, or MPI's own error) is what a failure of this test needs to show."""
        now = text(self.log)
        if len(now) < len(self.attempts[-1]):
            self.attempts.append(now)
        else:
            self.attempts[-1] = now

    def logs(self) -> str:
        return "\n".join(
            f"training log, attempt {n}: ...{attempt[-3000:]}" for n, attempt in enumerate(self.attempts, 1)
        )

    def mark(self, name: str) -> None:
        self.marks.append(f"{name} at {time.monotonic() - self.start:.0f} s")

    def watch(self, output: Path, env: dict) -> Callable[[], None]:
        """A check to call while waiting: marks each new state of the study's Slurm jobs (every 2 s) and the
        first time Snakemake reports a failed job or its retry, so that the phases say where the time goes."""
        seen, last = set(), [0.0]

        def check() -> None:
            said = text(output)
            for line in ("Error in rule train", "Trying to restart job", "has been submitted with SLURM jobid"):
                count = said.count(line)
                if (line, count) not in seen and count:
                    seen.add((line, count))
                    self.mark(f"'{line}' x{count}")
            if time.monotonic() - last[0] >= 2:
                last[0] = time.monotonic()
                listed = subprocess.run(
                    ["squeue", "-h", "-o", "%i %T %r"], capture_output=True, text=True, env=env
                ).stdout
                for state in listed.strip().splitlines():
                    if state not in seen:
                        seen.add(state)
                        self.mark(f"squeue {state}")

        return check

    def __str__(self) -> str:
        return "; ".join(self.marks) or "no step reached"


def wait_until(
    predicate,
    study: subprocess.Popen,
    output: Path,
    timeout: float,
    phases: Phases,
    meanwhile: Callable[[], None] = lambda: None,
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        meanwhile()
        phases.follow()
        if study.poll() is not None:
            pytest.fail(f"Snakemake ended early ({phases}): {output.read_text()[-5000:]}\n{phases.logs()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out ({phases}); Snakemake says: {output.read_text()[-5000:]}\n{phases.logs()}")
        time.sleep(0.2)


def text(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file of the study's results, (modification time, content), but plan.json (every start of
    the workflow writes the plan of what it was asked to run, for `ganstudy status`), the site's compute
    options (site/compute.json: how the ranks compute on this site, rewritten when the site changes, as
    it does here from 2 GPUs per node to 1) and the jobs' arguments files (every start writes those its
    config gives: here those of the study-wide tables and figures name only the lost grid)."""
    return {
        str(path.relative_to(folder)): (path.stat().st_mtime_ns, path.read_bytes())
        for path in (folder / "results").rglob("*")
        if path.is_file() and path.name != "plan.json" and path.parent.name != "site" and "arguments" not in path.parts
    }


def test_a_lost_node_stops_the_job_by_heartbeat_and_the_retry_resumes_bit_identical(
    study_on_two_nodes, nodes, tmp_path, env
):
    folder, _ = study_on_two_nodes
    finished = snapshot(folder)
    run = folder / "results" / "nodes" / "runs" / "lost" / "trial0"
    checkpoints = folder / "results" / "nodes" / "checkpoints" / "lost" / "trial0"
    train_log = folder / "results" / "nodes" / "logs" / "train" / "lost" / "trial0.log"
    out, phases = tmp_path / "snakemake.out", Phases(train_log)
    with out.open("w") as output:
        study = subprocess.Popen(
            study_command(folder, LOST, 1, run_targets(LOST, ["lost"])),
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            env=nodes,
        )
        try:
            wait_until(lambda: len(list(checkpoints.glob("iter-*/COMPLETE"))) >= 2, study, out, 600, phases)
            phases.mark("2 checkpoints")
            cluster_command("fail", "gsnode2").check_returncode()
            phases.mark("gsnode2 failed")
            # The surviving rank (rank 0, on gsnode1) names the lost one and its host within the heartbeat timeout.
            wait_until(lambda: "stopped first" in text(train_log), study, out, HEARTBEAT_S * 3 + 60, phases)
            phases.mark("rank 0 stopped")
            assert "rank 1 (host gsnode2, cells " in text(train_log)
            assert not (run / "run.json").exists()
            # The node stays lost, as a failed node does, until Slurm gives it up (DOWN after SlurmdTimeout) and
            # with it the job. Back at once, its new slurmd knew nothing of the step, and srun waited for it
            # from 40 s to 11 minutes, by the race between Slurm's kill request and the node's return.
            wait_until(
                lambda: "Error in rule train" in text(out), study, out, NODE_DOWN_S, phases, phases.watch(out, nodes)
            )
            phases.mark("job failed")
            revived = cluster_command("revive", "gsnode2")
            phases.mark("gsnode2 back")
            assert revived.returncode == 0, f"{phases}: {revived.stderr}"
            wait_until(
                lambda: "resumed from the checkpoint" in text(train_log),
                study,
                out,
                900,
                phases,
                phases.watch(out, nodes),
            )
            phases.mark("retry resumed")
            assert study.wait(timeout=900) == 0, f"{phases}: {out.read_text()[-5000:]}"
            phases.mark("Snakemake done")
        finally:
            if study.poll() is None:
                study.kill()
                study.wait()
    warnings.warn(f"lost-node test: {phases}", LostNodePhases, stacklevel=1)
    assert "resumed from the checkpoint of iteration" in text(train_log), str(phases)
    assert not (folder / "results" / "nodes" / ".lock").exists()  # the study's lock went with the run
    assert "Trying to restart job" in out.read_text()  # Snakemake's retry, not Slurm's requeue
    assert run_record(folder, "lost")["hosts"] == ["gsnode1", "gsnode2"]
    # Nothing finished before the failure was rewritten or lost.
    after = snapshot(folder)
    assert {name: after.get(name) for name in finished} == finished
    # The resumed grid holds the bits of an uninterrupted run of its job file.
    done = subprocess.run(
        ["ganstudy", "train", "results/nodes/jobs/lost.json", "--trial", "0", "--out-dir", str(tmp_path / "whole")],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_generators(run, tmp_path / "whole")
