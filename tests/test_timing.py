"""Seed 000's timing tables and plots from the runs' own clocks, and how set-ups find their baseline."""

import json

import numpy as np
import pandas as pd
import pytest

from ganstudy.errors import GanstudyError
from ganstudy.plan.layout import speedup_baselines
from ganstudy.report.figures import grid_size_plot, routine_bars, speedup_plot
from ganstudy.stats.timing import aggregate_timings, epoch_table, routine_table, timing_table, write_timing

# Seed 000's profiling table (seconds): the sequential and the distributed Lipizzaner.
SINGLE_CORE = {"gather": 19.4, "train": 264.9, "update_genomes": 199.8, "mutate": 25.6}
DISTRIBUTED = {"gather": 19.4, "train": 43.8, "update_genomes": 16.8, "mutate": 17.9}
OVERALL = {"sequential": 509.6, "distributed": 97.9}
PNG = b"\x89PNG\r\n\x1a\n"


def _run(root, setup, trial, per_rank, train_seconds):
    """A run folder as training writes it: each routine's seconds spread over two iterations and two cells."""
    folder = root / setup / f"trial{trial}"
    folder.mkdir(parents=True)
    record = {"setup_name": setup, "trial": trial, "world_size": len(per_rank), "train_seconds": train_seconds}
    (folder / "run.json").write_text(json.dumps(record))
    rows = ["iteration,cell,rank,routine,seconds"]
    for rank, routines in enumerate(per_rank):
        for routine, seconds in routines.items():
            rows += [
                f"{it},{cell},{rank},{routine},{seconds * share}"
                for it in (1, 2)
                for cell, share in (("a", 0.1), ("b", 0.4))
            ]
    (folder / "profile.csv").write_text("\n".join(rows) + "\n")
    # Two classes per iteration, as per-class runs log them; the last iteration's losses are 1+trial and 2+trial.
    losses = ["class,iteration,d_loss,g_loss,seconds"] + [
        f"{c},{it},{it + c * 0.5 + trial - 1},{it + c + trial},1.0" for it in (1, 2) for c in (0, 1)
    ]
    (folder / "losses.csv").write_text("\n".join(losses) + "\n")
    return folder


@pytest.fixture
def seed_000_runs(tmp_path):
    """Two trials each (x0.9 and x1.1, so the means are the seed's numbers); the distributed run's rank 2
    is the slowest in every routine, the other ranks take half as long."""
    folders = []
    for trial, factor in enumerate((0.9, 1.1)):
        folders.append(
            _run(
                tmp_path,
                "sequential",
                trial,
                [{k: v * factor for k, v in SINGLE_CORE.items()}],
                OVERALL["sequential"] * factor,
            )
        )
        slow = {k: v * factor for k, v in DISTRIBUTED.items()}
        half = {k: v / 2 for k, v in slow.items()}
        folders.append(_run(tmp_path, "distributed", trial, [half, half, slow, half], OVERALL["distributed"] * factor))
    folders.append(_run(tmp_path, "other", 0, [{"train": 10.0}], 12.0))
    return aggregate_timings(folders, tmp_path / "timings.csv", tmp_path / "runs.csv")[0], tmp_path


def test_aggregated_timings_sum_each_rank_s_routine_over_iterations_and_cells(seed_000_runs):
    timings, root = seed_000_runs
    assert pd.read_csv(root / "timings.csv").shape == timings.shape
    run = timings[(timings.setup == "distributed") & (timings.trial == 1)]
    assert run[run["rank"] == 2].set_index("routine").seconds["train"] == pytest.approx(43.8 * 1.1)
    assert run[run.routine == "overall"].seconds.tolist() == pytest.approx([97.9 * 1.1])  # the run's clock, once
    assert (
        len(timings[(timings.setup == "distributed") & (timings.trial == 0)]) == 4 * 4 + 1
    )  # 4 ranks x 4 routines + overall


