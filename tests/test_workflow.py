"""The Snakemake workflow itself: dry-run, lint, config errors, and a whole shrunken study."""

import json
import os
import re
import signal
import stat
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from conftest import REPO, planned_jobs, with_pythonpath
from ganstudy.core.provenance import float_path
from ganstudy.stats.reproduction import NOT_COMPARABLE

pytestmark = pytest.mark.workflow

SHRUNKEN = {
    "study": "tiny",
    "trials": 2,
    "dataset": {"smote": {"strategy": "balance"}},
    "classifier": {"epochs": 3, "min_accuracy": 0.0},
    "setups": {
        "bce": {
            "loss": "bce",
            "iterations": 2,
            "reference": {"isc": {"mean": 2.54, "sd": 0.54, "source": "Lupo Pasini et al. (2021) table 5"}},
        },
        "grid": {
            "mode": "grid",
            "iterations": 2,
            "hidden_units": 32,
            "checkpoint_period": 1,
            "grid": {"shape": "2x2", "fitness_sample_size": 50, "score_sample_size": 50},
        },
        # The same grid on one rank: the grid's speed-up baseline (only ranks and trials differ).
        "grid_seq": {
            "mode": "grid",
            "iterations": 2,
            "hidden_units": 32,
            "checkpoint_period": 1,
            "ranks": 1,
            "trials": 1,
            "grid": {"shape": "2x2", "fitness_sample_size": 50, "score_sample_size": 50},
        },
        "per_class": {
            "mode": "per_class",
            "network": "dcgan",
            "iterations": 1,
            "batch_size": 32,
            "latent_dim": 16,
            "reference": {"isc": {"mean": 2.71, "sd": 0.04, "source": "Lupo Pasini et al. (2021) table 5"}},
        },
        "dp": {
            "mode": "data_parallel",
            "network": "dcgan",
            "iterations": 2,
            "batch_size": 32,
            "latent_dim": 16,
            "ranks": 2,
        },
    },
    "evaluation": {
        "samples": 100,
        "batch_size": 50,
        "isc_splits": 2,
        "metrics": ["fid", "isc", "class_fid", "label_tvd"],
    },
    "compute": {"max_ranks": 2},
}


def snakemake(
    workdir: Path, config: dict, *args: str, env: dict, timeout: int = 600, umask: int = 0o022
) -> subprocess.CompletedProcess:
    config_path = workdir / "study.yaml"
    config_path.write_text(yaml.safe_dump(config))
    command = ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile", str(config_path), *args]
    # The umask of a user on a shared project space: the study's files must be readable by the group.
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=timeout, preexec_fn=lambda: os.umask(umask)
    )


def report_captions(workdir: Path, config: dict, env: dict) -> dict[str, str]:
    """Builds the study's self-contained report and returns each result's caption by its path; every table
    (once: its Markdown, not its CSV and LaTeX) and figure of the study must be in it with a caption of its own."""
    report = snakemake(workdir, config, "--report", str(workdir / "report.html"), env=env)
    assert report.returncode == 0, report.stderr[-3000:]
    html = (workdir / "report.html").read_text(errors="replace")
    study = f"{config.get('results_dir', 'results')}/{config['study']}"
    captions = dict(re.findall(rf'"({re.escape(study)}/[^"]+)": \{{"name": .*?, "caption": "(.*?)", "mime_type"', html))
    for output in [*(workdir / study / "tables").glob("*.md"), *(workdir / study / "figures").iterdir()]:
        assert len(captions.get(str(output.relative_to(workdir)), "")) > 50, output.name
    tables = [Path(path) for path in captions if "/tables/" in path]
    twice = [path for path in tables if path.suffix != ".md" and path.with_suffix(".md") in tables]
    assert not twice, sorted(captions)
    return captions


def elsewhere(tmp_path: Path) -> list[str]:
    """Snakemake's arguments that keep the checkout's own study folder out of a test: the default study's results
    in a folder of the test's (the user's `make run` may have finished results/digits_grid, or be running)."""
    return ["--config", f"results_dir={tmp_path / 'results'}"]


