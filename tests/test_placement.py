"""``ganstudy placement`` on run records written by hand: a good layout across two nodes passes, and each
wrong one (MPI's node grouping broken, two ranks on one GPU, GPUs given but the CPU used) is named."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ganstudy.errors import GanstudyError
from ganstudy.report.placement import placement_problems, placement_report


def record(hosts: list[str], node_ranks: list[int], gpus: list[str], devices: str = "NVIDIA H100") -> dict:
    return {
        "hosts": hosts,
        "ranks": [
            {"node_rank": n, "scheduler": {"CUDA_VISIBLE_DEVICES": g} if g else {}} for n, g in zip(node_ranks, gpus)
        ],
        "device_names": [[devices] for _ in hosts],
        "gpus_per_rank": 1,
    }


GOOD = record(["a", "a", "b", "b"], [0, 1, 0, 1], ["0", "1", "0", "1"])


def test_ranks_bound_one_gpu_each_on_two_nodes_have_no_problem():
    assert placement_problems(GOOD) == []
    # Unbound ranks that see all of their node's GPUs pick theirs by node rank: no problem either.
    assert placement_problems(record(["a", "a", "b", "b"], [0, 1, 0, 1], ["0,1"] * 4)) == []


def test_ranks_of_one_host_that_mpi_did_not_group_are_named_with_their_shared_gpu():
    problems = placement_problems(record(["a", "a", "b"], [0, 0, 0], ["0,1", "0,1", "0,1"]))
    assert problems == [
        "host a: ranks [0, 1] have node ranks [0, 0], not 0..1: MPI does not group them as one node, so they may "
        "pick the same GPU",
        "host a: ranks [0, 1] all train on GPU 0",
    ]


def test_a_rank_on_the_cpu_despite_its_gpus_is_named():
    problems = placement_problems(record(["a", "b"], [0, 0], ["0", ""], devices="cpu"))
    assert problems == [
        "rank 0 on a trained on the CPU though the scheduler gave it GPU(s) 0 (compute.device: cpu, or torch without "
        "CUDA)"
    ]


def write_run(study: Path, setup: str, content: dict) -> None:
    folder = study / "runs" / setup / "trial0"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps(content))


def test_the_command_lists_every_rank_and_fails_naming_the_problems(tmp_path, env):
    study = tmp_path / "results" / "s"
    write_run(study, "good", GOOD)
    text, count = placement_report(study)
    assert count == 0
    assert text.splitlines()[0] == "runs/good/trial0: 4 ranks on 2 host(s) (a, b)"
    assert [line.split()[:4] for line in text.splitlines()[2:]] == [
        ["0", "a", "0", "0"],
        ["1", "a", "1", "1"],
        ["2", "b", "0", "0"],
        ["3", "b", "1", "1"],
    ]
    write_run(study, "shared", record(["a", "a"], [0, 0], ["0", "0"]))
    done = subprocess.run(["ganstudy", "placement", "s"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert done.returncode != 0
    assert "problem: host a: ranks [0, 1] all train on GPU 0" in done.stdout
    assert "ganstudy placement: 2 problem(s) with where ranks ran" in done.stderr


def test_a_study_without_finished_runs_says_so(tmp_path):
    with pytest.raises(GanstudyError, match="no finished run under .*runs: run the study first"):
        placement_report(tmp_path)
