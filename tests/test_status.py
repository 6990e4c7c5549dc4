"""``ganstudy status`` tells done, running, stopped, failed and waiting runs apart from the files of
results/<study>/ alone, on a real workflow run with a failing set-up, on real training jobs killed or
crashed, and on the files a running job leaves; it finds a study by its config file too."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import SCHEMA, shown_status, train_command, with_pythonpath
from ganstudy.config.validate import validate_study_config
from ganstudy.core.atomic import write_json
from ganstudy.errors import GanstudyError
from ganstudy.report.status import CONFIG_DEFAULTS, STALE_SECONDS, status_table, study_status, trial_status, write_plan
from ganstudy.study.folder import StudyFolder
from ganstudy.train.progress import HEARTBEAT, PROCESS, Progress, score_columns
from test_plugin_example import BROKEN
from test_workflow import snakemake


@pytest.mark.workflow
def test_status_of_a_real_run_names_the_failed_job_and_its_error(tmp_path, env):
    (tmp_path / "lab_networks.py").write_text(BROKEN)
    config = {
        "study": "tiny",
        "trials": 2,
        "classifier": {"epochs": 3, "min_accuracy": 0.0},
        "setups": {
            "good": {"mode": "single", "iterations": 3, "score_period": 0},
            "broken": {"mode": "single", "network": "lab_networks:FAILS", "iterations": 3, "score_period": 0},
        },
        "evaluation": {"samples": 100, "batch_size": 50, "isc_splits": 2},
    }
    # The trainings only: what status reads (a run is done once its run.json is there).
    runs = [f"results/tiny/runs/{setup}/trial{trial}/run.json" for setup in ("good", "broken") for trial in (0, 1)]
    done = snakemake(tmp_path, config, "--cores", "2", "--keep-going", *runs, env=with_pythonpath(env, tmp_path))
    assert done.returncode != 0
    study = tmp_path / "results" / "tiny"
    rows = {(row.setup, row.trial): row for row in study_status(study)}
    assert [rows[("good", t)].state for t in (0, 1)] == ["done", "done"]
    assert rows[("good", 0)].iteration == 3 and rows[("good", 0)].score == ""
    for trial in (0, 1):
        failed = rows[("broken", trial)]
        assert failed.state == "failed" and "ganstudy train: error: network 'lab_networks:FAILS'" in failed.note, failed
        assert f"logs/train/broken/trial{trial}.log" in failed.note
    shown = shown_status(tmp_path / "results", "tiny", env).splitlines()
    logs = f"training logs: {study / 'logs' / 'train'}/<set-up>/trial<k>.log"
    assert shown[-2:] == ["4 runs: 2 done, 2 failed", logs]
    # Run outside a batch scheduler: no job column.
    assert shown[0].split() == ["set-up", "trial", "state", "iteration", "latest", "score", "ETA", "note"]


LOG = """\
ganstudy per_class: 3 classes on 1 rank(s)
2026-11-25 10:00:00 grid 2x2: iteration 1/300 (0%), 1.5 s/it, ETA 7m29s; d_loss 1.3, g_loss 0.7, fid_best 40.1; slowest rank 1 (1.5 s)
2026-11-25 10:00:30 grid 2x2: iteration 21/300 (7%), 1.49 s/it, ETA 6m56s; d_loss 1.2, g_loss 0.8, fid_best 20.4; slowest rank 1 (1.4 s)
"""  # noqa: E501 (a training log's lines as written)


def test_status_reads_a_running_a_stopped_and_a_waiting_run_from_their_files(tmp_path):
    study = tmp_path / "results" / "s"
    write_plan(
        study, {"study": "s", "setups": {"grid": {"mode": "grid", "trials": None, "iterations": 300}}, "trials": 3}
    )
    log = study / "logs" / "train" / "grid"
    log.mkdir(parents=True)
    (log / "trial0.log").write_text(LOG)
    run = study / "runs" / "grid" / "trial0"
    run.mkdir(parents=True)
    # losses.csv as a live job leaves it: its last line may be torn.
    (run / "losses.csv").write_text("iteration,g_loss,fid_best\n1,0.7,40.1\n20,0.8,20.4\n21,0.8,19.9\n22,0.")
    (log / "trial1.log").write_text(
        LOG + "ganstudy train: grid 2x2 stopped by SIGUSR1 after iteration 22; its state is in x\n"
    )
    rows = study_status(study)
    assert [row.state for row in rows] == ["running", "stopped", "waiting"]
    running = rows[0]
    # Iteration and score of losses.csv's last whole row: the torn one does not count.
    assert (running.iteration, running.iterations, running.eta, running.score) == (21, 300, "6m56s", "fid_best 19.9")
    assert running.note.endswith("ago; slowest rank 1 (1.4 s)")
    assert "resumes when rerun" in rows[1].note and rows[2].iteration is None
    # The study's ETA: the running trial's 279 iterations left at 1.49 s, then the stopped and the waiting one
    # at that rate over 300 iterations each, one at a time as now: 415.7 + 2 x 447 s = 21 min 50 s.
    assert status_table(rows).splitlines()[-2:] == [
        "3 runs: 1 running, 1 stopped, 1 waiting",
        "study ETA: training ends in about 21m50s (1 trial(s) side by side as now; 2 more to train, each at its "
        "set-up's time per trial; then the scoring and tables)",
    ]
    assert trial_status(study, "grid", 5, 300, score_columns()).state == "waiting"


def test_status_names_each_trial_s_scheduler_job_from_its_log_or_its_record(tmp_path, monkeypatch, caplog):
    # Rank 0's line names the scheduler's job it runs in, as a Slurm or LSF job's environment says.
    monkeypatch.setenv("SLURM_JOB_ID", "1234567")
    with caplog.at_level(logging.INFO, logger="ganstudy.train"):
        Progress(tmp_path, 0).close()
    (line,) = [record.getMessage() for record in caplog.records if "training process" in record.getMessage()]
    assert PROCESS.match(f"2026-11-25 09:59:59 {line}").group(3) == "Slurm job 1234567"
    study = tmp_path / "results" / "s"
    write_plan(study, {"study": "s", "setups": {"grid": {"mode": "grid", "trials": 3, "iterations": 300}}, "trials": 3})
    log = study / "logs" / "train" / "grid"
    log.mkdir(parents=True)
    (log / "trial0.log").write_text(
        f"2026-11-25 09:59:59 {line.replace(socket.gethostname(), 'gpu-node-7')}\n{LOG}"
        "ganstudy train: grid 2x2 stopped by SIGUSR1 after iteration 22; its state is in x\n"
    )
    finished = study / "runs" / "grid" / "trial1"
    finished.mkdir(parents=True)
    (finished / "run.json").write_text(json.dumps({"scheduler_job": "LSF job 99"}))
    rows = study_status(study)
    assert [(row.state, row.job) for row in rows] == [
        ("stopped", "Slurm job 1234567"),
        ("done", "LSF job 99"),
        ("waiting", ""),
    ]
    table = status_table(rows).splitlines()
    assert table[0].split()[7] == "job" and "  Slurm job 1234567  " in table[1] and "  LSF job 99" in table[2]
    assert table[3].split() == ["grid", "2", "waiting", "-/300", "-"]


def test_a_scheduled_study_s_later_rounds_wait_on_a_look_and_are_not_needed_once_the_looks_end_it(tmp_path):
    study = tmp_path / "results" / "s"
    write_plan(
        study,
        {
            "study": "s",
            "setups": {"g": {"mode": "grid", "trials": None, "iterations": 5}},
            "trials": {"first": 2, "step": 1, "most": 4},
        },
    )
    for trial in (0, 1):
        write_json(study / "runs" / "g" / f"trial{trial}" / "run.json", {})
    rows = study_status(study)
    assert [(row.trial, row.state) for row in rows] == [(0, "done"), (1, "done"), (2, "waiting"), (3, "waiting")]
    assert rows[2].note == "a later round: trains only if a look leaves a comparison open"
    # The first look decided every comparison: the study ended at 2 trials per set-up.
    write_json(StudyFolder.at(study).decision(), {"trials": 2})
    rows = study_status(study)
    assert [row.state for row in rows[2:]] == ["not needed", "not needed"]
    assert status_table(rows).splitlines()[-1] == "4 runs: 2 done, 2 not needed"


def test_status_of_a_study_never_run_says_so(tmp_path):
    with pytest.raises(GanstudyError, match="plan.json is missing: the study has not been run yet"):
        study_status(tmp_path)


def study_with_one_run(tmp_path: Path, iterations: int = 300) -> tuple[Path, Path, Path]:
    """A planned study of one single-mode set-up "s" with one trial: its folder, the run's folder, its log."""
    study = tmp_path / "results" / "s"
    write_plan(
        study, {"study": "s", "setups": {"s": {"mode": "single", "trials": 1, "iterations": iterations}}, "trials": 1}
    )
    log = study / "logs" / "train" / "s" / "trial0.log"
    log.parent.mkdir(parents=True)
    return study, study / "runs" / "s" / "trial0", log


