"""The grid under mpiexec: exchange topology, identical results on any rank count, resume, heartbeat."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch

from conftest import SCHEMA, train_command
from ganstudy.config.validate import validate_study_config
from ganstudy.models.artifact import load_generator
from jobs import kill_job, start_job, wait_for

pytestmark = pytest.mark.mpi

TINY = {
    "mode": "grid",
    "iterations": 3,
    "hidden_units": 32,
    "latent_dim": 16,
    "batch_size": 50,
    "checkpoint_period": 0,
    "grid": {"shape": "2x2", "fitness_sample_size": 64, "score_sample_size": 64, "data_ratio": 0.25},
}
SETUP_KEYS = {"checkpoint_period", "checkpoints_kept"}


def settings(**keys):
    """TINY with grid keys (and the set-up's checkpoint keys) replaced."""
    grid = {k: v for k, v in keys.items() if k not in SETUP_KEYS}
    setup = {**TINY, **{k: v for k, v in keys.items() if k in SETUP_KEYS}, "grid": {**TINY["grid"], **grid}}
    return validate_study_config({"setups": {"g": setup}}, SCHEMA)["setups"]["g"]


def command(ranks, setup, out, digits_dir, scoring, checkpoints=None, **compute):
    classifier, reference = scoring
    return train_command(
        setup,
        digits_dir / "train.npz",
        out,
        seed=11,
        trial=1,
        ranks=ranks,
        name="g",
        checkpoints=checkpoints,
        classifier=classifier,
        reference=reference,
        **compute,
    )


def train(ranks, setup, out, digits_dir, scoring, env, checkpoints=None, **compute):
    done = subprocess.run(
        command(ranks, setup, out, digits_dir, scoring, checkpoints, **compute),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def result(out: Path):
    mixture, _ = load_generator(out / "generator.pt")
    cells = [line.split(",") for line in (out / "cells.csv").read_text().splitlines()[1:]]
    # Drop the rank column: the only thing allowed to differ between layouts.
    return mixture.state_dict(), mixture.weights, [row[:1] + row[2:] for row in cells]


def assert_same(a, b):
    state_a, weights_a, cells_a = a
    state_b, weights_b, cells_b = b
    assert weights_a == weights_b and cells_a == cells_b
    assert state_a.keys() == state_b.keys() and all(torch.equal(state_a[k], state_b[k]) for k in state_a)


PROBE = """
import json
import torch
from ganstudy.parallel.world import mpi_world
from ganstudy.parallel.topology import GridShape, assign_cells
from ganstudy.parallel.exchange import NeighbourExchange
world = mpi_world()
shape = GridShape({rows}, {cols}, "{topology}", {radius})
blocks = assign_cells(shape, world.size)
exchange = NeighbourExchange(world.comm, shape, blocks, torch.device("cpu"))
received = exchange.exchange({{cell: world.rank for cell in blocks[world.rank]}})
report = {{"kind": exchange.kind, "neighbours": exchange.neighbour_ranks(),
          "received": sorted([list(c) for c in received]),
          "owners": {{f"{{c[0]}}-{{c[1]}}": r for c, r in received.items()}}}}
# One file per rank: lines printed by several ranks at once can interleave.
open(f"{out}/rank{{world.rank}}.json", "w").write(json.dumps({{"rank": world.rank, **report}}))
"""


@pytest.mark.parametrize(
    "ranks, rows, cols, topology, radius",
    [
        (4, 2, 2, "torus", 1),
        (6, 2, 3, "torus", 1),
        (2, 3, 3, "torus", 1),
        (3, 3, 3, "torus", 1),
        (4, 6, 6, "torus", 1),
        (5, 1, 5, "ring", 1),
        (5, 1, 5, "ring", 2),
        (2, 1, 9, "ring", 2),
        (3, 1, 7, "ring", 3),
    ],
)
def test_every_rank_receives_exactly_its_cells_neighbourhoods(ranks, rows, cols, topology, radius, env, tmp_path):
    from ganstudy.parallel.topology import GridShape, assign_cells

    code = PROBE.format(rows=rows, cols=cols, topology=topology, radius=radius, out=tmp_path)
    done = subprocess.run(
        ["mpiexec", "-n", str(ranks), sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    shape = GridShape(rows, cols, topology, radius)
    blocks = assign_cells(shape, ranks)
    owner = {cell: r for r, block in enumerate(blocks) for cell in block}
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(ranks)]
    for report in reports:
        mine = blocks[report["rank"]]
        needed = {n for cell in mine for n in shape.neighbourhood(cell)}
        # Nothing more: a rank with a block of cells is sent its peers' boundary cells only.
        assert {tuple(c) for c in report["received"]} == needed | set(mine)
        # The payload of each cell came from its owner.
        assert all(report["owners"][f"{c[0]}-{c[1]}"] == owner[c] for c in needed)
        if ranks == shape.size and topology == "ring" and radius == 1:
            # A periodic line: the cell before and the cell after.
            assert report["kind"] == "cartesian"
            ((_, col),) = mine
            assert report["neighbours"] == [owner[(0, (col - 1) % cols)], owner[(0, (col + 1) % cols)]]
        elif ranks == shape.size and topology == "torus":
            assert report["kind"] == "cartesian"
            ((row, col),) = mine
            # Cartesian order: N, S, W, E.
            assert report["neighbours"] == [
                owner[((row - 1) % rows, col)],
                owner[((row + 1) % rows, col)],
                owner[(row, (col - 1) % cols)],
                owner[(row, (col + 1) % cols)],
            ]
        else:
            assert report["kind"] == "graph"
            assert set(report["neighbours"]) == {owner[n] for n in needed} - {report["rank"]}


def test_cuda_graphs_asked_for_where_none_can_run_stop_the_run_at_its_start(digits_dir, scoring, env, tmp_path):
    done = subprocess.run(
        command(1, settings(), tmp_path / "out", digits_dir, scoring, cuda_graphs=True, stack_layout="whole"),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode != 0
    assert (
        "compute.cuda_graphs is true, but this rank trains on cpu, not on a CUDA GPU: set it to auto or false"
        in done.stderr
    )
    assert not (tmp_path / "out" / "run.json").exists()


# The whole-stack layout is a GPU's (compute.stack_layout auto); run on the CPU here, it is tested where no GPU is.
@pytest.mark.parametrize(
    "batch_cells, layout", [(True, "cache"), (True, "whole"), (False, "auto")], ids=["stacked", "whole-stack", "loop"]
)
def test_results_are_bit_identical_on_1_2_and_4_ranks(batch_cells, layout, digits_dir, scoring, env, tmp_path):
    setup = settings(batch_cells=batch_cells)
    outcomes = {}
    for ranks in (1, 2, 4):
        train(ranks, setup, tmp_path / f"n{ranks}", digits_dir, scoring, env, stack_layout=layout)
        outcomes[ranks] = result(tmp_path / f"n{ranks}")
    assert_same(outcomes[1], outcomes[2])
    assert_same(outcomes[1], outcomes[4])
    record = json.loads((tmp_path / "n4" / "run.json").read_text())
    assert record["stack_layout"] == layout
    # compute.cuda_graphs auto: graphs only on a CUDA GPU.
    assert record["cuda_graphs"] == "auto" and record["cuda_graphs_used"] is False
    assert record["exchange"] == "cartesian" and record["grid_shape"] == "2x2" and len(record["hosts"]) == 4
    # Engine 3 changed only nn.Dropout's masks: a perceptron's run draws engine 2's numbers, and says so.
    assert record["grid_engine"] == 2
    assert len(record["mixture_weights"]) == 3  # a 2x2 neighbourhood has three distinct cells
    assert sum(record["mixture_weights"]) == pytest.approx(1.0)


def test_auto_shape_on_6_ranks_is_3x2_and_matches_runs_on_1_and_2_ranks(digits_dir, scoring, env, tmp_path):
    train(6, settings(shape="auto"), tmp_path / "auto", digits_dir, scoring, env)
    for ranks in (1, 2):
        train(ranks, settings(shape="3x2"), tmp_path / f"n{ranks}", digits_dir, scoring, env)
        assert_same(result(tmp_path / "auto"), result(tmp_path / f"n{ranks}"))
    assert json.loads((tmp_path / "auto" / "run.json").read_text())["grid_shape"] == "3x2"
    profile = (tmp_path / "auto" / "profile.csv").read_text()
    for routine in ("exchange", "fitness", "selection", "train", "replacement", "mixture", "score"):
        assert f",{routine}," in profile


def test_stacked_cells_of_odd_sizes_are_bit_identical_on_1_2_and_6_ranks(digits_dir, scoring, env, tmp_path):
    # Sizes that are no multiple of a vector register: the last elements of a stacked tensor take
    # another code path in some CPU kernels, and which cell is last depends on the rank layout.
    setup = {
        **settings(shape="3x2", fitness_sample_size=61, score_sample_size=64),
        "hidden_units": 37,
        "latent_dim": 5,
        "batch_size": 23,
    }
    for ranks in (1, 2, 6):
        train(ranks, setup, tmp_path / f"n{ranks}", digits_dir, scoring, env)
    assert_same(result(tmp_path / "n1"), result(tmp_path / "n2"))
    assert_same(result(tmp_path / "n1"), result(tmp_path / "n6"))


@pytest.mark.parametrize("batch_cells, layout", [(True, "cache"), (True, "whole"), (False, "auto")])
def test_a_ring_is_bit_identical_on_1_2_3_and_6_ranks(batch_cells, layout, digits_dir, scoring, env, tmp_path):
    # Lipi-Ring: 6 cells, each with two on either side; on 6 ranks a graph exchange of one cell per rank.
    setup = settings(shape="1x6", topology="ring", ring_radius=2, batch_cells=batch_cells)
    for ranks in (1, 2, 3, 6):
        train(ranks, setup, tmp_path / f"n{ranks}", digits_dir, scoring, env, stack_layout=layout)
    for ranks in (2, 3, 6):
        assert_same(result(tmp_path / "n1"), result(tmp_path / f"n{ranks}"))
    record = json.loads((tmp_path / "n6" / "run.json").read_text())
    assert record["grid_topology"] == "ring of 6, radius 2" and record["exchange"] == "graph"
    assert len(record["mixture_weights"]) == 5  # itself and two cells on either side
    cells = (tmp_path / "n1" / "cells.csv").read_text()
    assert "0-0 0-5 0-1 0-4 0-2" in cells  # the first cell's neighbourhood, as the table writes it


def test_a_ring_of_radius_1_is_the_torus_of_one_row_bit_for_bit(digits_dir, scoring, env, tmp_path):
    train(5, settings(shape="1x5", topology="ring"), tmp_path / "ring", digits_dir, scoring, env)
    train(2, settings(shape="1x5"), tmp_path / "torus", digits_dir, scoring, env)
    assert_same(result(tmp_path / "ring"), result(tmp_path / "torus"))
    records = [json.loads((tmp_path / name / "run.json").read_text()) for name in ("ring", "torus")]
    assert [record["exchange"] for record in records] == ["cartesian", "graph"]
    assert [record["grid_topology"] for record in records] == ["ring of 5, radius 1", "1x5 torus"]


def test_a_ring_whose_radius_reaches_round_it_is_refused_before_training(digits_dir, scoring, env, tmp_path):
    done = subprocess.run(
        command(2, settings(shape="auto", topology="ring", ring_radius=2), tmp_path / "out", digits_dir, scoring),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode != 0 and not (tmp_path / "out" / "run.json").exists()
    assert "grid.ring_radius 2 on a ring of 2 cells" in done.stderr and "give the ring at least 3 cells" in done.stderr


def test_a_6x6_grid_is_bit_identical_on_1_and_2_ranks(digits_dir, scoring, env, tmp_path):
    setup = settings(shape="6x6", data_ratio=0.1)
    setup["iterations"] = 2
    for ranks in (1, 2):
        train(ranks, setup, tmp_path / f"n{ranks}", digits_dir, scoring, env)
    assert_same(result(tmp_path / "n1"), result(tmp_path / "n2"))


def test_a_network_with_no_hand_stacked_form_trains_cell_by_cell_on_a_cpu_and_says_so(
    digits_dir, scoring, env, tmp_path
):
    setup = {**settings(shape="1x2"), "network": "dcgan"}
    setup["iterations"] = 1
    done = train(2, setup, tmp_path / "out", digits_dir, scoring, env)
    assert (
        done.stderr.count(
            "network dcgan has no hand-stacked form, and its general one is slower than the loop on a CPU "
            "(compute.stack_layout whole stacks it): each rank trains its cells one after another"
        )
        == 1
    )
    assert (tmp_path / "out" / "generator.pt").exists()


# In the whole layout dcgan's cells go through StackedNetwork (grouped convolutions, masks keyed per row).
@pytest.mark.parametrize("layout", ["cache", "whole"])
def test_a_dcgan_grid_with_dropout_is_bit_identical_twice_and_on_1_and_2_ranks(
    layout, digits_dir, scoring, env, tmp_path
):
    # dcgan's discriminator drops units: each cell's masks must be keyed by its own updates, never drawn
    # from the process's global generator, whose state depends on the process and on the cells it ran before.
    setup = {
        **settings(fitness_sample_size=32, score_sample_size=64, data_ratio=0.1),
        "network": "dcgan",
        "iterations": 2,
    }
    for run, ranks in (("first", 1), ("again", 1), ("two", 2)):
        done = train(ranks, setup, tmp_path / run, digits_dir, scoring, env, stack_layout=layout)
        assert ("network dcgan: cells stacked (general form)" in done.stderr) == (layout == "whole")
    assert_same(result(tmp_path / "first"), result(tmp_path / "again"))
    assert_same(result(tmp_path / "first"), result(tmp_path / "two"))
    assert json.loads((tmp_path / "two" / "run.json").read_text())["grid_engine"] == 3


def test_a_plugin_network_with_batch_norms_trains_stacked_and_bit_identical_on_1_and_2_ranks(
    digits_dir, scoring, plugin_env, plugin_site, monkeypatch, tmp_path
):
    # The example plugin's DC-GAN without spectral norm: transposed convolutions and batch norms, no
    # stacked form of its own; in the whole layout the general one trains its cells together.
    monkeypatch.syspath_prepend(str(plugin_site))  # result() builds the network to load the generator
    setup = {
        **settings(shape="3x3", fitness_sample_size=32, score_sample_size=64, data_ratio=0.1),
        "network": "sndcgan",
        "iterations": 2,
        "network_options": {"base_channels": 8, "spectral_norm": False},
    }
    for run, ranks in (("one", 1), ("two", 2)):
        done = train(ranks, setup, tmp_path / run, digits_dir, scoring, plugin_env, stack_layout="whole")
        assert "network sndcgan: cells stacked (general form)" in done.stderr
    assert_same(result(tmp_path / "one"), result(tmp_path / "two"))


def test_surplus_ranks_idle_and_say_so(digits_dir, scoring, env, tmp_path):
    done = train(3, settings(shape="auto"), tmp_path / "out", digits_dir, scoring, env)
    assert "1 of 3 ranks have no cell of the 1x2 grid and stay idle" in done.stderr


def test_too_few_ranks_for_min_cells_fails_clearly(digits_dir, scoring, env, tmp_path):
    done = subprocess.run(
        command(2, settings(shape="auto", min_cells=4), tmp_path, digits_dir, scoring),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode != 0
    assert "fewer than grid.min_cells=4: 2 MPI ranks are too few; launch at least 4 ranks" in done.stderr
    assert not (tmp_path / "run.json").exists()


def test_a_killed_run_resumes_bit_identical_and_skips_a_corrupt_checkpoint(digits_dir, scoring, env, tmp_path):
    setup = settings(checkpoint_period=1, checkpoints_kept=3, score_sample_size=400)
    setup["iterations"] = 12
    train(2, setup, tmp_path / "whole", digits_dir, scoring, env)
    checkpoints = tmp_path / "ckpt"
    job = start_job(command(2, setup, tmp_path / "resumed", digits_dir, scoring, checkpoints), env)
    wait_for(lambda: len(list(checkpoints.glob("iter-*/COMPLETE"))) >= 2, job)
    kill_job(job)
    assert not (tmp_path / "resumed" / "run.json").exists()
    newest = sorted(checkpoints.glob("iter-*/COMPLETE"))[-1].parent
    (newest / "cell-1-1.ckpt").write_bytes(b"torn write")
    done = train(2, setup, tmp_path / "resumed", digits_dir, scoring, env, checkpoints)
    iteration = int(newest.name.split("-")[1])
    assert (
        f"warning: checkpoint of iteration {iteration} is unreadable" in done.stderr and "cell-1-1.ckpt" in done.stderr
    )
    assert "resumed from the checkpoint of iteration" in done.stderr
    assert_same(result(tmp_path / "whole"), result(tmp_path / "resumed"))
    assert os.listdir(checkpoints) == ["finished"]  # the outputs took the checkpoints' place


def test_a_killed_ring_resumes_bit_identical_on_another_rank_count(digits_dir, scoring, env, tmp_path):
    setup = settings(shape="1x5", topology="ring", ring_radius=2, checkpoint_period=1, checkpoints_kept=2)
    setup["iterations"] = 8
    train(1, setup, tmp_path / "whole", digits_dir, scoring, env)
    checkpoints = tmp_path / "ckpt"
    job = start_job(command(5, setup, tmp_path / "resumed", digits_dir, scoring, checkpoints), env)
    wait_for(lambda: any(checkpoints.glob("iter-*/COMPLETE")), job)
    kill_job(job)
    done = train(2, setup, tmp_path / "resumed", digits_dir, scoring, env, checkpoints)
    assert "resumed from the checkpoint of iteration" in done.stderr
    assert_same(result(tmp_path / "whole"), result(tmp_path / "resumed"))


def test_a_killed_dcgan_grid_resumes_bit_identical_stacked(digits_dir, scoring, env, tmp_path):
    # Grid engine 3 keys dcgan's dropout masks by (cell, iteration, update, ...): a run resumed in the
    # middle drops the units an unbroken one drops, in the stacked form (the whole layout).
    setup = {
        **settings(
            checkpoint_period=1, checkpoints_kept=2, fitness_sample_size=32, score_sample_size=64, data_ratio=0.1
        ),
        "network": "dcgan",
        "iterations": 6,
    }
    train(2, setup, tmp_path / "whole", digits_dir, scoring, env, stack_layout="whole")
    checkpoints = tmp_path / "ckpt"
    job = start_job(
        command(2, setup, tmp_path / "resumed", digits_dir, scoring, checkpoints, stack_layout="whole"), env
    )
    wait_for(lambda: any(checkpoints.glob("iter-*/COMPLETE")), job)
    kill_job(job)
    done = train(2, setup, tmp_path / "resumed", digits_dir, scoring, env, checkpoints, stack_layout="whole")
    assert "resumed from the checkpoint of iteration" in done.stderr
    assert_same(result(tmp_path / "whole"), result(tmp_path / "resumed"))


def test_a_changed_setup_never_resumes_from_old_checkpoints(digits_dir, scoring, env, tmp_path):
    setup = settings(checkpoint_period=1)
    setup["iterations"] = 12
    checkpoints = tmp_path / "ckpt"
    job = start_job(command(1, setup, tmp_path / "a", digits_dir, scoring, checkpoints), env)
    wait_for(lambda: any(checkpoints.glob("iter-*/COMPLETE")), job)
    kill_job(job)
    changed = {**setup, "lr": 1e-3}
    done = train(1, changed, tmp_path / "b", digits_dir, scoring, env, checkpoints)
    assert "resumed from" not in done.stderr
    assert "were written with other settings or by another version of the training engine: not resumed" in done.stderr


def _rank_process(job, rank):
    def find():
        for child in psutil.Process(job.pid).children(recursive=True):
            try:
                if "ganstudy" in " ".join(child.cmdline()) and child.environ().get("PMI_RANK") == str(rank):
                    return child
            except psutil.Error:
                continue
        return None

    wait_for(lambda: find() is not None, job)
    return find()


@pytest.mark.parametrize("how", ["stall", "kill"])
def test_a_dead_or_stalled_rank_ends_the_job_within_the_heartbeat_timeout(how, digits_dir, scoring, env, tmp_path):
    setup = settings(heartbeat_timeout=4, checkpoint_period=1)
    setup["iterations"] = 10_000
    checkpoints = tmp_path / "ckpt"
    job = start_job(command(2, setup, tmp_path, digits_dir, scoring, checkpoints), env)
    victim = _rank_process(job, 1)
    wait_for(lambda: any(checkpoints.glob("iter-*/COMPLETE")), job)  # training is under way
    victim.send_signal(signal.SIGSTOP if how == "stall" else signal.SIGKILL)
    started = time.monotonic()
    try:
        _, stderr = job.communicate(timeout=60)
    finally:
        if how == "stall" and victim.is_running():
            victim.kill()
    assert job.returncode != 0
    assert time.monotonic() - started < 4 + 15
    if how == "stall":
        assert f"rank 1 (host {socket.gethostname()}, cells 1-0, 1-1) stopped first" in stderr


@pytest.mark.parametrize("replacement", ["always", "better"])
def test_populations_of_two_with_mustangs_losses_are_identical_on_1_and_3_ranks(
    replacement, digits_dir, scoring, env, tmp_path
):
    setup = settings(population_size=2, n_replacements=1, shape="1x3", replacement=replacement)
    setup["loss"] = "mustangs"
    train(1, setup, tmp_path / "one", digits_dir, scoring, env)
    train(3, setup, tmp_path / "three", digits_dir, scoring, env)
    assert_same(result(tmp_path / "one"), result(tmp_path / "three"))


def test_cells_train_on_their_own_label_subsets(digits_dir, scoring, env, tmp_path):
    from ganstudy.data.arrays import load_split

    labels = load_split(digits_dir / "train.npz").labels
    setup = settings(shape="1x2", cell_classes=[[0, 1, 2], [3, 4]], data_ratio=1.0)
    setup["iterations"] = 1
    train(2, setup, tmp_path / "out", digits_dir, scoring, env)
    cells = {row.split(",")[0]: row.split(",") for row in (tmp_path / "out" / "cells.csv").read_text().splitlines()}
    header = cells.pop("cell")
    images = header.index("images")
    assert int(cells["0-0"][images]) == int(np.isin(labels, [0, 1, 2]).sum())
    assert int(cells["0-1"][images]) == int(np.isin(labels, [3, 4]).sum())
    wrong = settings(shape="2x2", cell_classes=[[0], [1]])
    done = subprocess.run(
        command(1, wrong, tmp_path / "wrong", digits_dir, scoring), capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode != 0 and "grid.cell_classes lists classes for 2 cells, the 2x2 grid has 4" in done.stderr