def test_routine_table_reproduces_seed_000s_profiling_table(seed_000_runs):
    timings, _ = seed_000_runs
    table = routine_table(timings, ["sequential", "distributed", "other"], {"distributed": "sequential"})
    dist = table[table.setup == "distributed"].set_index("routine")
    assert list(dist.index) == ["gather", "train", "update_genomes", "mutate", "overall"]
    # The slowest rank's seconds, mean over trials, against the baseline's.
    assert dist.seconds.tolist() == pytest.approx([19.4, 43.8, 16.8, 17.9, 97.9])
    assert dist.speedup["train"] == pytest.approx(264.9 / 43.8) and dist.acceleration["train"] == pytest.approx(
        1 - 43.8 / 264.9
    )
    assert dist.share["train"] == pytest.approx(43.8 / 97.9)
    # The seed printed these, rounded from its raw timings: speed-up 1.00, 6.05, 11.87, 1.43, 5.21 and
    # acceleration 0.0%, 83.5%, 91.6%, 29.9%, 80.8%.
    assert dist.speedup.tolist() == pytest.approx([1.00, 6.05, 11.87, 1.43, 5.21], rel=5e-3)
    assert dist.acceleration.tolist() == pytest.approx([0.0, 0.835, 0.916, 0.299, 0.808], abs=3e-3)
    assert table[table.setup != "distributed"].speedup.isna().all()


def test_timing_table_gives_speedup_and_efficiency_against_the_baseline(seed_000_runs):
    timings, _ = seed_000_runs
    table = timing_table(
        timings, ["sequential", "distributed", "other", "missing"], {"distributed": "sequential"}
    ).set_index("setup")
    row = table.loc["distributed"]
    assert row.ranks == 4 and row.trials == 2 and row.baseline == "sequential"
    assert row.mean_train_minutes == pytest.approx(97.9 / 60) and row.sd_train_minutes == pytest.approx(
        np.std([88.11, 107.69], ddof=1) / 60
    )
    assert row.speedup == pytest.approx(509.6 / 97.9) and row.efficiency == pytest.approx(509.6 / 97.9 / 4)
    assert np.isnan(table.loc["sequential", "speedup"]) and table.loc["missing", "trials"] == 0
    # The baseline need not be among the set-ups shown (the speed-up plot shows only the compared ones).
    alone = timing_table(timings, ["distributed"], {"distributed": "sequential"})
    assert alone.speedup.tolist() == pytest.approx([509.6 / 97.9])


def test_epoch_table_has_seed_004s_epoch_time_and_final_losses(tmp_path):
    folders = [_run(tmp_path, "dp", trial, [{"train": 1.0}], seconds) for trial, seconds in enumerate((10.0, 14.0))]
    _, runs = aggregate_timings(folders, tmp_path / "timings.csv", tmp_path / "runs.csv")
    assert runs.epoch_seconds.tolist() == [5.0, 7.0]  # 2 iterations each
    # Last iteration, mean over the two classes: d = 2 + 0.25 + trial - 1, g = 2 + 0.5 + trial.
    assert runs.final_d_loss.tolist() == [1.25, 2.25] and runs.final_g_loss.tolist() == [2.5, 3.5]
    table = epoch_table(pd.read_csv(tmp_path / "runs.csv"), ["dp", "none"]).set_index("setup")
    assert table.loc["dp"].tolist() == pytest.approx([1, 2, 6.0, np.std([5.0, 7.0], ddof=1), 1.75, 3.0])
    assert table.loc["none", "trials"] == 0 and np.isnan(table.loc["none", "epoch_seconds"])
    assert "source" not in table  # no set-up cites the paper: no empty paper columns
    # The paper's table 1 beside ours, for the set-ups that cite it; scores' references are not its business.
    references = {
        "dp": {
            "epoch_seconds": {"mean": 37.84, "source": "seed 004 table 1"},
            "g_loss": {"mean": 25.451, "source": "seed 004 table 1"},
            "fid": {"mean": 9.0, "source": "x"},
        }
    }
    cited = epoch_table(pd.read_csv(tmp_path / "runs.csv"), ["dp", "none"], references).set_index("setup")
    assert cited.loc["dp", ["paper_epoch_seconds", "paper_g_loss"]].tolist() == [37.84, 25.451]
    assert np.isnan(cited.loc["dp", "paper_d_loss"]) and cited.loc["dp", "source"] == "seed 004 table 1"
    assert cited.loc["none", "source"] == "" and np.isnan(cited.loc["none", "paper_epoch_seconds"])
    assert cited.loc["dp", "epoch_seconds"] == table.loc["dp", "epoch_seconds"]