def start_training(train: Path, run: Path, log: Path, env: dict[str, str]) -> subprocess.Popen:
    """A real ``ganstudy train`` job of the study's set-up, its output going to its log as the workflow's does."""
    setup = validate_study_config(
        {"setups": {"s": {"iterations": 100000, "score_period": 0, "hidden_units": 64}}}, SCHEMA
    )["setups"]["s"]
    command = train_command(setup, train, run, seed=3) + ["--progress-seconds", "0.2"]
    with log.open("w") as handle:
        return subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)


@pytest.mark.workflow
def test_a_killed_training_job_is_failed_not_running(digits_dir, tmp_path, env):
    study, run, log = study_with_one_run(tmp_path, iterations=100000)
    job = start_training(digits_dir / "train.npz", run, log, env)
    try:
        deadline = time.monotonic() + 120
        while "pair: iteration " not in log.read_text():
            assert job.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.1)
        assert study_status(study)[0].state == "running"
    finally:
        job.kill()
        job.wait(timeout=60)
    (row,) = study_status(study)
    assert row.state == "failed" and f"process {job.pid} on this host is gone, without an error line" in row.note, row
    # The iteration is that of losses.csv's last row: the column and the table agree.
    assert row.iteration == int((run / "losses.csv").read_text().splitlines()[-1].split(",")[0])


