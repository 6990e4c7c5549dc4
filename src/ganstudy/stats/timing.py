"""timing: seed 000's two tables from the runs' own clocks (each set-up's training time and speed-up
over the one-rank run of the same work, its baseline; the seconds per routine and the routine's own
speed-up) and seed 004's table 1 (average epoch time and final losses per set-up)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ganstudy.core.atomic import atomic_path, read_json
from ganstudy.errors import GanstudyError
from ganstudy.stats.reference_keys import EPOCH_REFERENCES

TIMINGS_COLUMNS = ["setup", "trial", "ranks", "rank", "routine", "seconds"]
TIMING_COLUMNS = [
    "setup",
    "ranks",
    "trials",
    "mean_train_minutes",
    "sd_train_minutes",
    "baseline",
    "baseline_minutes",
    "speedup",
    "efficiency",
]
RUNS_COLUMNS = [
    "setup",
    "trial",
    "ranks",
    "iterations",
    "train_seconds",
    "epoch_seconds",
    "final_d_loss",
    "final_g_loss",
]
EPOCH_COLUMNS = ["setup", "ranks", "trials", "epoch_seconds", "sd_epoch_seconds", "d_loss", "g_loss"]
ROUTINE_COLUMNS = ["setup", "routine", "seconds", "share", "baseline", "baseline_seconds", "acceleration", "speedup"]
# The whole training clock of a run, next to its routines (seed 000's "overall" row).
OVERALL = "overall"


def aggregate_timings(
    run_dirs: Iterable[str | os.PathLike[str]],
    timings_path: str | os.PathLike[str],
    runs_path: str | os.PathLike[str],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every run's records, read once, into two tables. timings: profile.csv summed per rank and routine
    over iterations and cells, plus an ``overall`` row with the run's training seconds. runs: one row per
    run with its training seconds per iteration (one pass over the data: an epoch) and the losses of its
    last iteration (the mean over cells or classes where a run has several)."""
    timings, runs = [], []
    for folder in map(Path, run_dirs):
        record = read_json(folder / "run.json")
        run = {"setup": record["setup_name"], "trial": record["trial"], "ranks": record.get("world_size", 1)}
        profile = pd.read_csv(folder / "profile.csv")
        missing = {"rank", "routine", "seconds"} - set(profile.columns)
        if missing:
            raise GanstudyError(
                f"{folder / 'profile.csv'} lacks the column(s) {sorted(missing)}: rerun that training job"
            )
        for (rank, routine), seconds in profile.groupby(["rank", "routine"], sort=False).seconds.sum().items():
            timings.append({**run, "rank": int(rank), "routine": routine, "seconds": float(seconds)})
        timings.append({**run, "rank": 0, "routine": OVERALL, "seconds": float(record["train_seconds"])})
        losses = pd.read_csv(folder / "losses.csv")
        iterations = int(losses.iteration.max())
        last = losses[losses.iteration == iterations]
        runs.append(
            {
                **run,
                "iterations": iterations,
                "train_seconds": record["train_seconds"],
                "epoch_seconds": record["train_seconds"] / iterations,
                "final_d_loss": last.d_loss.mean(),
                "final_g_loss": last.g_loss.mean(),
            }
        )
    tables = pd.DataFrame(timings, columns=TIMINGS_COLUMNS), pd.DataFrame(runs, columns=RUNS_COLUMNS)
    for table, path in zip(tables, (timings_path, runs_path)):
        with atomic_path(path) as tmp:
            table.to_csv(tmp, index=False)
    return tables


def epoch_table(
    runs: pd.DataFrame, setups: list[str], references: dict[str, dict[str, Any]] | None = None
) -> pd.DataFrame:
    """Seed 004's table 1: per set-up the average epoch time and the final discriminator and generator
    losses, means over trials; beside them the paper's (``references``: set-up -> fact -> reference, the
    facts of EPOCH_REFERENCES) when a set-up has any."""
    references = {
        setup: {fact: ref for fact, ref in refs.items() if fact in EPOCH_REFERENCES}
        for setup, refs in (references or {}).items()
    }
    cited = any(references.values())
    rows = []
    for setup in setups:
        part = runs[runs.setup == setup]
        row = {
            "setup": setup,
            "ranks": int(part.ranks.max()) if len(part) else 0,
            "trials": len(part),
            "epoch_seconds": part.epoch_seconds.mean(),
            "sd_epoch_seconds": part.epoch_seconds.std(ddof=1),
            "d_loss": part.final_d_loss.mean(),
            "g_loss": part.final_g_loss.mean(),
        }
        if cited:
            mine = references.get(setup, {})
            row.update({f"paper_{fact}": mine[fact]["mean"] if fact in mine else np.nan for fact in EPOCH_REFERENCES})
            row["source"] = "; ".join(sorted({ref["source"] for ref in mine.values()}))
        rows.append(row)
    columns = EPOCH_COLUMNS + ([f"paper_{fact}" for fact in EPOCH_REFERENCES] + ["source"] if cited else [])
    return pd.DataFrame(rows, columns=columns)