def test_dry_run_of_the_default_study_lists_every_job(tmp_path, env):
    done = subprocess.run(
        ["snakemake", "-n", "--forceall", *elsewhere(tmp_path)], cwd=REPO, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    jobs = {
        line.split()[0]: int(line.split()[1])
        for line in done.stdout.splitlines()
        if line[:1].isalpha() and line.split()[-1].isdigit() and len(line.split()) == 2
    }
    # Trials on a schedule: the dry-run plans the first round; a look may add more.
    trials = config["trials"] if isinstance(config["trials"], int) else config["trials"]["first"]
    runs = len(config["setups"]) * trials
    assert jobs["train"] == runs and jobs["evaluate"] == runs
    assert jobs["prepare_dataset"] == jobs["train_classifier"] == jobs["stats"] == 1
    # The table once, and how many of its jobs a real run's table leaves out: the planner writes their files first.
    assert (done.stdout + done.stderr).count("Job stats:") == 1
    planner = {rule: jobs[rule] for rule in ("arguments", "compute_options", "spec", "training_job") if rule in jobs}
    assert planner.get("arguments", 0) > runs
    files = sum(planner.values())
    assert (
        f"Of these {jobs['total']} jobs, {files} write the planner's own files (rules {', '.join(sorted(planner))}: "
        f"arguments, specs, job files), which a real run writes before any job and leaves out of its table: "
        f"{jobs['total'] - files} jobs of work."
    ) in done.stdout + done.stderr


def test_training_jobs_start_longest_first(tmp_path, env):
    # Priority = pair-iterations per rank: a 2x2 grid on one rank does 4 pairs' work each iteration.
    done = subprocess.run(
        ["snakemake", "-n", "--forceall", *elsewhere(tmp_path)], cwd=REPO, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    priorities = dict(re.findall(r"wildcards: setup=(\w+), trial=\d+\n\s+priority: ([\d.]+)", done.stdout))
    assert {name: float(value) for name, value in priorities.items()} == {
        "grid1x1": config["setups"]["grid1x1"]["iterations"] * 1.0,
        "grid2x2": config["setups"]["grid2x2"]["iterations"] * 4.0,
    }


def test_lint_reports_nothing(env):
    done = subprocess.run(["snakemake", "--lint"], cwd=REPO, capture_output=True, text=True, env=env)
    assert done.returncode == 0
    assert "Congratulations, your workflow is in a good condition!" in done.stdout + done.stderr
    assert "Lints for" not in done.stdout + done.stderr


def test_a_misspelt_key_stops_the_run_before_any_job_naming_the_key(tmp_path, env):
    done = snakemake(tmp_path, {**SHRUNKEN, "evaluation": {"sampels": 10}}, "--cores", "1", env=env)
    assert done.returncode != 0 and "Building DAG" not in done.stdout + done.stderr
    assert "unknown key 'evaluation.sampels' (did you mean 'samples'?)" in done.stderr
    assert not (tmp_path / "results").exists()


def test_a_study_may_name_its_own_network_as_module_and_attribute(tmp_path, env):
    (tmp_path / "labnets.py").write_text("from ganstudy.models.builtin import PERCEPTRON4 as LAB\n")
    config = {**SHRUNKEN, "setups": {"bce": {**SHRUNKEN["setups"]["bce"], "network": "labnets:LAB"}}}
    done = snakemake(tmp_path, config, "-n", env=with_pythonpath(env, tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_missing_dataset_file_stops_the_run_naming_the_path(tmp_path, env):
    config = {**SHRUNKEN, "dataset": {"name": "npz", "path": "data/cells.npz"}}
    done = snakemake(tmp_path, config, "--cores", "1", env=env)
    assert done.returncode != 0
    # Stopped while planning, before any job, naming the key, the path and what to put there.
    assert (
        "this study needs files that are not here yet" in done.stderr
        and "dataset.path data/cells.npz (data set 'npz')" in done.stderr
    )
    assert not (tmp_path / "results").exists()


def test_the_whole_study_runs_and_a_second_run_has_nothing_to_do(tmp_path, env):
    done = snakemake(tmp_path, SHRUNKEN, "--cores", "2", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    study = tmp_path / "results" / "tiny"
    for setup in ("bce", "grid", "per_class", "dp"):
        for trial in (0, 1):
            run = study / "runs" / setup / f"trial{trial}"
            extra = {"grid": {"cells.csv"}, "per_class": {"classes.csv"}}.get(setup, set())
            assert {p.name for p in run.iterdir()} == {
                "generator.pt",
                "losses.csv",
                "profile.csv",
                "samples.png",
                "run.json",
            } | extra
            assert (study / "scores" / setup / f"trial{trial}.json").is_file()
            assert (study / "logs" / "train" / setup / f"trial{trial}.log").is_file()
    scores = pd.read_csv(study / "scores.csv")
    # fid, isc, isc_std, label_tvd per run; class_fid only for the labelled per-class generators.
    assert len(scores) == 2 * (4 + 4 + 5 + 4) + 4
    # What each run's ranks held, from its run.json (the cost columns): the job's thread count, no GPU here.
    held = scores.drop_duplicates(["setup", "trial"]).set_index(["setup", "trial"])
    assert set(held.gpus_per_rank) == {0} and (held.cores_per_rank >= 1).all()
    assert held.loc[("dp", 0), "ranks"] == 2
    # The hardware each trial trained on (issue 82): this machine's float path for every trial, so the tables
    # and the page name it once and warn of nothing.
    assert set(held.hardware) == {float_path(["cpu"])}
    summary = pd.read_csv(study / "tables" / "summary_fid.csv")
    # Set-ups in the config's order (the test writes it with sorted keys).
    assert list(summary.setup) == ["bce", "dp", "grid", "grid_seq", "per_class"] and list(summary.trials) == [
        2,
        2,
        2,
        1,
        2,
    ]
    # The answer on one page, ranked by the summary table's superiority (the rank tests' order; one trial
    # last, unranked) and quoting its numbers; the end of the run says where it is.
    page = (study / "summary.md").read_text()
    fid_rows = [
        line.split("|")[1:5]
        for line in page.split("## FID ")[1].split("\n## ")[0].splitlines()
        if re.match(r"\| (\d|–) ", line)
    ]
    ranked = summary.assign(few=summary.trials < 2).sort_values(
        ["few", "superiority", "median"], ascending=[True, False, True], kind="stable"
    )
    assert [[cell.strip() for cell in row] for row in fid_rows] == [
        [str(place) if t >= 2 else "–", s, str(t), f"{m:.4g}"]
        for place, (s, t, m) in enumerate(zip(ranked.setup, ranked.trials, ranked["median"]), 1)
    ]
    assert (
        "The study's answer: results/tiny/summary.md" in done.stderr
        and f"**{ranked.setup.iloc[0]}** ranks first in FID" in done.stderr
    )
    class_fid = pd.read_csv(study / "tables" / "summary_class_fid.csv")
    assert list(class_fid.trials) == [0, 0, 0, 0, 2]
    # Every score measured alike, and the tables say how: the classifier at 8x8, the study's sample count.
    assert scores.groupby("metric").protocol.nunique().eq(1).all()
    fid_table = (study / "tables" / "summary_fid.md").read_text()
    assert (
        "Protocol: the data set's classifier (sha256 " in fid_table and "8x8 uint8 as generated, no resize" in fid_table
    )
    assert "100 generated vs " in fid_table
    assert "WARNING" not in fid_table
    pvalues = pd.read_csv(study / "tables" / "pvalues_isc.csv", index_col=0)
    assert 0 < pvalues.loc["bce", "grid"] <= 1 and 0 < pvalues.loc["grid", "per_class"] <= 1
    per_class_run = json.loads((study / "runs" / "per_class" / "trial0" / "run.json").read_text())
    assert per_class_run["world_size"] == 2 and sorted(sum(per_class_run["class_assignment"], [])) == list(range(10))
    manifest = json.loads((study / "data" / "manifest.json").read_text())
    assert set(manifest["class_counts"]["train_after_smote"].values()) == {
        max(manifest["class_counts"]["train"].values())
    }
    assert (study / "figures" / "smote_samples.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    anova = pd.read_csv(study / "tables" / "anova.csv")
    assert list(anova.channel) == ["grey"] and anova.p_value[0] < 1e-6
    grid_run = json.loads((study / "runs" / "grid" / "trial0" / "run.json").read_text())
    assert grid_run["world_size"] == 2 and grid_run["grid_shape"] == "2x2" and grid_run["exchange"] == "graph"
    assert os.listdir(study / "checkpoints" / "grid" / "trial0") == ["finished"]  # the outputs took their place
    for name in ("box_fid.png", "box_isc.png", "samples.png", "routines.png", "speedup.png"):
        assert (study / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (study / "figures" / "grid_sizes.png").exists()  # one grid size: nothing to plot against
    assert "| bce | 2 |" in (study / "tables" / "summary_isc.md").read_text()
    assert re.search(r"^\| bce \| [\d.]+ ± [\d.]+ \|", (study / "tables" / "results.md").read_text(), re.MULTILINE)
    # Seed 000's tables from the runs' own clocks: the 2-rank grid against the same grid on one rank.
    timings = pd.read_csv(study / "timings.csv")
    assert set(timings[timings.setup == "grid"]["rank"]) == {0, 1} and set(
        timings[timings.setup == "grid_seq"]["rank"]
    ) == {0}
    overall = timings[timings.routine == "overall"].groupby("setup").seconds.mean()
    timing = pd.read_csv(study / "tables" / "timing.csv").set_index("setup")
    assert timing.loc["grid", "baseline"] == "grid_seq" and timing.loc["grid", "ranks"] == 2
    assert timing.loc["grid", "speedup"] == pytest.approx(overall["grid_seq"] / overall["grid"])
    assert timing.baseline.isna()[["bce", "grid_seq", "per_class", "dp"]].all()
    routines = pd.read_csv(study / "tables" / "routines.csv")
    assert {"exchange", "fitness", "train", "overall"} <= set(routines[routines.setup == "grid"].routine)
    assert set(routines[routines.setup == "dp"].routine) == {"compute", "allreduce", "step", "score", "overall"}
    # Seed 004's table: epoch time and final losses per set-up, from the runs' own records.
    epochs = pd.read_csv(study / "tables" / "epochs.csv").set_index("setup")
    dp_runs = [json.loads((study / "runs" / "dp" / f"trial{t}" / "run.json").read_text()) for t in (0, 1)]
    assert epochs.loc["dp", "ranks"] == 2 and dp_runs[0]["world_size"] == 2
    assert epochs.loc["dp", "epoch_seconds"] == pytest.approx(sum(r["train_seconds"] for r in dp_runs) / 2 / 2)
    last = [pd.read_csv(study / "runs" / "dp" / f"trial{t}" / "losses.csv").iloc[-1] for t in (0, 1)]
    assert epochs.loc["dp", "d_loss"] == pytest.approx((last[0].d_loss + last[1].d_loss) / 2)

    # Written under umask 022: every file of the study is readable by the group and others (mkstemp's 0600 was not).
    private = [
        str(p.relative_to(study))
        for p in study.rglob("*")
        if p.is_file() and stat.S_IMODE(p.stat().st_mode) & 0o044 != 0o044
    ]
    assert not private, private

    again = snakemake(tmp_path, SHRUNKEN, "-n", "--cores", "2", env=env)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    # A table setting changes only the reporting: no training or scoring job reruns (the cost figure reads the tables).
    restyled = {**SHRUNKEN, "statistics": {"digits": 3, "min_trials": 3}}
    plan = snakemake(tmp_path, restyled, "-n", "--cores", "2", env=env)
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", plan.stdout.split("Job stats:")[1], re.MULTILINE))
    assert plan.returncode == 0 and set(jobs) == {
        "stats",
        "cost_plot",
        "timing",
        "reproduction",
        "summary",
        "all",
        "total",
    }, plan.stdout[-2000:]
    done = snakemake(tmp_path, restyled, "--cores", "2", env=env)
    assert done.returncode == 0 and "underpowered: 2 < 3 trials" in (study / "tables" / "summary_fid.md").read_text()
    assert r"\toprule" in (study / "tables" / "pairs_fid.tex").read_text()
    reproduction = pd.read_csv(study / "tables" / "reproduction.csv")
    assert list(reproduction.setup) == ["bce", "per_class"] and set(reproduction.note) == {NOT_COMPARABLE}
    directions = pd.read_csv(study / "tables" / "reproduction_directions.csv")
    assert directions.paper_better.tolist() == ["per_class"] and directions.ours_better[0] in ("bce", "per_class")
    # Correcting a published number reruns its table only, never a training.
    corrected = {
        **restyled,
        "setups": {
            **SHRUNKEN["setups"],
            "bce": {
                **SHRUNKEN["setups"]["bce"],
                "reference": {"isc": {"mean": 2.6, "sd": 0.5, "source": "Lupo Pasini et al. (2021) table 5"}},
            },
        },
    }
    plan = snakemake(tmp_path, corrected, "-n", "--cores", "2", env=env)
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", plan.stdout.split("Job stats:")[1], re.MULTILINE))
    assert plan.returncode == 0 and set(jobs) == {"reproduction", "summary", "all", "total"}, plan.stdout[-2000:]

    captions = report_captions(tmp_path, restyled, env)
    assert "(2020) summary of execution times" in captions["results/tiny/tables/timing.md"]
    assert "which direction is better" in captions["results/tiny/tables/results.md"]


def test_a_failing_job_leaves_no_output_and_loses_no_finished_result(tmp_path, env):
    config = {**SHRUNKEN, "trials": 1, "classifier": {"epochs": 1, "min_accuracy": 1.0}}
    # bce without its in-training FID: a training that does not need the classifier.
    config["setups"] = {**SHRUNKEN["setups"], "bce": {**SHRUNKEN["setups"]["bce"], "score_period": 0}}
    done = snakemake(tmp_path, config, "--cores", "2", "--keep-going", env=env)
    assert done.returncode != 0
    study = tmp_path / "results" / "tiny"
    log = (study / "logs" / "train_classifier.log").read_text()
    assert "below classifier.min_accuracy=1.0" in log and "Traceback" not in log
    assert not (study / "classifier" / "classifier.pt").exists()
    # Work that did not depend on the classifier finished and stays.
    assert (study / "data" / "train.npz").is_file()
    assert (study / "runs" / "bce" / "trial0" / "run.json").is_file()
    # The grid and the pair set-ups with an in-training FID score with the classifier.
    assert not (study / "runs" / "grid" / "trial0").exists() and not (study / "runs" / "dp" / "trial0").exists()


def test_neither_a_killed_training_job_nor_a_killed_snakemake_loses_finished_work(tmp_path, env):
    from ganstudy.models.artifact import load_generator
    from jobs import kill_job, start_job, wait_for

    config = {
        "study": "tiny",
        "trials": 1,
        "setups": {
            "s": {
                "mode": "single",
                "network": "dcgan",
                "iterations": 6,
                "batch_size": 32,
                "latent_dim": 16,
                "checkpoint_period": 1,
            }
        },
    }
    target = "results/tiny/runs/s/trial0/run.json"
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    for folder in (whole, cut):
        folder.mkdir()
        (folder / "study.yaml").write_text(yaml.safe_dump(config))

    def start(folder: Path):
        # Targets after another option: --configfile takes several values.
        return start_job(
            [
                "snakemake",
                "-s",
                str(REPO / "Snakefile"),
                "-d",
                str(folder),
                "--configfile",
                str(folder / "study.yaml"),
                "--cores",
                "1",
                target,
            ],
            env,
        )

    def rerun(folder: Path) -> str:
        # Snakemake died with its lock held: a user unlocks. The job was never recorded as done: Snakemake
        # deletes its outputs and runs it again.
        assert snakemake(folder, config, "--unlock", env=env).returncode == 0
        again = snakemake(folder, config, "--cores", "1", "--rerun-incomplete", target, env=env)
        assert again.returncode == 0, again.stderr[-3000:]
        assert "rule train:" in again.stdout + again.stderr
        return (folder / "results" / "tiny" / "logs" / "train" / "s" / "trial0.log").read_text()

    # Snakemake stops while its job trains, as one in a closed login session or a head job at its wall time
    # would; the job goes on and finishes. The rerun restores its outputs instead of training again.
    run, kept = (
        whole / "results" / "tiny" / "runs" / "s" / "trial0",
        whole / "results" / "tiny" / "checkpoints" / "s" / "trial0",
    )
    job = start(whole)
    wait_for(lambda: (run / "heartbeat").is_file(), job)  # the trainer is under way
    os.kill(job.pid, signal.SIGSTOP)
    # A dry-run beside the run, which holds the study (stopped, it still holds both locks), with the profiles'
    # --rerun-incomplete: it says which run holds the study, with no error line, and gives the job that run has
    # under way its reason instead of "Forced execution".
    holder = json.loads((whole / "results" / "tiny" / ".lock").read_text())
    beside = snakemake(whole, config, "-n", "--rerun-incomplete", target, env=env)
    said = beside.stdout + beside.stderr
    assert beside.returncode == 0 and f"a run holds this study: pid {holder['pid']} on host {holder['host']}" in said
    assert "Error" not in said and "Forced execution" not in said and said.count("Job stats:") == 1, said[-3000:]
    assert "reason: under way in the run that holds the study (incomplete until it ends)" in said.lower(), said[-3000:]
    wait_for(lambda: (kept / "finished" / "FINISHED").is_file(), job)
    kill_job(job)
    finished = {path.name: path.read_bytes() for path in run.iterdir()}
    assert "run.json" in finished and "generator.pt" in finished
    log = rerun(whole)
    assert (
        "restored the outputs of this run, finished before its workflow recorded it, from "
        f"{kept.relative_to(whole)}/finished" in log
    )
    assert "iteration" not in log  # not one trained
    assert {path.name: path.read_bytes() for path in run.iterdir()} == finished
    assert "Nothing to be done" in snakemake(whole, config, "--cores", "1", target, env=env).stderr  # recorded now

    # The job itself is killed mid-run, as a wall-time limit would: no clean-up. The rerun resumes it.
    checkpoints = cut / "results" / "tiny" / "checkpoints" / "s" / "trial0"
    job = start(cut)
    wait_for(lambda: len(list(checkpoints.glob("pair/iter-*/COMPLETE"))) >= 2, job)
    kill_job(job)
    assert not (cut / target).exists() and checkpoints.exists()
    assert "resumed from the checkpoint of iteration" in rerun(cut)
    a, _ = load_generator(whole / target.replace("run.json", "generator.pt"))
    b, _ = load_generator(cut / target.replace("run.json", "generator.pt"))
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert os.listdir(checkpoints) == ["finished"]


def test_the_inception_extractor_needs_its_weights_file_before_any_job(tmp_path, env):
    config = {
        **SHRUNKEN,
        "evaluation": {
            **SHRUNKEN["evaluation"],
            "extractor": "inception",
            "inception_weights": str(tmp_path / "weights-inception.pth"),
        },
    }
    # A dry-run plans without it and says what to get; a real run stops before any job.
    planned = snakemake(tmp_path, config, "-n", env=env)
    assert planned.returncode == 0, planned.stderr[-2000:]
    assert (
        "weights-inception.pth: torch-fidelity's Inception-v3 weights; on a machine with internet download"
        in planned.stdout
    )
    done = snakemake(tmp_path, config, "--cores", "1", env=env)
    assert done.returncode != 0 and "this study needs files that are not here yet" in done.stdout + done.stderr
    assert not (tmp_path / "results").exists()
    (tmp_path / "weights-inception.pth").write_bytes(b"stand-in")
    planned = snakemake(tmp_path, config, "-n", "-p", env=env)
    assert planned.returncode == 0, planned.stderr[-2000:]
    assert re.search(r"^quality_statistics\s+1$", planned.stdout, re.MULTILINE)
    # Each scoring job reads the real images' Inception statistics (its arguments file passes them as
    # --quality-reference).
    scoring = planned_jobs(planned.stdout, "evaluate")
    assert scoring and all("results/tiny/classifier/reference_inception.npz" in job["input"] for job in scoring)
    # The shrunken study's few samples: Inception FID would be biased, and the DAG says so before any job.
    assert (
        f"evaluation.samples is {SHRUNKEN['evaluation']['samples']}, fewer than the 2049"
        in planned.stdout + planned.stderr
    )