@pytest.mark.workflow
def test_a_crashed_training_job_is_failed_with_its_exception_line(digits_dir, tmp_path, env):
    study, run, log = study_with_one_run(tmp_path)
    truncated = tmp_path / "train.npz"
    data = (digits_dir / "train.npz").read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    job = start_training(truncated, run, log, env)
    assert job.wait(timeout=120) != 0
    (row,) = study_status(study)
    # The split is named by ganstudy's own error line (a bare BadZipFile traceback before issue 45).
    assert row.state == "failed" and row.note.startswith(
        f"ganstudy train: error: prepared split {truncated} is unreadable (File is "
        "not a zip file); delete it and rerun prepare_dataset"
    ), log.read_text()[-2000:]


def test_a_log_ending_in_a_bare_exception_is_failed(tmp_path):
    study, _, log = study_with_one_run(tmp_path)
    log.write_text(
        LOG + 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n    assert False\n'
        "AssertionError\n"
    )
    (row,) = study_status(study)
    assert (row.state, row.iteration, row.note) == ("failed", 21, f"AssertionError (log {log})")


def test_a_signalled_job_killed_before_its_checkpoint_is_stopped(tmp_path):
    study, _, log = study_with_one_run(tmp_path)
    log.write_text(LOG + "ganstudy: SIGTERM received: stopping at the next checkpoint-safe point\n")
    (row,) = study_status(study)
    assert row.state == "stopped" and "SIGTERM received" in row.note


