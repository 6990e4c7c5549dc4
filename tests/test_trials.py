"""A study's trials as one object (ganstudy.study.trials): the schedule's one parser, its JSON across processes,
each set-up's trials from the config, and a look's arguments file of an older release recognised."""

from __future__ import annotations

import argparse
import os

import pytest

from ganstudy.cli.options import schedule_argument
from ganstudy.plan.study_files import ArgumentsFiles, schedule_as_text
from ganstudy.study.trials import Schedule, StudyTrials


def test_a_schedule_crosses_a_process_as_json_and_parses_back_in_either_form():
    schedule = Schedule(8, 4, 24)
    assert schedule.to_json() == '{"first": 8, "step": 4, "most": 24}'
    assert Schedule.parse(schedule.to_json()) == schedule == Schedule.parse("8, 4,24")
    assert schedule.looks == (8, 12, 16, 20, 24) and schedule.rounds() == (8, 4, 4, 4, 4)
    # The last round is what is left to most; the fixed design looks once, at most.
    assert Schedule(8, 4, 22).looks == (8, 12, 16, 20, 22) and schedule.fixed().looks == (24,)
    # comb(16, 8) * comb(4, 2) ways of relabelling 8/2/10's trials within its two rounds.
    assert Schedule(8, 2, 10).relabellings() == 12870 * 6


@pytest.mark.parametrize(
    "text, says",
    [
        ("8,4", "'8,4' is not a schedule: FIRST,STEP,MOST"),
        ("8,4,24,2", "is not a schedule"),
        ("8,x,24", "is not a schedule"),
        ('{"first": 8, "most": 24}', "is not a schedule"),
        ('{"first": 8, "step": 4, "most": 24, "last": 1}', "is not a schedule"),
        ("24,4,8", "needs 2 <= first <= most and step >= 1"),
        ("1,1,4", "needs 2 <= first <= most"),
        ("8,0,24", "step >= 1"),
    ],
)
def test_a_bad_schedule_is_refused_with_what_it_needs(text, says):
    with pytest.raises(ValueError) as raised:
        Schedule.parse(text)
    assert says in str(raised.value)
    with pytest.raises(argparse.ArgumentTypeError) as argparse_raised:
        schedule_argument(text)
    assert says in str(argparse_raised.value)


def test_each_set_up_takes_its_own_trials_or_the_study_s():
    config = {"trials": {"first": 4, "step": 2, "most": 8}, "setups": {"a": {"trials": None}, "b": {"trials": 3}}}
    trials = StudyTrials.of(config)
    assert trials.per_setup == {"a": 8, "b": 3} and trials.schedule == Schedule(4, 2, 8)
    fixed = StudyTrials.of({"trials": 5, "setups": {"a": {"trials": None}}})
    assert fixed.per_setup == {"a": 5} and fixed.schedule is None


def test_a_look_s_arguments_file_that_gave_the_schedule_as_text_is_rewritten_and_keeps_its_date(tmp_path):
    said: list[str] = []
    files = ArgumentsFiles(tmp_path / "arguments", made_before=True)
    schedule = Schedule(8, 2, 10)
    arguments = ["--setups", "a", "b", "--schedule", schedule.to_json(), "--look", 1, "--out", "look1.json"]
    path = files.path("look/look1")
    path.parent.mkdir(parents=True)
    older = "--setups\na\nb\n--schedule\n8,2,10\n--look\n1\n--out\nlook1.json\n"
    path.write_text(older)
    os.utime(path, (1000, 1000))
    files.record("look/look1", arguments)
    assert not files.stale
    files.write_all(said.append)
    assert path.read_text() == files.contents[path] and path.stat().st_mtime == 1000
    assert said == [f"rewrote {path} in the current form: its schedule is given as JSON now, nothing to redo"]
    # Another schedule, or another argument beside it: another look, which is redone.
    for changed in (older.replace("8,2,10", "8,2,12"), older.replace("--look\n1", "--look\n2")):
        assert not schedule_as_text(changed, files.contents[path]), changed
    assert not schedule_as_text(older.replace("8,2,10", "8,2"), files.contents[path])