def test_write_timing_writes_its_tables_in_three_formats(seed_000_runs):
    _, root = seed_000_runs
    written = write_timing(
        root / "timings.csv",
        root / "runs.csv",
        ["sequential", "distributed"],
        {"distributed": "sequential"},
        root / "tables",
        digits=3,
    )
    assert sorted(p.name for p in written) == sorted(
        f"{n}.{e}" for n in ("timing", "routines", "epochs") for e in ("csv", "md", "tex")
    )
    assert (
        "| distributed | train | 43.8 | 0.447 | sequential | 265 | 0.835 | 6.05 |"
        in (root / "tables" / "routines.md").read_text()
    )


def test_a_profile_without_its_columns_is_named(tmp_path):
    folder = _run(tmp_path, "s", 0, [{"train": 1.0}], 1.0)
    (folder / "profile.csv").write_text("iteration,when\n1,2\n")
    with pytest.raises(
        GanstudyError, match=r"s/trial0/profile.csv lacks the column\(s\) \['rank', 'routine', 'seconds'\]"
    ):
        aggregate_timings([folder], tmp_path / "timings.csv", tmp_path / "runs.csv")


def test_a_set_up_s_baseline_is_the_one_rank_set_up_of_the_same_work():
    grid = {"mode": "grid", "iterations": 10, "grid": {"shape": "2x2"}}
    setups = {
        "seq": {**grid, "ranks": 1, "trials": 3},
        "dist": {**grid, "ranks": None, "trials": 5},
        "dist3": {**grid, "ranks": 3, "trials": 5},
        "longer": {**grid, "iterations": 20, "ranks": None, "trials": 5},
        "seq_again": {**grid, "ranks": 1, "trials": 5},
    }
    ranks = {"seq": 1, "dist": 4, "dist3": 3, "longer": 4, "seq_again": 1}
    # Only ranks and trials may differ; the first one-rank match wins; no match, no baseline.
    assert speedup_baselines(setups, ranks) == {"dist": "seq", "dist3": "seq"}
    # A set-up whose rank count is not known yet takes no part.
    assert speedup_baselines(setups, {k: v for k, v in ranks.items() if k != "seq"}) == {
        "dist": "seq_again",
        "dist3": "seq_again",
    }


def test_timing_and_score_figures_are_drawn(seed_000_runs):
    _, root = seed_000_runs
    routine_bars(root / "timings.csv", ["sequential", "distributed", "other"], root / "routines.png")
    speedup_plot(
        root / "timings.csv", ["sequential", "distributed"], {"distributed": "sequential"}, root / "speedup.png"
    )
    rows = [
        {
            "study": "s",
            "setup": setup,
            "trial": t,
            "metric": metric,
            "value": v + t,
            "train_seconds": 1.0,
            "ranks": 1,
            "grid": grid,
        }
        for setup, grid, v in (("g1", "1x1", 5.0), ("g2", "2x2", 3.0), ("g2seq", "2x2", 3.5), ("plain", None, 9.0))
        for t in range(3)
        for metric in ("fid", "isc")
    ]
    pd.DataFrame(rows).to_csv(root / "scores.csv", index=False)
    grid_size_plot(root / "scores.csv", ["fid", "isc"], ["g1", "g2", "g2seq", "plain"], root / "grid_sizes.png")
    for name in ("routines.png", "speedup.png", "grid_sizes.png"):
        assert (root / name).read_bytes()[:8] == PNG
