"""A study whose trials are a schedule, run by Snakemake: the first round only in a dry-run, a look that decides
and ends the study, an edit of the level that reruns the look and trains only the next round's trials, and
the tables and page that say what the looks decided."""

from __future__ import annotations

import json
import os
import subprocess

import pandas as pd
import pytest

from conftest import planned_jobs
from test_workflow import report_captions, snakemake

pytestmark = pytest.mark.workflow

# A trained generator against one of a single iteration: every trial of "good" scores a far lower FID.
SCHEDULED = {
    "study": "scheduled",
    "trials": {"first": 2, "step": 1, "most": 3},
    "classifier": {"epochs": 3, "min_accuracy": 0.0},
    "setups": {"good": {"loss": "bce", "iterations": 60}, "bad": {"loss": "bce", "iterations": 1}},
    "evaluation": {"samples": 100, "batch_size": 50, "isc_splits": 2, "metrics": ["fid"]},
    # At 2 against 2 trials the exact p is at least 1/3: only a level of 0.5 lets the first look decide.
    "statistics": {"alpha": 0.5},
}


def trained(log: str) -> list[str]:
    """The training runs a Snakemake log shows started, as set-up/trial."""
    return sorted(f"{job['wildcards']}" for job in planned_jobs(log))


def test_a_scheduled_study_stops_at_the_look_that_decides_and_an_edit_adds_only_the_next_round(tmp_path, env):
    dry = snakemake(tmp_path, SCHEDULED, "-n", env=env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "trials: a schedule (looks at 2, 3 trials per set-up)" in dry.stdout + dry.stderr
    assert trained(dry.stdout + dry.stderr) == [f"setup={s}, trial={t}" for s in ("bad", "good") for t in (0, 1)]

    done = snakemake(tmp_path, SCHEDULED, "--cores", "2", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    study = tmp_path / "results" / "scheduled"
    look = json.loads((study / "looks" / "look1.json").read_text())
    assert look["more"] is False and look["decisions"][0]["decided_at"] == 1
    assert not (study / "runs" / "good" / "trial2").exists() and not (study / "looks" / "look2.json").exists()
    scores = pd.read_csv(study / "scores.csv")
    assert sorted(set(zip(scores.setup, scores.trial))) == [(s, t) for s in ("bad", "good") for t in (0, 1)]
    looks = pd.read_csv(study / "tables" / "looks.csv")
    assert list(looks.decided_at.astype(str)) == ["1"] and list(looks.trials) == [2]
    pairs = pd.read_csv(study / "tables" / "pairs_fid.csv")
    # The pairs table's p_holm is the design's, scaled to alpha: the looks table's.
    assert pairs.p_holm.iloc[0] == pytest.approx(looks.p_design_holm.iloc[0]) and pairs.p_holm.iloc[0] < 0.5
    page = (study / "summary.md").read_text()
    assert "**good** has the best FID" in page and "1 look(s) taken" in page and "design p = " in page
    # A look's arguments file as an older release wrote it (the schedule as FIRST,STEP,MOST) is the same look:
    # nothing is planned, and a run rewrites it keeping its date.
    arguments = study / "arguments" / "look" / "look1.args"
    current, dated = arguments.read_text(), arguments.stat().st_mtime_ns
    assert '{"first": 2, "step": 1, "most": 3}' in current
    arguments.write_text(current.replace('{"first": 2, "step": 1, "most": 3}', "2,1,3"))
    os.utime(arguments, ns=(dated, dated))
    for options in (["-n"], ["--cores", "1"]):
        same = snakemake(tmp_path, SCHEDULED, *options, env=env)
        assert "Nothing to be done" in same.stdout + same.stderr, (same.stdout + same.stderr)[-2000:]
    assert arguments.read_text() == current and arguments.stat().st_mtime_ns == dated
    # The statistics step by hand, as the guide shows it: with the study's looks it gives the study's design p;
    # without them it says that its p-values are a fixed design's.
    by_hand = ["ganstudy", "stats", "--scores", str(study / "scores.csv"), "--setups", "good", "bad"]
    by_hand += ["--metrics", "fid", "--settings", '{"alpha": 0.5}']
    for looked, out in (
        ([], tmp_path / "fixed"),
        (["--looks", str(study / "looks" / "decision.json")], tmp_path / "d"),
    ):
        done = subprocess.run([*by_hand, *looked, "--out-dir", str(out)], capture_output=True, text=True, env=env)
        assert done.returncode == 0 and f"the tables of fid are in {out}" in done.stdout, done.stderr[-2000:]
        assert ("without --looks" in done.stderr) == (not looked), done.stderr
    assert pd.read_csv(tmp_path / "d" / "pairs_fid.csv").p_holm.iloc[0] == pytest.approx(pairs.p_holm.iloc[0])

    # The level of the family tightened: the look is redone, leaves the comparison open, and the study trains
    # the third trial of each set-up only, then ends at the schedule's last look undecided.
    stricter = {**SCHEDULED, "statistics": {"alpha": 0.05}}
    again = snakemake(tmp_path, stricter, "--cores", "2", env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert trained(again.stdout + again.stderr) == ["setup=bad, trial=2", "setup=good, trial=2"]
    last = json.loads((study / "looks" / "look2.json").read_text())
    assert last["more"] is False and last["decisions"][0]["decided_at"] is None and last["trials"] == 3
    looks = pd.read_csv(study / "tables" / "looks.csv")
    assert list(looks.decided_at.astype(str)) == ["–"] and list(looks.trials) == [3]
    assert len(pd.read_csv(study / "scores.csv").drop_duplicates(["setup", "trial"])) == 6
    page = (study / "summary.md").read_text()
    assert "2 look(s) taken" in page and "reached with 1 open" in page
    assert "(raise the schedule's most, trials.most: `ganstudy validate-config` says how many)" in page
    nothing = snakemake(tmp_path, stricter, "-n", env=env)
    assert "Nothing to be done" in nothing.stdout + nothing.stderr, nothing.stdout[-2000:]
    # The HTML report has the looks table, with its own caption, beside every other table and figure.
    captions = report_captions(tmp_path, stricter, env)
    assert "group-sequential Holm" in captions["results/scheduled/tables/looks.md"]


# Three set-ups: "good" beats both others at the first look (3 against 3, every trial better, decided at the
# Holm level of 0.5 over 3 pairs); the two one-iteration set-ups stay open between themselves.
THREE = {
    **SCHEDULED,
    "study": "three",
    "trials": {"first": 3, "step": 1, "most": 4},
    "setups": {**SCHEDULED["setups"], "worse": {"loss": "bce", "iterations": 1}},
}


def test_a_set_up_whose_comparisons_are_decided_stops_taking_rounds_and_the_tables_page_and_status_say_so(
    tmp_path, env
):
    from ganstudy.report.status import study_status

    done = snakemake(tmp_path, THREE, "--cores", "2", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    study = tmp_path / "results" / "three"
    look = json.loads((study / "looks" / "look1.json").read_text())
    assert look["more"] is True, look
    assert look["setups"]["good"] == {"trials": 3, "stopped_at": 1, "why": "every comparison decided"}
    assert "stopped_at" not in look["setups"]["bad"] and "stopped_at" not in look["setups"]["worse"]
    # The second round trains the two set-ups still open, and not good.
    assert trained(done.stdout + done.stderr).count("setup=good, trial=3") == 0
    scores = pd.read_csv(study / "scores.csv").drop_duplicates(["setup", "trial"])
    assert sorted(scores.groupby("setup").trial.max().items()) == [("bad", 3), ("good", 2), ("worse", 3)]
    last = json.loads((study / "looks" / "look2.json").read_text())
    by_pair = {frozenset((d["setup_a"], d["setup_b"])): d for d in last["decisions"]}
    # good's comparisons keep the first look's 3 trials each; bad against worse takes both rounds.
    assert len(by_pair[frozenset(("good", "bad"))]["nominal"]) == 1
    assert len(by_pair[frozenset(("bad", "worse"))]["nominal"]) == 2
    said = "good stopped taking rounds after look 1 (every comparison decided) at 3 trials"
    assert said in (study / "tables" / "looks.md").read_text() and said in (study / "summary.md").read_text()
    rows = {(row.setup, row.trial): row for row in study_status(study)}
    assert rows[("good", 3)].state == "not needed"
    assert rows[("good", 3)].note == "good stopped taking rounds at look 1: every comparison decided"
    nothing = snakemake(tmp_path, THREE, "-n", env=env)
    assert "Nothing to be done" in nothing.stdout + nothing.stderr, nothing.stdout[-2000:]