def test_a_job_on_another_host_runs_while_its_heartbeat_is_fresh(tmp_path):
    study, run, log = study_with_one_run(tmp_path)
    log.write_text("2026-11-25 10:00:00 training process 4242 on host elsewhere.example\n" + LOG)
    run.mkdir(parents=True)
    (run / HEARTBEAT).write_text("elsewhere.example 4242\n")
    assert study_status(study)[0].state == "running"
    stale = time.time() - STALE_SECONDS - 60
    os.utime(run / HEARTBEAT, (stale, stale))
    (row,) = study_status(study)
    assert row.state == "failed" and "no heartbeat from process 4242 on elsewhere.example since 11m" in row.note, row


def test_a_silent_log_without_a_process_is_failed_once_stale(tmp_path):
    study, _, log = study_with_one_run(tmp_path)
    log.write_text(LOG)
    stale = time.time() - STALE_SECONDS - 60
    os.utime(log, (stale, stale))
    (row,) = study_status(study)
    assert row.state == "failed" and "the log was last written 11m" in row.note, row


def test_iteration_and_score_come_from_the_same_row(tmp_path):
    study, run, log = study_with_one_run(tmp_path)
    log.write_text(LOG)
    run.mkdir(parents=True)
    # Scores come every few iterations: the last row has none, the score is the latest before it, marked so.
    (run / "losses.csv").write_text("iteration,g_loss,fid\n1,0.7,40.1\n2,0.8,\n3,0.8,\n4,0.")
    (row,) = study_status(study)
    assert (row.iteration, row.score) == (3, "fid 40.1 (at 1)")
    # Without a table (Snakemake deletes a failed job's outputs), both come from the last progress line.
    (run / "losses.csv").unlink()
    (row,) = study_status(study)
    assert (row.iteration, row.score) == (21, "fid_best 20.4")


def test_status_finds_a_study_by_its_config_file_from_any_folder_and_lists_the_runs_it_plans(tmp_path, env):
    study, _, log = study_with_one_run(tmp_path)
    log.write_text(LOG)
    (tmp_path / "config").mkdir()
    config = tmp_path / "config" / "s.yaml"
    config.write_text(yaml.safe_dump({"study": "s", "seed": 1, "trials": 1, "setups": {"s": {"iterations": 300}}}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def status(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess:
        return subprocess.run(["ganstudy", "status", *args], capture_output=True, text=True, env=env, cwd=cwd)

    # From the workflow's folder, from another one (the study is found above the config file), or told where.
    for shown, folder in (
        (status("config/s.yaml"), "results/s"),
        (status(str(config), cwd=elsewhere), study),
        (status("../config/s.yaml", "--directory", str(tmp_path), cwd=elsewhere), study),
    ):
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.splitlines()[0] == f"{folder}:" and shown.stdout.splitlines()[-3] == "1 runs: 1 running"
    # The runs of this config, whatever the plan that the study's last run (perhaps of another config) wrote.
    config.write_text(
        yaml.safe_dump({"study": "s", "trials": 1, "setups": {"s": {"iterations": 300}, "t": {"iterations": 10}}})
    )
    shown = status(str(config), cwd=elsewhere)
    assert shown.returncode == 0, shown.stderr
    # The waiting set-up has no trial to time yet: the study's ETA says so.
    assert shown.stdout.splitlines()[-3:-1] == [
        "2 runs: 1 running, 1 waiting",
        "study ETA: not yet known (no trial of t has trained long enough to time it)",
    ], shown.stdout
    shown = status(str(config), "--directory", str(elsewhere))
    assert shown.returncode != 0 and f"{elsewhere}/results/s/plan.json is missing" in shown.stderr
    config.write_text(yaml.safe_dump({"study": "s", "results_dir": "other"}))
    shown = status(str(config))
    assert shown.returncode != 0 and "error: other/s/plan.json is missing" in shown.stderr


def test_the_config_defaults_status_uses_are_the_schema_s():
    properties = yaml.safe_load(SCHEMA.read_text())["properties"]
    assert CONFIG_DEFAULTS == {key: properties[key]["default"] for key in CONFIG_DEFAULTS}
