"""A study a lab lives with (issue 45): it begins as docs/first-hour.md shows, whose commands run here on the
shrunken default study and print what the page says; then every edit reruns exactly what it changes, with
or without Snakemake's metadata; a run that must be redone is archived, not deleted; one run per study at a
time; the profile's site survives --config; bad names, files and rank counts stop the plan before any job."""

import functools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

import regenerate_docs
import report_screen
import walkthrough
from conftest import REPO, planned_jobs, require_browser
from ganstudy.data.arrays import file_digest
from ganstudy.errors import GanstudyError
from ganstudy.plan.changed_runs import differences
from ganstudy.plan.study_lock import acquire, release
from ganstudy.plan.where_jobs_run import WHOLE_PLAN
from ganstudy.study.folder import StudyFolder

pytestmark = pytest.mark.workflow


def shrunken_default() -> dict:
    """The default study (config/config.yaml) at a size the suite can afford: its study and set-up names,
    2 trials of 4 iterations, 100 samples scored."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config.update(
        trials=2,
        classifier={"epochs": 2, "min_accuracy": 0.0},
        evaluation={**config["evaluation"], "samples": 100, "batch_size": 50, "isc_splits": 2},
    )
    for setup in config["setups"].values():
        setup.update(iterations=4, checkpoint_period=2, hidden_units=32)
        setup["grid"].update(fitness_sample_size=50, score_sample_size=50)
    return config


# The study as the walk-through (docs/first-hour.md) leaves it: the shrunken default study with its edits.
LIVING = functools.reduce(walkthrough.merged, walkthrough.config_edits(), shrunken_default())
STUDY = LIVING["study"]
SMALL, LARGE = LIVING["setups"]  # the 1x1 and the 2x2 grid


def snakemake(
    workdir: Path, config: dict | str, *args: str, env: dict, sort_keys: bool = True, timeout: int = 900
) -> subprocess.CompletedProcess:
    """Snakemake on ``workdir`` with ``config`` (a mapping, or YAML text as a user wrote it)."""
    text = config if isinstance(config, str) else yaml.safe_dump(config, sort_keys=sort_keys)
    (workdir / "study.yaml").write_text(text)
    command = [
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--configfile",
        str(workdir / "study.yaml"),
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)


def said(done: subprocess.CompletedProcess) -> str:
    return done.stdout + done.stderr


def planned(done: subprocess.CompletedProcess) -> dict[str, int]:
    """Rule -> jobs of a dry-run's plan; {} for "Nothing to be done"."""
    assert done.returncode == 0, done.stderr[-3000:]
    if "Job stats:" not in done.stdout:
        assert "Nothing to be done" in done.stdout + done.stderr, done.stdout[-2000:]
        return {}
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", said(done).split("Job stats:")[1], re.MULTILINE))
    return {rule: int(count) for rule, count in jobs.items() if rule != "total"}


@pytest.fixture(scope="session")
def first_hour(tmp_path_factory, env) -> list[walkthrough.Done]:
    """docs/first-hour.md's commands run in order on the shrunken default study, in a checkout of its own
    (and the cluster's plan in a fresh one): the finished study that the tests below edit."""
    folder = tmp_path_factory.mktemp("first-hour")
    # One job at a time: the shrunken trials take seconds, and two side by side can both end between two
    # looks of the status beside the run on a loaded machine; one by one, a trial is done while the next runs.
    done = walkthrough.walk(folder / "checkout", folder / "cluster", shrunken_default(), env, cores=1)
    for step in done:
        assert step.returncode == 0, f"{step.step.text.strip()} failed:\n{step.output[-3000:]}"
    return done


@pytest.fixture(scope="session")
def living(first_hour) -> Path:
    """The finished study the walk-through leaves (2 set-ups x 2 trials), shared by the tests that plan on or
    copy it."""
    workdir = first_hour[0].folder
    assert yaml.safe_load((workdir / "config" / "config.yaml").read_text()) == LIVING
    return workdir


def test_the_first_hour_walk_through_prints_what_it_shows(first_hour):
    # Each command ran (the fixture checks that) and printed its excerpt's lines, numbers aside.
    assert [step.step.text.split()[0] for step in first_hour] == [
        "make",
        "ganstudy",
        "make",
        "ganstudy",
        "cat",
        "make",
        "make",
        "SBATCH_ACCOUNT=mylab",
    ]
    missing = {step.step.text.strip(): step.missing for step in first_hour if step.missing}
    assert not missing, "\n\n".join(
        f"{command}: not printed:\n" + "\n".join(lines) for command, lines in missing.items()
    )
    assert all(step.step.excerpt for step in first_hour if step.step.text.strip() != "make setup")
    # The page as `python tests/walkthrough.py` rewrites it from a run (here the shrunken one): only numbers and
    # verdict words change.
    page = walkthrough.DOC.read_text()
    again = walkthrough.regenerated(page, first_hour, [SMALL, LARGE])
    assert again != page and list(map(walkthrough.shape, again.splitlines())) == list(
        map(walkthrough.shape, page.splitlines())
    )
    # The answer and the report land in the study's folder; the cluster's plan found the account and partition.
    study = first_hour[0].folder / "results" / STUDY
    assert (study / "summary.md").is_file() and (study / "report.html").is_file()
    assert "for the scheduler" not in first_hour[-1].output


def _report_variable(report: str, name: str):
    """A JSON variable of Snakemake's HTML report (``var <name> = ...;``, one line, after the libraries')."""
    return json.loads(re.findall(rf"^\s*var {name} = (.*);$", report, re.MULTILINE)[-1])


def test_the_report_opens_on_the_answer_and_holds_each_table_once(first_hour):
    study = first_hour[0].folder / "results" / STUDY
    report = (study / "report.html").read_text()
    page = (study / "summary.md").read_text()
    assert f"<title>{STUDY}: the study's report</title>" in report and "Snakemake Report</title>" not in report
    description = _report_variable(report, "workflow_desc")
    # The answer's sentence (the page's second paragraph, bold names and all) and the primary box plot inline.
    sentence = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", page.split("\n\n")[1].splitlines()[0])
    assert sentence[:60] in description, description[:2000]
    assert description.count("data:image/png;base64,") == 2 and "<table>" in description
    # With metadata the report opens on its description, not on the rule graph.
    assert _report_variable(report, "metadata") == {"set-ups": 2, "runs scored": 4, "metrics": 2}
    results = json.dumps(_report_variable(report, "results"))
    assert "pairs_fid.md" in results and "pairs_fid.csv" not in results and ".tex" not in results
    printed = next(step.output for step in first_hour if step.step.text.strip() == "make report")
    assert "Missing metadata" not in printed, printed[-2000:]
    size = int(re.search(r"report\.html \((\d+) KB\)", printed).group(1))
    assert size == (study / "report.html").stat().st_size // 1024


def test_the_report_s_first_screen_shows_the_answer_and_its_figures_in_a_browser(first_hour, tmp_path):
    # Headless Chromium lays out the report as a reader's browser does (tests/report_screen.py).
    if report_screen.chromium() is None:
        require_browser("no Chromium to lay the report out: apt-get install chromium")
    study = first_hour[0].folder / "results" / STUDY
    layout = report_screen.first_screen(study / "report.html", (1280, 800), tmp_path / "first-screen.png")
    bottom = layout["window"]["height"]
    assert layout["found"], "the report's first page is not the answer"
    # The title and the answer's sentence from the window's top, the primary metric's figures below them, all of
    # them on the first screen.
    assert 0 <= layout["title"]["top"] < layout["answer"]["top"] < layout["answer"]["bottom"] <= bottom, layout
    assert [figure["alt"] for figure in layout["figures"]] == ["box_fid", "cost_fid"], layout
    assert all(
        layout["answer"]["bottom"] < figure["top"] and figure["bottom"] <= bottom for figure in layout["figures"]
    )
    # One scroll bar, the report's own, for the whole page: none inside the answer, none around it but that.
    assert not [box for box in layout["scrolling"] if box["inside_answer"]], layout["scrolling"]
    assert len([box for box in layout["scrolling"] if box["holds_answer"]]) <= 1, layout["scrolling"]
    # Inline code (a command in the answer's advice, a table's path) as code, without literal backticks.
    assert layout["before_code"] and all(content in ("none", "normal") for content in layout["before_code"])
    assert (tmp_path / "first-screen.png").stat().st_size > 10_000


