"""Each workflow step's arguments come from its parser (ganstudy.cli.step_arguments): refused where a rule
gives a name the step does not take or leaves out one it requires; and for every job of every shipped
study's plan, the arguments file its rule writes parses with its step's parser and names the rule's own
inputs and outputs, and every output."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from ganstudy.cli import build_parser
from ganstudy.cli.main import step_parsers
from ganstudy.cli.options import StageSpec
from ganstudy.cli.step_arguments import step_arguments
from ganstudy.errors import GanstudyError

STUDIES = [REPO / "config" / "config.yaml", *sorted((REPO / "config" / "studies").glob("*.yaml"))]
# A step's folders that are none of its rule's files on purpose: a training run's checkpoints lie outside its
# declared outputs, so that Snakemake does not delete them when the job fails (StudyPlan.checkpoint_dir).
OUTSIDE = {("train", "checkpoint_dir")}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ganstudy demo")
    parser.add_argument("job")
    parser.add_argument("--run-record", required=True)
    parser.add_argument("--setups", nargs="+")
    parser.add_argument("--baselines", nargs="*", default=[])
    parser.add_argument("--trial", type=int)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, required=True)
    return parser


def test_arguments_follow_the_rule_s_order_and_the_parser_s_flags():
    values = {"run_record": "r/run.json", "job": "j.json", "setups": ["a", "b"], "trial": 0, "quick": True}
    lines = step_arguments("demo", _parser(), values, on_the_command_line=["--threads"])
    assert lines == ["--run-record", "r/run.json", "j.json", "--setups", "a", "b", "--trial", "0", "--quick"]
    # The lines parse back to the values (the shell line adds --threads).
    parsed = _parser().parse_args([*lines, "--threads", "2"])
    assert (parsed.run_record, parsed.job, parsed.setups, parsed.trial, parsed.quick) == (
        "r/run.json",
        "j.json",
        ["a", "b"],
        0,
        True,
    )


def test_left_out_values_and_an_empty_list_of_none_or_more():
    # None, False and an empty list of an input a study does not read: left out; "--baselines" alone: none.
    values = {"job": "j", "run_record": "r", "setups": [], "trial": None, "quick": False, "baselines": []}
    assert step_arguments("demo", _parser(), values, ["--threads"]) == ["j", "--run-record", "r", "--baselines"]


def test_a_name_the_step_does_not_take_is_refused_with_the_names_it_takes():
    with pytest.raises(
        GanstudyError, match=r"ganstudy demo takes no run_recrd: its arguments are job, run_record, setups"
    ):
        step_arguments("demo", _parser(), {"job": "j", "run_recrd": "r"}, ["--threads"])


def test_a_required_argument_left_out_is_refused():
    with pytest.raises(
        GanstudyError, match=r"ganstudy demo requires --run-record, --threads, which the workflow does not give"
    ):
        step_arguments("demo", _parser(), {"job": "j"})
    with pytest.raises(GanstudyError, match=r"requires job, which"):
        step_arguments("demo", _parser(), {"run_record": "r"}, ["--threads"])


def test_an_argument_given_twice_or_with_too_many_values_is_refused():
    with pytest.raises(GanstudyError, match=r"--threads given both in the rule's shell line and its arguments"):
        step_arguments("demo", _parser(), {"job": "j", "run_record": "r", "threads": 2}, ["--threads"])
    with pytest.raises(GanstudyError, match=r"run_record takes one value, the workflow gives 2"):
        step_arguments("demo", _parser(), {"job": "j", "run_record": ["r", "s"]}, ["--threads"])


def test_every_workflow_step_s_parser_is_found_by_its_name():
    parsers = step_parsers()
    for step in ("prepare", "train", "evaluate", "look", "stats", "summary", "montage"):
        assert parsers[step].prog.endswith(f"ganstudy {step}")


@pytest.fixture(scope="module")
def planned(tmp_path_factory, env) -> dict[Path, list[dict]]:
    """Every shipped study's plan, each in a folder of its own (tests/planned_jobs.py), in one process."""
    root = tmp_path_factory.mktemp("planned")
    folders = {study: root / study.stem for study in STUDIES}
    out = root / "jobs.json"
    pairs = [str(part) for study, folder in folders.items() for part in (study, folder)]
    done = subprocess.run(
        [sys.executable, str(REPO / "tests" / "planned_jobs.py"), str(out), str(REPO / "Snakefile"), *pairs],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {folders[Path(study)]: jobs for study, jobs in json.loads(out.read_text()).items()}


def _named(value) -> list[str]:
    """The paths and other values an argument holds, as text."""
    if isinstance(value, StageSpec):
        return [value.path]
    if isinstance(value, list):
        return [item for entry in value for item in _named(entry)]
    return [value] if isinstance(value, str) else []


def _step_command(job: dict) -> tuple[str, list[str]]:
    """The step a job's shell line runs and its arguments there, up to the log's redirection."""
    words = shlex.split(job["shell"])
    start = words.index("ganstudy") + 1
    end = words.index(">") if ">" in words else len(words)
    return words[start], words[start + 1 : end]


def _expanded(words: list[str], job: dict) -> list[str]:
    """``words`` with the arguments file read (``@FILE``, as the step reads it), and a file of runs that rule
    decision writes once the looks are taken (``@listed`` inside it) checked to be the job's input ``listed``
    and stood in for by one run's path (the looks' own tests check what it lists)."""
    expanded = []
    for word in words:
        if not word.startswith("@"):
            expanded.append(word)
            continue
        assert word[1:] == job["input"]["arguments"][0], word
        for line in Path(word[1:]).read_text().splitlines():
            if line.startswith("@"):
                assert line[1:] in job["input"]["listed"], (job["rule"], line)
                expanded.append("listed-by-rule-decision")
            else:
                expanded.append(line)
    return expanded


@pytest.mark.workflow
@pytest.mark.parametrize("study", STUDIES, ids=lambda path: path.stem)
def test_every_job_s_arguments_parse_with_its_step_and_name_its_own_files(study, planned):
    folder = next(folder for folder in planned if folder.name == study.stem)
    jobs = [job for job in planned[folder] if job["shell"] and "@results/" in job["shell"]]
    assert jobs, "the plan has jobs with arguments files"
    with contextlib.chdir(folder):
        for job in jobs:
            step, words = _step_command(job)
            arguments = _expanded(words, job)
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr):
                try:
                    parsed = build_parser().parse_args([step, *arguments])
                except SystemExit:
                    pytest.fail(f"rule {job['rule']}: ganstudy {step} {arguments}: {stderr.getvalue()}")
            study_folder = job["input"]["arguments"][0].split("/arguments/")[0]
            files = set(job["inputs"]) | set(job["output"])
            folders = {os.path.dirname(path) for path in files}
            named = {
                path: name
                for name, value in vars(parsed).items()
                if name not in ("handler", "command")
                for path in _named(value)
                if path == study_folder or path.startswith(study_folder + "/")
            }
            strays = [
                path
                for path, name in named.items()
                if path not in files and os.path.normpath(path) not in folders and (job["rule"], name) not in OUTSIDE
            ]
            assert not strays, (
                f"rule {job['rule']}: its arguments name {strays}, which are none of its inputs or outputs"
            )
            unnamed = [
                path
                for path in job["output"]
                if path not in named and not any(path.startswith(os.path.normpath(name) + "/") for name in named)
            ]
            assert not unnamed, f"rule {job['rule']}: its outputs {unnamed} are not in its arguments"