def _routine_seconds(timings: pd.DataFrame) -> pd.DataFrame:
    """Per set-up and routine: the slowest rank's seconds in each run (ranks run side by side, so that is
    the routine's share of the wall clock), averaged over trials; routines in the order they first appear."""
    per_run = timings.groupby(["setup", "trial", "routine"], sort=False).seconds.max().reset_index()
    return per_run.groupby(["setup", "routine"], sort=False).seconds.mean().reset_index()


def timing_table(timings: pd.DataFrame, setups: list[str], baselines: dict[str, str]) -> pd.DataFrame:
    """Per set-up: ranks, trials and training minutes; with a baseline, the speed-up (baseline minutes over
    ours) and the parallel efficiency (speed-up over ranks)."""
    runs = timings[timings.routine == OVERALL]
    rows = []
    for setup in setups:
        part = runs[runs.setup == setup]
        minutes = part.seconds.to_numpy(float) / 60
        base = baselines.get(setup, "")
        base_runs = runs[runs.setup == base]
        base_minutes = base_runs.seconds.mean() / 60 if len(base_runs) else np.nan
        mean = minutes.mean() if len(part) else np.nan
        ranks = int(part.ranks.max()) if len(part) else 0
        rows.append(
            {
                "setup": setup,
                "ranks": ranks,
                "trials": len(part),
                "mean_train_minutes": mean,
                "sd_train_minutes": minutes.std(ddof=1) if len(part) > 1 else np.nan,
                "baseline": base,
                "baseline_minutes": base_minutes,
                "speedup": base_minutes / mean,
                "efficiency": base_minutes / mean / ranks if ranks else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=TIMING_COLUMNS)


def routine_table(timings: pd.DataFrame, setups: list[str], baselines: dict[str, str]) -> pd.DataFrame:
    """Seed 000's profile table: seconds per routine, its share of the training time, and against the
    baseline's same routine the acceleration (time saved, 1 - ours/baseline) and speed-up."""
    seconds = _routine_seconds(timings)
    lookup = {(s, r): v for s, r, v in seconds.itertuples(index=False)}
    rows = []
    for setup in setups:
        routines = [r for s, r in lookup if s == setup and r != OVERALL] + [OVERALL]
        base = baselines.get(setup, "")
        for routine in routines:
            ours, theirs = lookup.get((setup, routine), np.nan), lookup.get((base, routine), np.nan)
            rows.append(
                {
                    "setup": setup,
                    "routine": routine,
                    "seconds": ours,
                    "share": ours / lookup.get((setup, OVERALL), np.nan),
                    "baseline": base,
                    "baseline_seconds": theirs,
                    "acceleration": 1 - ours / theirs,
                    "speedup": theirs / ours,
                }
            )
    return pd.DataFrame(rows, columns=ROUTINE_COLUMNS)


def write_timing(
    timings_path: str | os.PathLike[str],
    runs_path: str | os.PathLike[str],
    setups: list[str],
    baselines: dict[str, str],
    out_dir: str | os.PathLike[str],
    digits: int = 4,
    references: dict[str, dict[str, Any]] | None = None,
) -> list[Path]:
    """timing, routines and epochs.{csv,md,tex}."""
    from ganstudy.stats.summary import write_table

    timings = pd.read_csv(timings_path)
    out = Path(out_dir)
    return (
        write_table(
            out,
            "epochs",
            epoch_table(pd.read_csv(runs_path), setups, references),
            "Average epoch time (training seconds per iteration) and final losses per set-up",
            False,
            digits,
        )
        + write_table(
            out,
            "timing",
            timing_table(timings, setups, baselines),
            "Training time per set-up; speed-up and parallel efficiency against its one-rank baseline",
            False,
            digits,
        )
        + write_table(
            out,
            "routines",
            routine_table(timings, setups, baselines),
            "Seconds per routine (slowest rank, mean over trials); acceleration and speed-up against the baseline",
            False,
            digits,
        )
    )
