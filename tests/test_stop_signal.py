"""The scheduler's end-of-wall-time signal: SIGTERM (Slurm at the limit) or SIGUSR1 (the early warning asked
for by ``--signal`` / ``bsub -wa``) sent to every rank of a running training job of each mode makes it
write a checkpoint at the next iteration, although no periodic one was due, and exit non-zero; the rerun
resumes from it to the same bits as an uninterrupted run."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import psutil
import pytest

from conftest import SCHEMA, train_command
from ganstudy.config.validate import validate_study_config
from ganstudy.parallel.stop import STOPPED_EXIT_CODE
from jobs import start_job, wait_for
from test_grid_mpi import command as grid_command
from test_grid_mpi import settings as grid_settings
from test_per_class_mpi import assert_same_generators

pytestmark = pytest.mark.mpi

ITERATIONS = 4
# A periodic checkpoint is never due in these runs: the one found after the signal is the signal's.
NEVER = 1000
# In-training FID every 2 iterations: scoring must not change the bits either, and the resumed curve is the same.
PAIR = {
    "iterations": ITERATIONS,
    "latent_dim": 16,
    "batch_size": 64,
    "checkpoint_period": NEVER,
    "score_period": 2,
    "score_samples": 200,
}
SETUPS = {
    "single": (1, {**PAIR, "mode": "single", "network": "perceptron4", "hidden_units": 32}),
    "conditional": (1, {**PAIR, "mode": "conditional", "network": "dccgan"}),
    "per_class": (2, {**PAIR, "mode": "per_class", "network": "dcgan"}),
    "data_parallel": (2, {**PAIR, "mode": "data_parallel", "network": "dcgan"}),
}
HANDLED = {signal.SIGTERM, signal.SIGUSR1}


def line(mode: str, out: Path, checkpoints: Path, digits_dir: Path, grid_scoring) -> list[str]:
    if mode == "grid":
        setup = grid_settings(checkpoint_period=NEVER)
        setup["iterations"] = ITERATIONS
        return grid_command(2, setup, out, digits_dir, grid_scoring, checkpoints)
    ranks, setup = SETUPS[mode]
    setup = validate_study_config({"setups": {"s": setup}}, SCHEMA)["setups"]["s"]
    classifier, reference = grid_scoring
    return train_command(
        setup,
        digits_dir / "train.npz",
        out,
        seed=3,
        ranks=ranks,
        checkpoints=checkpoints,
        classifier=classifier,
        reference=reference,
    )


def ranks_of(job) -> list[psutil.Process]:
    found = []
    for child in psutil.Process(job.pid).children(recursive=True):
        try:
            if "ganstudy" in " ".join(child.cmdline()) and "PMI_RANK" in child.environ():
                found.append(child)
        except psutil.Error:
            continue
    return found


def catches_stop_signals(process: psutil.Process) -> bool:
    """Whether the process has installed its handlers (SigCgt in /proc): before that a SIGTERM kills it."""
    try:
        with open(f"/proc/{process.pid}/status") as status:
            caught = int(next(line for line in status if line.startswith("SigCgt:")).split()[1], 16)
    except (OSError, StopIteration):
        return False
    return all(caught & (1 << (sig - 1)) for sig in HANDLED)


@pytest.mark.parametrize(
    "mode, how",
    [
        ("single", signal.SIGTERM),
        ("conditional", signal.SIGUSR1),
        ("per_class", signal.SIGTERM),
        ("data_parallel", signal.SIGUSR1),
        ("grid", signal.SIGTERM),
    ],
)
def test_a_signalled_job_checkpoints_exits_non_zero_and_resumes_to_the_same_bits(
    mode, how, digits_dir, scoring, env, tmp_path
):
    ranks = 2 if mode == "grid" else SETUPS[mode][0]
    checkpoints = tmp_path / "ckpt"
    job = start_job(line(mode, tmp_path / "stopped", checkpoints, digits_dir, scoring), env)
    wait_for(lambda: len(ranks_of(job)) == ranks and all(map(catches_stop_signals, ranks_of(job))), job)
    for rank in ranks_of(job):
        rank.send_signal(how)
    _, stderr = job.communicate(timeout=300)
    assert job.returncode == STOPPED_EXIT_CODE, stderr[-3000:]
    assert f"stopped by {how.name} after iteration" in stderr and "Traceback" not in stderr
    assert list(checkpoints.rglob("iter-*/COMPLETE")), "no checkpoint was written"
    assert not (tmp_path / "stopped" / "run.json").exists()
    first_segment = json.loads((checkpoints / "elapsed.json").read_text())["seconds"]
    assert first_segment > 0

    resumed = start_job(line(mode, tmp_path / "stopped", checkpoints, digits_dir, scoring), env)
    _, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr[-3000:]
    assert "resumed from the checkpoint of iteration" in stderr
    # The resumed run's time counts both segments.
    record = json.loads((tmp_path / "stopped" / "run.json").read_text())
    assert record["earlier_segments_seconds"] == first_segment and record["train_seconds"] > first_segment
    whole = start_job(line(mode, tmp_path / "whole", tmp_path / "ckpt-whole", digits_dir, scoring), env)
    _, stderr = whole.communicate(timeout=300)
    assert whole.returncode == 0, stderr[-3000:]
    assert_same_generators(tmp_path / "whole", tmp_path / "stopped")
    curve = [line.split(",") for line in (tmp_path / "whole" / "losses.csv").read_text().splitlines()]
    resumed_curve = [line.split(",") for line in (tmp_path / "stopped" / "losses.csv").read_text().splitlines()]
    fid = curve[0].index("fid_best" if mode == "grid" else "fid")
    assert [row[fid] for row in curve] == [row[fid] for row in resumed_curve]
