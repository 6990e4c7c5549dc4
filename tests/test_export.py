"""ganstudy export's reading of a study (the exports themselves are read back by MLflow and TensorBoard in
test_living_study, on a finished study)."""

import json
from pathlib import Path

import pytest

from ganstudy.errors import GanstudyError
from ganstudy.report.export import finished_runs
from ganstudy.study.folder import StudyFolder


def test_finished_trials_of_the_plan_with_per_class_series_and_flat_settings(tmp_path):
    (tmp_path / "plan.json").write_text(
        json.dumps({"study": "s", "setups": {"pc": {"mode": "per_class", "trials": 2, "iterations": 2}}})
    )
    run = tmp_path / "runs" / "pc" / "trial0"
    run.mkdir(parents=True)
    (run / "run.json").write_text(
        json.dumps(
            {
                "settings": {"lr": 0.0002, "grid": {"shape": "2x2"}, "betas": [0.5, 0.999], "tf": None},
                "study_seed": 7,
                "world_size": 2,
            }
        )
    )
    (run / "losses.csv").write_text(
        "class,iteration,g_loss,d_loss,fid\n0,1,1.5,0.5,\n0,2,1.25,0.75,3.0\n3,1,2.0,1.0,nan\n"
    )
    study, runs, missing = finished_runs(tmp_path)
    assert study == "s" and [r.key for r in runs] == ["pc/trial0"] and missing == ["pc/trial1: not finished, left out"]
    # Each class's columns under its own name; empty and NaN cells are no points.
    assert sorted(runs[0].series()) == sorted(
        [
            ("class0/g_loss", 1, 1.5),
            ("class0/d_loss", 1, 0.5),
            ("class0/g_loss", 2, 1.25),
            ("class0/d_loss", 2, 0.75),
            ("class0/fid", 2, 3.0),
            ("class3/g_loss", 1, 2.0),
            ("class3/d_loss", 1, 1.0),
        ]
    )
    params = runs[0].params()
    assert (
        params["settings.lr"] == 0.0002
        and params["settings.grid.shape"] == "2x2"
        and params["settings.betas"] == "[0.5, 0.999]"
    )
    assert params["settings.tf"] == "null" and params["study_seed"] == 7 and runs[0].scores() == {}
    # A retrained trial (its losses changed) has another fingerprint.
    before = runs[0].fingerprint()
    (run / "losses.csv").write_text("iteration,g_loss\n1,1.0\n")
    assert finished_runs(tmp_path)[1][0].fingerprint() != before


def test_a_folder_the_workflow_never_ran_is_named(tmp_path):
    with pytest.raises(GanstudyError, match="plan.json is missing: .* is not a study the workflow has run"):
        finished_runs(tmp_path)


def test_a_scheduled_study_s_trials_past_the_look_that_ended_it_are_not_missing(tmp_path):
    plan = {"study": "s", "setups": {"g": {"mode": "grid", "trials": 4, "iterations": 2}}, "looks": [2, 3, 4]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    for trial in (0, 1):
        (tmp_path / "runs" / "g" / f"trial{trial}").mkdir(parents=True)
        (tmp_path / "runs" / "g" / f"trial{trial}" / "run.json").write_text("{}")
    # While the looks go on, the later rounds' trials are not finished yet.
    assert finished_runs(tmp_path)[2] == ["g/trial2: not finished, left out", "g/trial3: not finished, left out"]
    decision = Path(StudyFolder.at(tmp_path).decision())
    decision.parent.mkdir()
    decision.write_text(json.dumps({"trials": 2}))
    assert [r.key for r in finished_runs(tmp_path)[1]] == ["g/trial0", "g/trial1"] and finished_runs(tmp_path)[2] == []
