"""``ganstudy status`` tells done, running, stopped, failed and waiting runs apart from the files of
results/<study>/ alone, on a real workflow run with a failing set-up and on the files a running job
leaves."""

from __future__ import annotations

import subprocess

import pytest

from ganstudy.errors import GanstudyError
from ganstudy.status import status_table, study_status, trial_status, write_plan
from conftest import with_pythonpath
from test_plugin_example import BROKEN
from test_workflow import snakemake


@pytest.mark.workflow
def test_status_of_a_real_run_names_the_failed_job_and_its_error(tmp_path, env):
    (tmp_path / "lab_networks.py").write_text(BROKEN)
    config = {
        "study": "tiny", "trials": 2,
        "classifier": {"epochs": 3, "min_accuracy": 0.0},
        "setups": {
            "good": {"mode": "single", "iterations": 3, "score_period": 0},
            "broken": {"mode": "single", "network": "lab_networks:FAILS", "iterations": 3, "score_period": 0},
        },
        "evaluation": {"samples": 100, "batch_size": 50, "isc_splits": 2},
    }
    done = snakemake(tmp_path, config, "--cores", "2", "--keep-going", env=with_pythonpath(env, tmp_path))
    assert done.returncode != 0
    study = tmp_path / "results" / "tiny"
    rows = {(row.setup, row.trial): row for row in study_status(study)}
    assert [rows[("good", t)].state for t in (0, 1)] == ["done", "done"]
    assert rows[("good", 0)].iteration == 3 and rows[("good", 0)].score == ""
    for trial in (0, 1):
        failed = rows[("broken", trial)]
        assert failed.state == "failed" and "ganstudy train: error: network 'lab_networks:FAILS'" in failed.note, failed
        assert f"logs/train/broken/trial{trial}.log" in failed.note
    shown = subprocess.run(["ganstudy", "status", "tiny", "--results-dir", str(tmp_path / "results")], capture_output=True,
                           text=True, env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-1] == "4 runs: 2 done, 2 failed"


LOG = """\
ganstudy per_class: 3 classes on 1 rank(s)
2026-11-25 10:00:00 grid 2x2: iteration 1/300 (0%), 1.5 s/it, ETA 7m29s; d_loss 1.3, g_loss 0.7, fid_best 40.1; slowest rank 1 (1.5 s)
2026-11-25 10:00:30 grid 2x2: iteration 21/300 (7%), 1.49 s/it, ETA 6m56s; d_loss 1.2, g_loss 0.8, fid_best 20.4; slowest rank 1 (1.4 s)
"""


def test_status_reads_a_running_a_stopped_and_a_waiting_run_from_their_files(tmp_path):
    study = tmp_path / "results" / "s"
    write_plan(study, "s", {"grid": {"mode": "grid", "trials": None, "iterations": 300}}, trials=3)
    log = study / "logs" / "train" / "grid"
    log.mkdir(parents=True)
    (log / "trial0.log").write_text(LOG)
    run = study / "runs" / "grid" / "trial0"
    run.mkdir(parents=True)
    # losses.csv as a live job leaves it: its last line may be torn.
    (run / "losses.csv").write_text("iteration,g_loss,fid_best\n1,0.7,40.1\n20,0.8,20.4\n21,0.8,19.9\n22,0.")
    (log / "trial1.log").write_text(LOG + "ganstudy train: grid 2x2 stopped by SIGUSR1 after iteration 22; its state is in x\n")
    rows = study_status(study)
    assert [row.state for row in rows] == ["running", "stopped", "waiting"]
    running = rows[0]
    assert (running.iteration, running.iterations, running.eta, running.score) == (21, 300, "6m56s", "fid_best 19.9 (at 21)")
    assert running.note.endswith("ago; slowest rank 1 (1.4 s)")
    assert "resumes when rerun" in rows[1].note and rows[2].iteration is None
    assert status_table(rows).splitlines()[-1] == "3 runs: 1 running, 1 stopped, 1 waiting"
    assert trial_status(study, "grid", 5, 300).state == "waiting"


def test_status_of_a_study_never_run_says_so(tmp_path):
    with pytest.raises(GanstudyError, match="plan.json is missing: the study has not been run yet"):
        study_status(tmp_path)