def test_an_excerpt_matches_only_what_was_printed_numbers_aside():
    # A ranking row's last two cells (on the cost front, converged) may differ: a shrunken study decides them otherwise.
    printed = (
        "4 runs: 2 done, 2 running\n| 1 | grid1x1 | 2 | 0.51 | 0.3 | -2.4 to 3.6 | 1 | – | – | 0.01 |  | – |\n"
        "grid2x2  1      running  -/4\n"
    )
    assert (
        walkthrough.missing_lines(
            "8 runs: 2 done, 2 running...\n...\n"
            "| 1 | grid2x2 | 4 | 2.9 | 1.1 | 1.1 to 4.7 | 1 | – | – | 0.06 | yes | yes |\n",
            printed,
        )
        == []
    )
    assert walkthrough.missing_lines(
        "| 1 | grid2x2 | 4 | 2.9 | 1.1 | 1.1 to 4.7 | – | – | – | 0.06 | yes | yes |\n", printed
    ) == ["| 1 | grid2x2 | 4 | 2.9 | 1.1 | 1.1 to 4.7 | – | – | – | 0.06 | yes | yes |"]
    # A word, a state or a column that differs is missing.
    assert walkthrough.missing_lines("8 runs: 2 done, 2 failed\ngrid2x2  1      waiting  -/500\n", printed) == [
        "8 runs: 2 done, 2 failed",
        "grid2x2  1      waiting  -/500",
    ]
    assert [step.kind for step in walkthrough.steps()][:3] == ["bash", "bash", "bash"]


def test_an_excerpt_is_rewritten_from_what_was_printed_its_names_and_elisions_kept():
    # What `python tests/walkthrough.py` does to the page with the output of its own run.
    names = ["grid1x1", "grid2x2"]
    printed = (
        "- grid2x2 is better than grid1x1, significantly (Holm p = 0.0002 < 0.05; A12 = 0.98 [0.7, 1.00], large)\n"
        "| 1 | grid1x1 | 8 | 2.61 | 2.6 | 0.9 | 1.9 to 3.3 | 1 | – | – | 0.091 | yes | no |\n"
        "total                     108\n"
    )
    assert walkthrough.regenerated_line("- ...grid1x1...A12 = 1.00 [0.76, 1.00]...", printed, names) == (
        "- ...grid1x1...A12 = 0.98 [0.7, 1.00]..."
    )
    assert (
        walkthrough.regenerated_line("total                     107", printed, names) == "total                     108"
    )
    assert walkthrough.regenerated_line(
        "| 1 | grid1x1 | 8 | 2.48 | 2.5 | 0.8 | 1.8 to 3.2 | 1 | – | – | 0.09 | yes | yes |", printed, names
    ) == ("| 1 | grid1x1 | 8 | 2.61 | 2.6 | 0.9 | 1.9 to 3.3 | 1 | – | – | 0.091 | yes | no |")
    # A set-up's name is no number: a row of another set-up is no match, and the line stays as it was; a
    # duration's digits may differ.
    assert walkthrough.regenerated_line(
        "grid1x1  2  running  ...  7m53s...", "grid1x1  2  running  3/8  0m05s", names
    ) == ("grid1x1  2  running  ...  0m05s...")
    assert walkthrough.regenerated_line(
        "| 1 | grid2x2 | 8 | 2.4 | 2.5 | 0.8 | 1.8 to 3.2 | 1 | – | – | 0.09 | yes | yes |", printed, names
    ) == ("| 1 | grid2x2 | 8 | 2.4 | 2.5 | 0.8 | 1.8 to 3.2 | 1 | – | – | 0.09 | yes | yes |")
    assert walkthrough.regenerated_line("...", printed, names) == "..."
    # An effect word in a row, and of two rows that fit, the one with the line's own words (its trial).
    ranked = "| 2 | grid1x1 | 8 | 7.399 | 7.2 | 2.1 | 5.4 to 8.9 | 0 | 0.0002 | 1.00 (large) | 0.04 | yes | yes |\n"
    assert (
        walkthrough.regenerated_line(
            "| 2 | grid1x1 | 8 | 7.395 | 7.27 | 2.11 | 5.45 to 8.97 | 0 | 0.00015 | 1.00 (large) | 0.03 | yes | yes |",
            ranked,
            names,
        )
        == ranked.strip()
    )
    looks = "grid2x2  1      done     500/500    fid_best 6.5\ngrid2x2  0      done     500/500    fid_best 4.3\n"
    assert walkthrough.regenerated_line("grid2x2  0      done     500/500    fid_best 4.213", looks, names) == (
        "grid2x2  0      done     500/500    fid_best 4.3"
    )
    # The paragraph that says where, when and at which commit the page's excerpts were printed, and its stamp,
    # and nothing else, are rewritten.
    page = walkthrough.DOC.read_text()
    stamped = regenerate_docs.stamp("0123456789abcdef", "fedcba9876543210")
    dated = walkthrough.with_machine(
        page, "a CPU (family 1 model 2), 2 cores, 2026-12-03, at commit 0123456789ab", stamped
    )
    assert "printed on a CPU (family 1 model 2), 2 cores, 2026-12-03, at commit 0123456789ab (`python " in " ".join(
        dated.split()
    )
    assert regenerate_docs.recorded(dated) == [{"commit": "0123456789ab", "code": "fedcba987654"}]
    assert dated.split("## 1. ")[1] == page.split("## 1. ")[1] and dated.split("<!--")[0] == page.split("<!--")[0]


def test_the_pages_that_quote_the_default_study_are_made_from_its_run(first_hour, tmp_path):
    # What tests/regenerate_docs.py writes into README.md and docs/results.md, from the shrunken study's folder:
    # each set-up's scores as scores.csv holds them, the rank test as scipy computes it, the page's own answer.
    from scipy.stats import mannwhitneyu

    study = StudyFolder.at(first_hour[0].folder / "results" / STUDY)
    scores = pd.read_csv(study.scores_table())
    fid = scores[scores.metric == "fid"].groupby("setup")["value"]
    small, large = fid.get_group(SMALL).to_numpy(), fid.get_group(LARGE).to_numpy()
    first, other = (SMALL, LARGE) if np.median(small) < np.median(large) else (LARGE, SMALL)
    a12 = np.mean([[float(f < o) + 0.5 * (f == o) for o in fid.get_group(other)] for f in fid.get_group(first)])
    p = mannwhitneyu(small, large, method="exact").pvalue
    written = regenerate_docs.caption(study, "a CPU, 2026-12-03, commit 0123456789ab")
    # As Markdown reads them: the pages' lines joined.
    caption = " ".join(written.split())
    entry = " ".join(regenerate_docs.results_entry(study, "a CPU, 2026-12-03, commit 0123456789ab", 12.34).split())
    for setup, scores in ((SMALL, small), (LARGE, large)):
        spread = f"(2 trials, {scores.min():.3g} to {scores.max():.3g})"
        said = f"{setup} {scores.mean():.3g} ± {scores.std(ddof=1):.3g} {spread}"
        assert said in caption and said in entry
    pair = f"{first} over {other}: exact rank-sum p = {p:.2g}, A12 = {a12:.2f}"
    assert pair in caption and pair in entry
    answer = Path(study.answer()).read_text().splitlines()[2]
    assert written.startswith("![FID of each set-up over 2 trials](docs/img/box_fid.png)\n\n*FID over 2 trials")
    assert f"The answer page opens: {answer}" in caption and f"opens: {answer}" in entry
    assert "12.3 minutes" in entry and "**ISC** (higher is better)" in entry
    convergence = pd.read_csv(study.convergence())
    assert all(f"{row.setup} not judged" in entry for row in convergence.itertuples() if row.converged == "–")
    # A fixed-trial study has no looks to report; the pages' blocks take the text and keep what is around them.
    assert "The schedule looked" not in caption and "design p" not in caption
    page = tmp_path / "README.md"
    page.write_text(regenerate_docs.README.read_text())
    rewritten = regenerate_docs.with_block(page.read_text(), written, regenerate_docs.stamp("ab" * 20, "cd" * 32))
    before, _, after = page.read_text().partition("<!-- regenerated by")
    assert rewritten.startswith(before) and rewritten.endswith(after[after.index(regenerate_docs.END) :])
    assert written in rewritten


