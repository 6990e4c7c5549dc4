"""Live progress: a training job writes progress lines to its log and appends losses.csv while it runs,
also when its output is a file, at a readable cadence; the finished job's losses.csv is the whole
history."""

from __future__ import annotations

import csv
import logging
import subprocess
import time

import pytest

from conftest import SCHEMA, train_command
from ganstudy.config.validate import validate_study_config
from ganstudy.train.progress import LOGGER, LiveTable, TrainerReport


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_report_logs_the_first_and_last_iteration_and_otherwise_at_most_every_interval(tmp_path, caplog):
    clock, table = Clock(), LiveTable(tmp_path / "losses.csv")
    report = TrainerReport("pair", 10, ("d_loss", "g_loss", "fid"), table, {}, interval=30.0, clock=clock)
    report.restored(
        [
            {"iteration": 1, "d_loss": 1.0, "g_loss": 2.0, "fid": 50.0},
            {"iteration": 2, "d_loss": 0.9, "g_loss": 2.1, "fid": None},
        ]
    )
    with caplog.at_level(logging.INFO, logger=LOGGER.name):
        for iteration in range(3, 11):
            clock.now += 10.0  # 10 s per iteration
            report.row({"iteration": iteration, "d_loss": 0.5, "g_loss": 1.5, "fid": 12.5 if iteration == 6 else None})
    lines = [record.getMessage() for record in caplog.records]
    # Iteration 3 (the job's first), then one every 30 s (6, 9), then the last (10).
    assert [int(line.split("iteration ")[1].split("/")[0]) for line in lines] == [3, 6, 9, 10]
    assert lines[1] == "pair: iteration 6/10 (60%), 10 s/it, ETA 0m40s; d_loss 0.5, g_loss 1.5, fid 12.5"
    assert lines[-1].endswith("ETA 0m00s; d_loss 0.5, g_loss 1.5, fid 12.5 (at 6)")
    table.close()
    rows = list(csv.DictReader((tmp_path / "losses.csv").open()))
    assert (
        [row["iteration"] for row in rows] == [str(i) for i in range(1, 11)]
        and rows[1]["fid"] == ""
        and rows[5]["fid"] == "12.5"
    )


def test_a_report_names_hours_in_its_eta_and_passes_a_note(caplog):
    clock = Clock()
    report = TrainerReport("grid 2x2", 10000, ("fid_best",), None, {}, interval=30.0, clock=clock)
    report.restored([])
    with caplog.at_level(logging.INFO, logger=LOGGER.name):
        for iteration, seconds in ((1, 12), (2, 12), (3, 24)):
            clock.now += seconds
            report.row({"iteration": iteration, "fid_best": 41.0 - iteration}, "slowest rank 1 (2.5 s)")
    # 48 s for 3 iterations: 16 s/it, 9,997 to go.
    assert [record.getMessage() for record in caplog.records] == [
        "grid 2x2: iteration 1/10000 (0%), 12 s/it, ETA 33h19m; fid_best 40; slowest rank 1 (2.5 s)",
        "grid 2x2: iteration 3/10000 (0%), 16 s/it, ETA 44h25m; fid_best 38; slowest rank 1 (2.5 s)",
    ]


@pytest.mark.workflow
def test_a_running_job_s_log_shows_progress_and_its_losses_csv_grows_before_it_ends(digits_dir, tmp_path, env):
    setup = validate_study_config(
        {"setups": {"s": {"iterations": 100, "score_period": 0, "hidden_units": 64}}}, SCHEMA
    )["setups"]["s"]
    out = tmp_path / "run"
    command = train_command(setup, digits_dir / "train.npz", out, seed=3) + ["--progress-seconds", "0.5"]
    log = tmp_path / "train.log"
    with log.open("w") as handle:
        job = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
        seen_lines, seen_rows = [], []
        while job.poll() is None:
            time.sleep(0.5)
            if (out / "losses.csv").is_file():
                # Whole lines only: a reader ignores a last line without its newline.
                text = (out / "losses.csv").read_text()
                seen_rows.append(text.count("\n") - 1)
            seen_lines.append(sum("pair: iteration " in line for line in log.read_text().splitlines()))
    assert job.returncode == 0, log.read_text()[-2000:]
    # While the job ran, the log had progress lines and losses.csv grew.
    assert max(seen_lines) >= 2 and len([n for n in seen_rows if 0 < n < 100]) >= 2 and seen_rows == sorted(seen_rows)
    text = log.read_text()
    assert "pair: iteration 1/100 (1%)" in text and "pair: iteration 100/100 (100%)" in text and " s/it, ETA " in text
    rows = list(csv.DictReader((out / "losses.csv").open()))
    assert [int(row["iteration"]) for row in rows] == list(range(1, 101))