def _with(setups: dict | None = None, **keys) -> dict:
    config = {**LIVING, **keys}
    if setups is not None:
        config["setups"] = setups
    return config


TRAINING = {"training_job", "train", "prepare_dataset", "train_classifier", "reference_statistics"}
# One edit per way a change reaches the DAG (a spec file, a job file, new runs, a set-up gone, the data);
# tests/test_study_plan.py checks every row of the guide's edit table on the plan itself.
EDITS = {
    # edit name: (config, rules that must be planned with their counts, rules that must not be planned)
    "metric added": (
        _with(evaluation={**LIVING["evaluation"], "metrics": ["fid", "isc", "kid"], "kid_subset_size": 50}),
        {"evaluate": 4},
        TRAINING,
    ),
    "lr of one set-up": (
        _with({**LIVING["setups"], SMALL: {**LIVING["setups"][SMALL], "lr": 1e-4}}),
        {"train": 2, "evaluate": 2},
        {"prepare_dataset", "train_classifier", "reference_statistics"},
    ),
    "set-up removed": (_with({LARGE: LIVING["setups"][LARGE]}), {"stats": 1}, TRAINING | {"evaluate"}),
    "trials raised": (_with(trials=3), {"train": 2, "evaluate": 2}, {"training_job", "prepare_dataset"}),
    # Its first look tests the trials there are; a round of training only if it asks for one.
    "trials made a schedule": (_with(trials={"first": 2, "step": 1, "most": 3}), {"look": 1}, TRAINING | {"evaluate"}),
    "seed changed": (_with(seed=7), {"prepare_dataset": 1, "train_classifier": 1, "train": 4}, set()),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_each_edit_of_a_finished_study_plans_exactly_what_it_changes(living, env, edit):
    config, wanted, unwanted = EDITS[edit]
    jobs = planned(snakemake(living, config, "-n", env=env))
    assert {rule: jobs.get(rule, 0) for rule in wanted} == wanted, jobs
    assert not set(jobs) & unwanted, jobs


def test_a_statistics_edit_redoes_only_its_tables_and_figures_without_snakemake_s_metadata(living, tmp_path, env):
    # A copy of the results without .snakemake/: the jobs' arguments files, not Snakemake's params, carry the edit.
    shutil.copytree(living / "results", tmp_path / "results")
    assert planned(snakemake(tmp_path, LIVING, "-n", env=env)) == {}
    statistics = LIVING.get("statistics", {})
    changed = _with(
        statistics={**statistics, "convergence_window": 0.5 if statistics.get("convergence_window") != 0.5 else 0.4}
    )
    jobs = planned(snakemake(tmp_path, changed, "-n", env=env))
    assert jobs.get("convergence") == 1 and jobs.get("stats") == 1, jobs
    assert not set(jobs) & (TRAINING | {"evaluate", "aggregate", "box_plot"}), jobs


def test_key_order_and_the_site_change_nothing(living, env):
    again = snakemake(living, LIVING, "-n", env=env)
    assert planned(again) == {}
    # A finished study's dry-run says how to see its whole plan.
    assert "Nothing to be done" in said(again) and WHOLE_PLAN in said(again), said(again)[-2000:]
    # The files the plan writes itself have none of Snakemake's metadata, by design: no notice says so.
    assert "missing provenance/metadata" not in said(again), said(again)[-2000:]

    # The same study as a user may write it: every mapping's keys in another order, but the set-ups' own order,
    # which is the order of the tables' rows.
    def reversed_keys(value):
        return {key: reversed_keys(value[key]) for key in reversed(list(value))} if isinstance(value, dict) else value

    reordered = {
        **reversed_keys(LIVING),
        "setups": {name: reversed_keys(setup) for name, setup in LIVING["setups"].items()},
    }
    assert list(reordered)[0] != "study" and list(reordered["setups"][LARGE])[0] != "mode"
    assert planned(snakemake(living, reordered, "-n", env=env, sort_keys=False)) == {}
    # Another site (GPU nodes): the launch line and the compute options change, no training reruns.
    jobs = planned(snakemake(living, LIVING, "-n", "--config", "site=profiles/slurm-gpu/site.yaml", env=env))
    assert not set(jobs) & (TRAINING | {"evaluate"}), jobs


def _older_form(arguments: Path, seeded: bool, workdir: Path) -> str:
    """An arguments file as releases before spec-only settings wrote it: the stage's settings inline
    (--settings JSON, in the --spec line's place) and, for a step that draws, the study seed (--seed)."""
    lines = arguments.read_text().splitlines()
    at = lines.index("--spec")
    spec = json.loads((workdir / lines[at + 1]).read_text())
    section = next((key for key in ("dataset", "classifier", "evaluation") if key in spec), None)
    settings = spec[section] if section else spec
    lines[at : at + 2] = ["--settings", json.dumps(settings, sort_keys=True, separators=(",", ":"))]
    return "\n".join(lines + (["--seed", str(spec["seed"])] if seeded else [])) + "\n"


def test_a_study_whose_arguments_files_hold_the_settings_as_before_redoes_nothing(living, tmp_path, env):
    # The finished study as an older release left it: its stages' arguments files carry the settings and the
    # seed that are also in the spec files. The upgrade rewrites them to name the spec files, and keeps them.
    for name in ("results", ".snakemake"):
        shutil.copytree(living / name, tmp_path / name, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    folder = tmp_path / "results" / STUDY / "arguments"
    older = {"prepare_dataset": True, "train_classifier": True, "reference_statistics": False}
    older |= {f"evaluate/{setup}/trial{trial}": True for setup in LIVING["setups"] for trial in range(LIVING["trials"])}
    dates, current = {}, {}
    for job, seeded in older.items():
        path = folder / f"{job}.args"
        current[job], dates[job] = path.read_text(), path.stat().st_mtime_ns
        path.write_text(_older_form(path, seeded, tmp_path))
        os.utime(path, ns=(dates[job], dates[job]))
    assert "--settings" in (folder / "evaluate" / SMALL / "trial0.args").read_text()
    assert planned(snakemake(tmp_path, LIVING, "-n", env=env)) == {}
    done = snakemake(tmp_path, LIVING, "--cores", "1", env=env)
    assert done.returncode == 0 and "Nothing to be done" in said(done), said(done)[-3000:]
    for job in older:
        path = folder / f"{job}.args"
        assert path.read_text() == current[job] and path.stat().st_mtime_ns == dates[job], job
    assert "its settings are in its spec file now, nothing to redo" in said(done)
    # An older file whose seed is not the spec's is another job: it is redone (with what follows from it).
    path = folder / "train_classifier.args"
    path.write_text(_older_form(path, True, tmp_path).replace(f"--seed\n{LIVING['seed']}\n", "--seed\n99\n"))
    assert planned(snakemake(tmp_path, LIVING, "-n", env=env)).get("train_classifier") == 1


def test_an_upgrade_that_rewrites_a_rule_s_command_retrains_nothing(living, tmp_path, env):
    # The finished study with Snakemake's metadata (which holds the code each job ran) in a checkout whose
    # workflow is a copy, in which the train rule's command is then rewritten, as an upgrade may.
    upgraded = tmp_path / "checkout"
    shutil.copytree(REPO / "workflow", upgraded / "workflow")
    shutil.copy(REPO / "Snakefile", upgraded)
    for name in ("config", "profiles", "results", ".snakemake"):
        shutil.copytree(living / name, upgraded / name, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    rule = upgraded / "workflow" / "rules" / "train.smk"
    command = "ganstudy train @{input.arguments} > {log} 2>&1"
    assert rule.read_text().count(command) == 1
    rule.write_text(rule.read_text().replace(command, command.replace("> {log}", ">{log}")))

    def plan(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["snakemake", "--configfile", "config/config.yaml", "-n", *args],
            cwd=upgraded,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )

    # Snakemake's own default sees the rewritten command as changed code and would retrain every run ...
    default = plan("--cores", "1", "--workflow-profile", "none")
    assert planned(default).get("train") == 4 and "Code has changed since last execution" in said(default), said(
        default
    )[-2000:]
    # ... the workflow's own profile (profiles/default, read beside the Snakefile) leaves that trigger out, with
    # or without a site's profile: nothing to do.
    assert planned(plan("--cores", "1")) == {}
    assert planned(plan("--profile", "profiles/local")) == {}


def test_a_changed_set_up_is_seen_without_snakemake_s_metadata_and_its_runs_are_archived(living, tmp_path, env):
    # A copy of the results without .snakemake/: as after `make clean` or in a fresh clone of the results.
    shutil.copytree(living / "results", tmp_path / "results")
    study = tmp_path / "results" / STUDY
    changed = _with({**LIVING["setups"], SMALL: {**LIVING["setups"][SMALL], "lr": 1e-4}})
    plan = snakemake(tmp_path, changed, "-n", env=env)
    assert plan.returncode == 0 and "2 finished run(s) no longer match the config; a run moves them" in said(plan), (
        said(plan)[-2000:]
    )
    assert f"{SMALL} trial 0: settings.lr: 0.0005 -> 0.0001" in said(plan) and f"{LARGE} trial" not in said(plan)
    assert not (study / "archive").exists()  # a dry-run moves nothing
    old_run = (study / "runs" / SMALL / "trial0" / "run.json").read_text()
    grid_before = (study / "runs" / LARGE / "trial1" / "generator.pt").read_bytes()
    done = snakemake(tmp_path, changed, "--cores", "2", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", said(done).split("Job stats:")[1], re.MULTILINE))
    assert jobs["train"] == "2" and jobs["evaluate"] == "2", jobs
    # The old runs are readable in the archive, in the study's layout, with a record of why they moved.
    [archive] = list((study / "archive").iterdir())
    assert (archive / "runs" / SMALL / "trial0" / "run.json").read_text() == old_run
    assert (archive / "runs" / SMALL / "trial1" / "generator.pt").is_file() and (
        archive / "scores" / SMALL / "trial1.json"
    ).is_file()
    assert (archive / "logs" / "train" / SMALL / "trial0.log").is_file()
    record = json.loads((archive / "archived" / SMALL / "trial0.json").read_text())
    assert record["changes"] == ["settings.lr: 0.0005 -> 0.0001"]
    # The new runs were trained with the new lr (the job file was rewritten too), the 2x2's were not touched.
    for trial in (0, 1):
        assert (
            json.loads((study / "runs" / SMALL / f"trial{trial}" / "run.json").read_text())["job"]["settings"]["lr"]
            == 1e-4
        )
    assert json.loads((study / "jobs" / f"{SMALL}.json").read_text())["settings"]["lr"] == 1e-4
    assert (study / "runs" / LARGE / "trial1" / "generator.pt").read_bytes() == grid_before
    assert planned(snakemake(tmp_path, changed, "-n", env=env)) == {}


def _dates(study: Path) -> dict[str, int]:
    return {str(path.relative_to(study)): path.stat().st_mtime_ns for path in study.rglob("*") if path.is_file()}


def test_a_study_moved_copied_linked_or_named_by_an_absolute_path_trains_nothing(living, tmp_path, env):
    # Where a study's folder lies never decides what is redone: results moved from scratch to project space,
    # shared, or reached through another mount. The living study's working directory is copied with Snakemake's
    # metadata (.snakemake/, keyed by the paths results/...), which does not follow the folder to a new path.
    work = tmp_path / "work"
    shutil.copytree(living / ".snakemake", work / ".snakemake", symlinks=True, ignore=shutil.ignore_patterns("locks"))
    subprocess.run(["cp", "-a", str(living / "results"), str(work / "results")], check=True)
    subprocess.run(["cp", "-a", str(work / "results"), str(work / "copied")], check=True)
    (work / "elsewhere").mkdir()
    moved = work / "elsewhere" / "moved"
    (work / "link").symlink_to(moved)
    dates = _dates(work / "copied" / STUDY)
    relocations = [("copied", None), ("elsewhere/moved", "copied"), ("link", None), (str(moved), None)]
    # The folder that Snakemake's metadata knows as results/, named by its absolute path.
    for results_dir, before in [*relocations, (str(work / "results"), None)]:
        if before is not None:
            subprocess.run(["mv", str(work / before), str(work / results_dir)], check=True)
        plan = snakemake(work, _with(results_dir=results_dir), "-n", env=env)
        assert planned(plan) == {}, (results_dir, said(plan)[-3000:])
        assert "no longer match" not in said(plan), said(plan)[-3000:]
    # A real run through the absolute path rewrites the arguments files for the folder's new name, keeping their
    # dates, and redoes nothing; every other file is as it was.
    done = snakemake(work, _with(results_dir=str(moved)), "--cores", "1", env=env)
    assert done.returncode == 0 and "Nothing to be done" in said(done), said(done)[-3000:]
    assert "it was written when the study's folder lay elsewhere" in said(done), said(done)[-3000:]
    study = moved / STUDY
    arguments = (study / "arguments" / "train" / SMALL / "trial0.args").read_text()
    assert f"{study}/runs/{SMALL}/trial0\n" in arguments, arguments
    assert {path: date for path, date in _dates(study).items() if not path.startswith("logs/")} == {
        path: date for path, date in dates.items() if not path.startswith("logs/")
    }
    # The answer page's figures are found where it lies now.
    figures = re.findall(r"\]\((figures/[^)]+)\)", (study / "summary.md").read_text())
    assert figures and all((study / figure).is_file() for figure in figures), figures
    # A real change after the move retrains just its set-up.
    changed = _with({**LIVING["setups"], SMALL: {**LIVING["setups"][SMALL], "lr": 1e-4}}, results_dir="link")
    jobs = planned(snakemake(work, changed, "-n", env=env))
    assert (
        jobs.get("train") == 2 and jobs.get("evaluate") == 2 and not {"prepare_dataset", "train_classifier"} & set(jobs)
    ), jobs


def _named_from_the_working_directory(record: dict, results_dir: str) -> dict:
    """A job record as releases before relocatable studies wrote it: the study's files named by their path from
    the working directory."""
    inputs = {
        name: path if name == "inception" or path is None else f"{results_dir}/{STUDY}/{path}"
        for name, path in record["inputs"].items()
    }
    return {**record, "inputs": inputs}


def test_a_study_whose_job_files_name_its_files_by_their_old_paths_trains_nothing(living, tmp_path, env):
    # The finished study as the release before this one left it: its job files and runs' records name the data,
    # classifier and statistics by "results/<study>/..." The upgrade recognises the same jobs, rewrites the job
    # files in the new form with their dates, and trains nothing, also once the folder has moved.
    shutil.copytree(living / "results", tmp_path / "results", symlinks=True)
    study = tmp_path / "results" / STUDY
    old = [study / "jobs" / f"{setup}.json" for setup in LIVING["setups"]]
    for path in old + sorted(study.glob("runs/*/trial*/run.json")):
        dated = path.stat().st_mtime_ns
        record = json.loads(path.read_text())
        if "job" in record:
            record["job"] = _named_from_the_working_directory(record["job"], "results")
        else:
            record = _named_from_the_working_directory(record, "results")
        path.write_text(json.dumps(record))
        os.utime(path, ns=(dated, dated))
    assert json.loads(old[0].read_text())["inputs"]["train"] == f"results/{STUDY}/data/train.npz"
    dates = {path: path.stat().st_mtime_ns for path in old}
    assert planned(snakemake(tmp_path, LIVING, "-n", env=env)) == {}
    shutil.move(tmp_path / "results", tmp_path / "project")
    plan = snakemake(tmp_path, _with(results_dir="project"), "-n", env=env)
    assert planned(plan) == {} and "no longer match" not in said(plan), said(plan)[-3000:]
    done = snakemake(tmp_path, _with(results_dir="project"), "--cores", "1", env=env)
    assert done.returncode == 0 and "Nothing to be done" in said(done), said(done)[-3000:]
    assert "naming the study's files from its folder: the same job, nothing to redo" in said(done)
    for path in old:
        moved = tmp_path / "project" / path.relative_to(tmp_path / "results")
        assert json.loads(moved.read_text())["inputs"]["train"] == "data/train.npz"
        assert moved.stat().st_mtime_ns == dates[path]


def test_a_run_archived_by_a_run_that_stopped_early_or_deleted_by_hand_is_trained_again(living, tmp_path, env):
    # Snakemake redoes a missing file only for a job that needs it, and the tables made from the old runs
    # are still there: without the runs among the study's targets, the next run would keep tables that
    # disagree with the config.
    shutil.copytree(living / "results", tmp_path / "results")
    study = tmp_path / "results" / STUDY
    changed = _with({**LIVING["setups"], SMALL: {**LIVING["setups"][SMALL], "lr": 1e-4}})
    # A real run that makes one job file only (as one stopped before any training): it archives the 1x1's runs.
    done = snakemake(tmp_path, changed, "--cores", "1", f"results/{STUDY}/jobs/{SMALL}.json", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (study / "runs" / SMALL / "trial0").exists() and (study / "scores.csv").is_file()
    jobs = planned(snakemake(tmp_path, changed, "-n", env=env))
    assert jobs.get("train") == 2 and jobs.get("evaluate") == 2 and jobs.get("aggregate") == 1, jobs
    # A run folder deleted by hand (its score kept) is trained again too, and what it feeds is redone.
    shutil.rmtree(study / "runs" / LARGE / "trial1")
    jobs = planned(snakemake(tmp_path, changed, "-n", env=env))
    assert jobs.get("train") == 3 and jobs.get("evaluate") == 3 and jobs.get("convergence") == 1, jobs


def test_a_sweep_added_to_a_finished_study_trains_its_set_ups_and_makes_its_statistics(living, tmp_path, env):
    shutil.copytree(living / "results", tmp_path / "results")
    swept = _with({**LIVING["setups"], "mse": {"loss": "mse", "iterations": 2, "sweep": {"lr": [1.0e-4, 2.0e-4]}}})
    done = snakemake(tmp_path, swept, "--cores", "2", env=env)
    assert done.returncode == 0, said(done)[-3000:]
    study = tmp_path / "results" / STUDY
    assert sorted(p.name for p in (study / "runs").iterdir()) == [SMALL, LARGE, "mse__lr=0.0001", "mse__lr=0.0002"]
    effects = (study / "tables" / "sweep_mse_fid.csv").read_text().splitlines()
    assert effects[0] == "key,value,cells,runs,failed,mean,pooled_sd,ci_low,ci_high" and [
        line.split(",")[:4] for line in effects[1:]
    ] == [["lr", "0.0001", "1", "2"], ["lr", "0.0002", "1", "2"]]
    assert "lr" in (study / "tables" / "sweep_mse_tests.md").read_text()
    assert all((study / "figures" / f"sweep_mse_{metric}.png").is_file() for metric in ("fid", "isc"))
    # The sweep's set-ups are ordinary set-ups in the study's own tables too.
    assert "mse__lr=0.0001" in (study / "tables" / "summary_fid.md").read_text()


def test_scoring_a_finished_study_on_dinov2_features_rescores_every_run_and_trains_nothing(living, tmp_path, env):
    from test_pretrained_extractors import dino_state

    shutil.copytree(living / "results", tmp_path / "results")
    weights = tmp_path / "dinov2_vits14_pretrain.pth"
    torch.save(dino_state(width=64, depth=1), weights)
    # IS reads class probabilities, which an embedding has not: the plan refuses it before any job.
    on_dinov2 = {**LIVING["evaluation"], "extractor": "dinov2", "extractor_weights": str(weights)}
    refused = snakemake(tmp_path, _with(evaluation=on_dinov2), "-n", env=env)
    assert refused.returncode != 0 and "evaluation.metrics ['isc'] read class probabilities" in said(refused)
    config = _with(evaluation={**on_dinov2, "metrics": ["fid", "kid"], "kid_subset_size": 50})
    jobs = planned(snakemake(tmp_path, config, "-n", env=env))
    assert jobs.get("quality_statistics") == 1 and jobs.get("evaluate") == 4 and not set(jobs) & TRAINING, jobs
    # To the table only: the figures are redrawn as for any rescoring.
    done = snakemake(tmp_path, config, "--cores", "2", f"results/{STUDY}/tables/summary_fid.md", env=env)
    assert done.returncode == 0, said(done)[-3000:]
    study = tmp_path / "results" / STUDY
    record = json.loads((study / "scores" / SMALL / "trial0.json").read_text())
    quality = record["protocol"]["extractors"]["quality"]
    assert quality["kind"] == "dinov2" and quality["sha256"] == file_digest(weights) and quality["layers"] == ["dinov2"]
    assert set(record["scores"]) >= {"fid", "kid"} and "isc" not in record["scores"]
    assert "dinov2" in (study / "tables" / "summary_fid.md").read_text()


def test_a_run_with_checkpoints_to_resume_is_trained_before_fresh_runs_of_its_set_up(living, tmp_path, env):
    shutil.copytree(living / "results", tmp_path / "results")
    study = tmp_path / "results" / STUDY
    for trial in (0, 1):
        shutil.rmtree(study / "runs" / SMALL / f"trial{trial}")
        shutil.rmtree(study / "checkpoints" / SMALL / f"trial{trial}", ignore_errors=True)
    (study / "checkpoints" / SMALL / "trial1" / "iter-000001").mkdir(parents=True)
    (study / "checkpoints" / SMALL / "trial1" / "iter-000001" / "COMPLETE").write_text('{"iteration": 1}')
    # A checkpoint cut short (no marker) resumes nothing and gives no precedence.
    (study / "checkpoints" / SMALL / "trial0" / "iter-000001").mkdir(parents=True)
    plan = said(snakemake(tmp_path, LIVING, "-n", env=env))
    priority = {
        int(trial): float(value)
        for trial, value in re.findall(rf"wildcards: setup={SMALL}, trial=(\d+)\n\s+priority: ([\d.]+)", plan)
    }
    assert set(priority) == {0, 1} and priority[1] > priority[0], plan[-3000:]


# One edit per stage that refuses a study: the config's schema, the plan's checks (tests/test_config.py and
# tests/test_study_plan.py check each message without Snakemake).
@pytest.mark.parametrize(
    "edit, problem",
    [
        ({"study": ".."}, "'study': '..' is not allowed here"),
        ({"results_dir": "taken"}, "is a file, not a folder"),
    ],
)
def test_a_bad_name_or_a_results_dir_that_is_a_file_stops_the_plan_before_any_job(tmp_path, env, edit, problem):
    (tmp_path / "taken").write_text("a file where the results would go")
    done = snakemake(tmp_path, {**LIVING, **edit}, "-n", env=env)
    assert done.returncode != 0 and problem in said(done) and "Traceback" not in said(done), said(done)[-2000:]
    assert not (tmp_path / "results").exists()


def test_a_set_up_written_twice_stops_the_plan_naming_the_key_and_both_lines(tmp_path, env):
    text = "study: twice\nsetups:\n  a:\n    iterations: 2\n  b:\n    iterations: 3\n  a:\n    iterations: 4\n"
    done = snakemake(tmp_path, text, "-n", env=env)
    assert done.returncode != 0 and "key 'a' appears twice in one mapping (lines 3 and 7)" in said(done), said(done)[
        -2000:
    ]


def test_config_on_the_command_line_keeps_the_profile_s_site(tmp_path, env):
    # --config replaces the profile's config list, its site= entry included; the plan takes the site from the
    # profile folder instead and says so (test_cluster_profiles runs cluster jobs that need it too). The
    # results go to the test's folder: the checkout's own may hold the user's finished study.
    done = subprocess.run(
        ["snakemake", "--profile", "slurm-gpu", "-n", "--config", "trials=1", f"results_dir={tmp_path / 'results'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, said(done)[-2000:]
    assert "site=profiles/slurm-gpu/site.yaml: the profile's" in said(done), said(done)[-2000:]
    assert "site 'slurm-gpu': 32 cores and 4 GPUs per node" in said(done), said(done)[-2000:]
    jobs = planned_jobs(said(done))
    # trials=1: one trial per set-up, each rank with its GPU, started by srun.
    assert jobs and all(job["wildcards"].endswith("trial=0") for job in jobs), jobs
    assert all("--gpus-per-task=1" in job["Shell command"] for job in jobs), jobs[0]


def test_a_second_run_on_the_same_results_stops_at_once_and_the_first_finishes(living, tmp_path, env):
    shared = tmp_path / "shared-results"
    config = _with({"bce": {"loss": "bce", "iterations": 80}}, trials=1, results_dir=str(shared))
    # The living study's data, classifier and reference statistics, made from the same sections: the first
    # run trains and scores one run, the second finds it busy.
    for made in ("data", "classifier", "specs"):
        shutil.copytree(living / "results" / STUDY / made, shared / STUDY / made)
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir(), second_dir.mkdir()
    (first_dir / "study.yaml").write_text(yaml.safe_dump(config))
    score = shared / STUDY / "scores" / "bce" / "trial0.json"
    first = subprocess.Popen(
        [
            "snakemake",
            "-s",
            str(REPO / "Snakefile"),
            "-d",
            str(first_dir),
            "--configfile",
            str(first_dir / "study.yaml"),
            "--cores",
            "1",
            str(score),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lock = shared / STUDY / ".lock"
    deadline = time.monotonic() + 240
    while not (shared / STUDY / "runs").exists() and time.monotonic() < deadline and first.poll() is None:
        time.sleep(1)  # the training job has started: the first run is deep in its work
    assert lock.is_file() and json.loads(lock.read_text())["pid"] == first.pid
    started = time.monotonic()
    second = snakemake(second_dir, config, "--cores", "1", env=env)
    assert second.returncode != 0 and time.monotonic() - started < 60
    assert f"is being run by pid {first.pid} on host {socket.gethostname()}" in said(second), said(second)[-2000:]
    out = first.communicate(timeout=600)[0]
    assert first.returncode == 0, out[-3000:]
    assert "prepare_dataset" not in out and "train_classifier" not in out, out[-3000:]
    study = shared / STUDY
    assert (
        json.loads((study / "runs" / "bce" / "trial0" / "run.json").read_text())["job"]["settings"]["iterations"] == 80
    )
    assert score.is_file() and not lock.exists()
    # A dry-run and ganstudy status never need the lock.
    assert planned(snakemake(second_dir, config, "-n", str(score), env=env)) == {}


def test_a_lock_left_by_a_dead_process_is_taken_over_and_one_from_another_host_says_how_to_clear_it(tmp_path):
    child = subprocess.Popen(["true"])  # a pid that is gone once it has exited
    child.wait()
    (tmp_path / ".lock").write_text(json.dumps({"host": socket.gethostname(), "pid": child.pid, "started_at": "then"}))
    warned = []
    path = acquire(tmp_path, warned.append)
    assert warned and "took over the lock" in warned[0] and json.loads(path.read_text())["pid"] == os.getpid()
    with pytest.raises(GanstudyError, match=f"is being run by pid {os.getpid()} on host"):
        acquire(tmp_path, warned.append)
    release(path)
    assert not path.exists()
    (tmp_path / ".lock").write_text(json.dumps({"host": "login2", "pid": 1, "started_at": "then"}))
    with pytest.raises(GanstudyError, match=r"on host login2 .*remove .*\.lock and start again"):
        acquire(tmp_path, warned.append)
    release(tmp_path / ".lock")  # not ours: left alone
    assert (tmp_path / ".lock").exists()


def test_differences_name_each_changed_key_whatever_the_order():
    old = {"seed": 1, "settings": {"lr": 2e-4, "iterations": 5, "grid": {"shape": "2x2"}}}
    new = {"settings": {"grid": {"shape": "3x3"}, "iterations": 5, "lr": 2e-4}, "seed": 1}
    assert differences(old, dict(reversed(list(old.items())))) == []
    assert differences(old, new) == ['settings.grid.shape: "2x2" -> "3x3"']
    assert differences({"settings": {"trials": 3, "lr": 1.0}}, {"settings": {"lr": 1.0}}) == []  # trials change no run
    # An optional input added later and unset (inputs.inception) is the same run as one recorded before it.
    assert differences({"inputs": {"train": "t"}}, {"inputs": {"train": "t", "inception": None}}) == []
    assert differences({"inputs": {"train": "t"}}, {"inputs": {"train": "t", "inception": "w"}}) == [
        'inputs.inception: "absent" -> "w"'
    ]


def test_a_truncated_split_is_named_by_its_manifest_s_sha256(digits_dir, tmp_path):
    from ganstudy.data.arrays import load_split

    data = shutil.copytree(digits_dir, tmp_path / "data")
    assert len(load_split(data / "train.npz").labels) == 1437
    content = (data / "train.npz").read_bytes()
    (data / "train.npz").write_bytes(content[: len(content) // 2])
    with pytest.raises(
        GanstudyError,
        match=r"train.npz is not the file its manifest .* records: its sha256 differs .* Delete .*data and rerun",
    ):
        load_split(data / "train.npz")


def _served_runs(command: str, study: str, env: dict) -> list[dict]:
    """The runs of experiment ganstudy/<study> as the MLflow server that ``command`` (``mlflow ui ...``)
    starts serves them, after checking that it serves its web page."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [*command.split(), "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180

    def answer(request: str | urllib.request.Request) -> bytes:
        # A server still starting may refuse, accept and answer late (TimeoutError), or, its workers starting
        # under a loaded CI machine, drop a connection (RemoteDisconnected, a ConnectionError): each is "not
        # yet", not a failure, as a browser would try again.
        while True:
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return response.read()
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                assert server.poll() is None and time.monotonic() < deadline, f"{command} did not serve"
                time.sleep(1)

    try:
        assert "<html" in answer(base).decode()
        name = urllib.parse.quote(f"ganstudy/{study}", safe="")
        found = json.loads(answer(f"{base}/api/2.0/mlflow/experiments/get-by-name?experiment_name={name}"))
        query = json.dumps({"experiment_ids": [found["experiment"]["experiment_id"]], "max_results": 100}).encode()
        request = urllib.request.Request(
            f"{base}/api/2.0/mlflow/runs/search", query, headers={"Content-Type": "application/json"}
        )
        return json.loads(answer(request))["runs"]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def test_scoring_noise_rescores_as_the_evaluate_step_and_pools_the_sample_sets_variance(living, tmp_path, env):
    from scipy.stats import mannwhitneyu

    from ganstudy.core.seeding import derive_seed
    from ganstudy.evaluate.fid import FidScorer
    from ganstudy.models.artifact import load_generator, sample_generator

    out = tmp_path / "draws.csv"
    done = subprocess.run(
        ["ganstudy", "scoring-noise", "config/config.yaml", "--draws", "2", "--out", str(out)],
        cwd=living,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    draws = pd.read_csv(out)
    study = living / "results" / STUDY
    assert set(draws.draw) == {0, 1, 2} and set(draws.metric) == set(LIVING["evaluation"]["metrics"]) | {"isc_std"}
    fid = draws[draws.metric == "fid"].set_index(["setup", "trial", "draw"]).value
    for setup in (SMALL, LARGE):
        for trial in range(LIVING["trials"]):
            # Draw 0 is the evaluate step's sample set: its score, to the bit, on the machine that wrote it.
            record = json.loads((study / "scores" / setup / f"trial{trial}.json").read_text())
            assert fid[(setup, trial, 0)] == record["scores"]["fid"]
    # Draw 1 of one trial, by another path: the generator's images of draw 1's noise, scored by the in-training
    # FID (numpy's Frechet distance of the classifier's logits, not torch-fidelity's).
    generator, spec = load_generator(study / "runs" / LARGE / "trial1" / "generator.pt")
    evaluation = LIVING["evaluation"]
    images = sample_generator(
        generator, spec.latent_dim, evaluation["samples"], derive_seed(LIVING["seed"], 1, "evaluate", 1), 50
    )
    scorer = FidScorer(study / "classifier" / "classifier.pt", study / "classifier" / "reference_stats.npz", "cpu")
    assert scorer.fid(images) == pytest.approx(fid[(LARGE, 1, 1)], rel=1e-6)
    # The printed table: the pooled sd of each set-up's trials (equal draws: the root of their mean variance),
    # and the comparison of the trials' means by the exact test (2 against 2 trials, one pair per metric).
    for setup in (SMALL, LARGE):
        pooled = np.sqrt(np.mean([fid[setup][trial].var(ddof=1) for trial in range(LIVING["trials"])]))
        row = re.search(rf"^\| fid \| {setup} \| 2 \| 3 \| ([^|]+) \|", done.stdout, re.MULTILINE)
        assert row and float(row.group(1)) == pytest.approx(pooled, rel=1e-3), done.stdout
    means = fid.groupby(["setup", "trial"]).mean()
    p = mannwhitneyu(means[SMALL], means[LARGE], method="exact").pvalue
    row = re.search(rf"^\| fid \| {SMALL} \| {LARGE} \|(.*)$", done.stdout, re.MULTILINE)
    # Columns after the pair: p_holm, a12, better, trials_for_power, then the same on the means.
    assert row and float(row.group(1).split("|")[4]) == pytest.approx(p, rel=1e-3), done.stdout


def test_a_study_exported_to_mlflow_and_tensorboard_reads_back_and_a_second_export_mirrors_it(living, tmp_path, env):
    import mlflow
    from mlflow import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    shutil.copytree(living / "results", tmp_path / "results")
    study = tmp_path / "results" / STUDY
    export = [
        "ganstudy",
        "export",
        str(study),
        "--mlflow",
        str(tmp_path / "mlflow"),
        "--tensorboard",
        str(tmp_path / "tb"),
    ]
    done = subprocess.run(export, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, said(done)[-3000:]
    assert f"experiment ganstudy/{STUDY}: 4 run(s) written, 0 run(s) unchanged, 0 run(s) deleted" in done.stdout
    uri = f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=[f"ganstudy/{STUDY}"]).set_index("tags.ganstudy.run")
    assert sorted(runs.index) == [f"{s}/trial{t}" for s in (SMALL, LARGE) for t in (0, 1)]
    for key, run in runs.iterrows():
        setup, trial = key.split("/")
        scores = json.loads((study / "scores" / setup / f"{trial}.json").read_text())["scores"]
        assert run["metrics.score/fid"] == scores["fid"] and run["metrics.score/isc"] == scores["isc"]
        record = json.loads((study / "runs" / setup / trial / "run.json").read_text())
        assert run["params.settings.lr"] == str(record["settings"]["lr"]) and run["params.study_seed"] == str(
            record["study_seed"]
        )
    # Per iteration as losses.csv has it, and the run's files as artifacts.
    client = MlflowClient(tracking_uri=uri)
    losses = pd.read_csv(study / "runs" / LARGE / "trial0" / "losses.csv")
    history = client.get_metric_history(runs.loc[f"{LARGE}/trial0", "run_id"], "fid_best")
    assert [(m.step, m.value) for m in history] == list(zip(losses.iteration, losses.fid_best))
    artifacts = {a.path for a in client.list_artifacts(runs.loc[f"{LARGE}/trial0", "run_id"])}
    assert {"run.json", "losses.csv", "samples.png", "cells.csv", "trial0.json"} <= artifacts
    events = EventAccumulator(str(tmp_path / "tb" / STUDY / LARGE / "trial0"))
    events.Reload()
    # TensorBoard keeps float32.
    g_loss = events.Scalars("g_loss")
    assert [e.step for e in g_loss] == list(losses.iteration) and [e.value for e in g_loss] == pytest.approx(
        list(losses.g_loss), rel=1e-6
    )
    assert events.Scalars("score/fid")[0].value == pytest.approx(
        json.loads((study / "scores" / LARGE / "trial0.json").read_text())["scores"]["fid"]
    )
    assert len(events.Images("samples")) == 1
    # The browser the export's line names serves these runs: its page, and its API's list of them.
    served = [
        run["info"]["run_name"] for run in _served_runs(done.stdout.split("browse: ")[1].split("\n")[0], STUDY, env)
    ]
    assert sorted(served) == sorted(runs["tags.mlflow.runName"]), served
    # The study changes: the 1x1's trial 1 rescored, the 2x2's trials dropped from the plan. The export
    # follows, and only there; a run the lab logged into the experiment itself is not the export's to delete.
    client.create_run(runs["experiment_id"].iloc[0], run_name="a lab's own")
    scores = json.loads((study / "scores" / SMALL / "trial1.json").read_text())
    (study / "scores" / SMALL / "trial1.json").write_text(
        json.dumps({**scores, "scores": {**scores["scores"], "fid": 1.5}})
    )
    plan = json.loads((study / "plan.json").read_text())
    (study / "plan.json").write_text(json.dumps({**plan, "setups": {SMALL: plan["setups"][SMALL]}}))
    again = subprocess.run(export, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, said(again)[-3000:]
    assert "1 run(s) written, 1 run(s) unchanged, 2 run(s) deleted" in again.stdout
    runs = mlflow.search_runs(experiment_names=[f"ganstudy/{STUDY}"]).set_index("tags.ganstudy.run")
    assert (
        sorted(runs.index.dropna()) == [f"{SMALL}/trial0", f"{SMALL}/trial1"]
        and runs.loc[f"{SMALL}/trial1", "metrics.score/fid"] == 1.5
    )
    assert list(runs[runs.index.isna()]["tags.mlflow.runName"]) == ["a lab's own"]
    assert sorted(p.name for p in (tmp_path / "tb" / STUDY).iterdir()) == [SMALL]
    # Named nowhere: both, kept in the study's own folder (not the working directory).
    kept = subprocess.run(["ganstudy", "export", str(study)], capture_output=True, text=True, env=env, timeout=300)
    assert kept.returncode == 0, said(kept)[-3000:]
    store = study / "export" / "mlflow" / "mlflow.db"
    assert f"MLflow (sqlite:///{store.resolve()}), experiment ganstudy/{STUDY}: 2 run(s) written" in kept.stdout
    assert sorted(p.name for p in (study / "export" / "tensorboard" / STUDY).iterdir()) == [SMALL]


def _argument_file(path: Path, **changes: str) -> list[str]:
    """An arguments file's options with some values changed (keys: option names without dashes)."""
    lines = path.read_text().splitlines()
    given = dict(zip(lines[::2], lines[1::2])) | {f"--{key.replace('_', '-')}": value for key, value in changes.items()}
    return [item for pair in given.items() for item in pair]


def test_a_run_compared_with_a_reference_tells_the_training_from_the_scoring(living, tmp_path, env):
    # Issue 82's comparison with another machine's run of the same study. The reference here is this study
    # with its classifier trained again under another seed: the same generators under another scorer.
    from scipy.stats import wilcoxon

    from ganstudy.core.seeding import derive_seed
    from ganstudy.evaluate.fid import FidScorer
    from ganstudy.models.artifact import load_generator, sample_generator

    study = living / "results" / STUDY
    reference = tmp_path / "reference"
    shutil.copytree(study, reference, ignore=shutil.ignore_patterns("checkpoints", "archive", "logs"))
    arguments = study / "arguments"
    # The classifier's spec with another seed: what the study's config would say with seed 7.
    spec = json.loads((study / "specs" / "classifier.json").read_text()) | {"seed": 7}
    (tmp_path / "classifier.json").write_text(json.dumps(spec))
    for command, changes in (
        (
            "train-classifier",
            {"spec": str(tmp_path / "classifier.json"), "model": str(reference / "classifier" / "classifier.pt")},
        ),
        ("reference-stats", {"classifier": str(reference / "classifier" / "classifier.pt")}),
    ):
        step = "train_classifier" if command == "train-classifier" else "reference_statistics"
        options = _argument_file(arguments / f"{step}.args", **changes)
        if command == "train-classifier":
            options += ["--metrics", str(tmp_path / "classifier.json")]
        else:
            options[options.index("--out") + 1] = str(reference / "classifier" / "reference_stats.npz")
        done = subprocess.run(["ganstudy", command, *options], cwd=living, capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
    report = tmp_path / "report.md"
    done = subprocess.run(
        [sys.executable, str(REPO / "ci" / "compare_reference.py"), str(study), str(reference), "--draws", "1"]
        + ["--out", str(report)],
        cwd=living,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = report.read_text()
    tables = [
        [[cell.strip() for cell in line.strip("|").split("|")] for line in block.splitlines()[2:]]
        for block in re.findall(r"((?:^\|.*\n)+)", text, re.MULTILINE)
    ]
    own, training, scoring = (pd.DataFrame(rows) for rows in tables)
    # The same generators under either scorer: the training's comparison finds nothing (identical scores).
    assert len(training) == 2 * len(LIVING["setups"]) and set(training[5]) == {"1"} and set(training[7]) == {"0.5"}
    # Each generator's cross-score is the mean FID of its draws 0 and 1 as the evaluate step samples them,
    # computed here by another path (numpy's Frechet distance of the classifier's logits).
    evaluation = LIVING["evaluation"]
    means = {}
    for folder in (study, reference):
        scorer = FidScorer(
            folder / "classifier" / "classifier.pt", folder / "classifier" / "reference_stats.npz", "cpu"
        )
        for trial in range(LIVING["trials"]):
            generator, spec = load_generator(study / "runs" / LARGE / f"trial{trial}" / "generator.pt")
            draws = [
                scorer.fid(
                    sample_generator(
                        generator,
                        spec.latent_dim,
                        evaluation["samples"],
                        derive_seed(LIVING["seed"], trial, "evaluate", *((draw,) if draw else ())),
                        50,
                    )
                )
                for draw in (0, 1)
            ]
            means[folder, trial] = np.mean(draws)
    here, other = (np.array([means[folder, t] for t in range(LIVING["trials"])]) for folder in (study, reference))
    row = scoring[(scoring[0] == LARGE) & (scoring[1] == "here")].iloc[0]
    # (The report prints 4 significant digits.)
    assert float(row[3]) == pytest.approx(np.median(here), rel=1e-3)
    assert float(row[4]) == pytest.approx(np.median(other), rel=1e-3)
    assert float(row[6]) == pytest.approx(wilcoxon(here - other).pvalue, rel=1e-6)
    # The reference's own score files came from the first classifier: this machine does not give them to the bit.
    assert "of the reference's" in text and "to the bit: the reference machine's float path" not in text
    assert own.shape[0] == len(LIVING["setups"])


def test_a_float_trace_records_every_decision_and_agrees_with_itself_to_the_bit(living, tmp_path, env):
    # ci/float_trace.py (issue 82): the grid's decisions and the values they were taken on, per iteration and
    # cell. Two traces of the same path are the same bits; the ES's decisions match the weights it kept.
    study = living / "results" / STUDY
    traces = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.npz"
        command = [sys.executable, str(REPO / "ci" / "float_trace.py"), "run", str(study / "jobs" / f"{LARGE}.json")]
        command += ["--compute", str(study / "site" / "compute.json"), "--iterations", "3", "--out", str(out)]
        done = subprocess.run(command, cwd=living, capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        traces.append(out)
    with np.load(traces[0]) as arrays:
        rows = json.loads(str(arrays["trace"]))["rows"]
        assert {"3/0-0", "3/1-1", "1/0-1"} <= set(arrays.files)
    cells = 4  # the 2x2
    # The ES's rows of iteration 4 are the final scoring's, one candidate each.
    assert len(rows["select"]) == len(rows["state"]) == 3 * cells and len(rows["es"]) == 4 * cells
    assert all(len(scores) == 1 and not kept for iteration, _, scores, kept in rows["es"] if iteration == 4)
    previous = {}
    for (_, cell, _, weights, *_), (_, _, scores, kept) in zip(rows["state"], rows["es"]):
        # Kept: the mutated candidate scored lower and its weights replaced the cell's.
        assert kept == (len(scores) == 2 and scores[1] < scores[0])
        if not kept and tuple(cell) in previous:
            assert weights == previous[tuple(cell)]
        previous[tuple(cell)] = weights
    done = subprocess.run(
        [sys.executable, str(REPO / "ci" / "float_trace.py"), "compare", *map(str, traces)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "generator fitness: the same bits throughout" in done.stdout
    assert "{'tournaments': 0, 'ES decisions': 0}" in done.stdout
