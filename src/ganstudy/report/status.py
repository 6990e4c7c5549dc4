"""``ganstudy status``: where a study stands, from the files in results/<study>/ alone (so it works on a
login node while the jobs run on compute nodes): per set-up and trial, done / running / stopped /
failed / waiting, the iteration reached with the score of that moment, the ETA and the age of the
latest progress line, and for a failed job its log's last error line.

It reads plan.json (written by the workflow when a run starts: the set-ups, their trials and
iterations), each training job's log (the progress lines of ganstudy.train.progress, the line naming
rank 0's process, error and stop lines) and the run's files (run.json marks a finished run; losses.csv,
live while the job runs, gives the iteration and score; the heartbeat file says the process lives).

A job without run.json is running only while its process is alive: on this host, the process the log
names must exist; from another host, its heartbeat file must be younger than ``STALE_SECONDS``; before
the log names a process (the job is still reading its data) or after its training ended, the log must
have no error or stop line and be younger than ``STALE_SECONDS``. A job not running is stopped or
failed by the last error or stop line of its log, and failed when there is none (killed outright).
"""

from __future__ import annotations

import csv
import io
import os
import re
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ganstudy.core.atomic import read_json, write_json
from ganstudy.core.procfs import pid_alive
from ganstudy.errors import GanstudyError
from ganstudy.study.folder import StudyFolder
from ganstudy.study.outcomes import diverged, divergence_text
from ganstudy.study.trials import StudyTrials
from ganstudy.train.progress import HEARTBEAT, HEARTBEAT_SECONDS, LINE, PROCESS, duration, score_columns

ERROR = re.compile(
    r"(ganstudy [\w-]+: error: .*|ganstudy heartbeat: .*|^\w*(?:Error|Exception): .*|^.*Killed.*$|MPI_ABORT.*)"
)
# The job's own end on a scheduler's signal (parallel.stop) and the signal's receipt, for a job killed before it.
STOPPED = re.compile(r"^ganstudy(?: [\w-]+)?: (?:.* stopped by .*|SIG\w+ received.*)")
TRACEBACK = "Traceback (most recent call last):"
# Ten missed heartbeats: clocks of a login node and a file server that disagree by minutes still agree on this.
STALE_SECONDS = 10 * HEARTBEAT_SECONDS
# config.schema.yaml's defaults of the keys that place a study's folder (a test holds them to the schema).
CONFIG_DEFAULTS = {"results_dir": "results", "study": "digits_baseline"}


def study_runs(config: Mapping[str, Any]) -> dict[str, Any]:
    """The runs a validated config plans: its set-ups with their modes, trials (a schedule's most) and
    iterations, and a schedule's looks."""
    trials = StudyTrials.of(config)
    return {
        "study": config["study"],
        "setups": {
            name: {"mode": setup["mode"], "trials": trials.per_setup[name], "iterations": setup["iterations"]}
            for name, setup in config["setups"].items()
        },
        **({"looks": list(trials.schedule.looks)} if trials.schedule else {}),
    }


def write_plan(study_dir: str | os.PathLike[str], config: Mapping[str, Any]) -> None:
    """The runs a study plans (study_runs), for ``status`` and ``export`` of the study's folder."""
    write_json(StudyFolder.at(study_dir).plan(), study_runs(config))


@dataclass
class TrialStatus:
    setup: str
    trial: int
    state: str  # done, diverged, running, stopped, failed, waiting, not needed (a schedule's round no look asked for)
    iteration: int | None
    iterations: int
    score: str
    eta: str
    note: str
    job: str = ""  # the batch scheduler's job that runs or ran it ("Slurm job 123"), where the run names one
    # Training seconds: a finished run's (run.json), or a running one's per iteration (its log's s/it).
    seconds: float | None = None
    seconds_per_iteration: float | None = None


def _score_cell(row: dict[str, str], columns: tuple[str, ...]) -> str:
    for column in columns:
        if row.get(column):
            return f"{column} {float(row[column]):.4g}"
    return ""


def _reached_in_table(table: Path, columns: tuple[str, ...]) -> tuple[int, str] | None:
    """The iteration of a losses.csv's last whole row and the latest score up to it, marked with its own
    iteration when older (scores come every score_period): one moment, not two."""
    text = table.read_text(errors="replace")
    # A live table's last line may be torn: only whole lines count.
    rows = list(csv.DictReader(io.StringIO(text[: text.rfind("\n") + 1])))
    if not rows:
        return None
    score, at = "", None
    for row in rows:
        if cell := _score_cell(row, columns):
            score, at = cell, row["iteration"]
    iteration = int(rows[-1]["iteration"])
    return iteration, score + (f" (at {at})" if score and int(at) != iteration else "")


def _reached_in_line(line: re.Match[str], columns: tuple[str, ...]) -> tuple[int, str]:
    """The iteration of a progress line and the score it shows (already marked "(at n)" when older)."""
    values = (line.group(7) or "").split("; ")[0].split(", ")
    score = next((value for column in columns for value in values if value.startswith(f"{column} ")), "")
    return int(line.group(3)), score


def _reached(run: Path, line: re.Match[str] | None, columns: tuple[str, ...]) -> tuple[int | None, str]:
    """Iteration and score (the first of ``columns`` that has one) from the same row: rank 0's losses.csv
    (appended every iteration), else the log's last progress line (a failed job's losses.csv is deleted
    by Snakemake)."""
    table = run / "losses.csv"
    reached = _reached_in_table(table, columns) if table.is_file() else None
    if reached is None and line is not None:
        reached = _reached_in_line(line, columns)
    return reached or (None, "")


def _age(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m ago" if minutes >= 60 else f"{minutes}m{int(seconds % 60):02d}s ago"


def _last_event(lines: list[str]) -> tuple[str, str] | None:
    """The log's last error or stop line, as ("failed" or "stopped", line); a traceback counts by its
    exception line (the first unindented line after its header), whatever the exception is called."""
    event, in_traceback = None, False
    for line in lines:
        if line.startswith(TRACEBACK):
            in_traceback = True
        elif in_traceback:
            if line.strip() and not line[0].isspace():
                event, in_traceback = ("failed", line.strip()), False
        elif ERROR.search(line):
            event = ("failed", line.strip())
        elif STOPPED.match(line):
            event = ("stopped", line.strip())
    return event


def _liveness(named: re.Match[str] | None, log: Path, run: Path, ended: bool, now: float) -> tuple[bool, str]:
    """Whether the job's process (the log's last line naming it, ``named``) is alive, and the evidence when
    it is not (see the module's rules)."""
    if named:
        pid, host = int(named.group(1)), named.group(2)
        if host == socket.gethostname():
            return pid_alive(pid, b"ganstudy"), f"process {pid} on this host is gone"
        heartbeat = run / HEARTBEAT
        if heartbeat.is_file():
            age = now - heartbeat.stat().st_mtime
            return age < STALE_SECONDS, f"no heartbeat from process {pid} on {host} since {_age(age)}"
    age = now - log.stat().st_mtime
    return not ended and age < STALE_SECONDS, f"the log was last written {_age(age)}"


def trial_status(
    study_dir: Path, setup: str, trial: int, iterations: int, columns: tuple[str, ...], now: float | None = None
) -> TrialStatus:
    """One trial's state; its score is the first of the in-training score ``columns`` (score_columns(),
    looked up once per study: it reads the installed entry points) that its rows have."""
    now = time.time() if now is None else now
    folder = StudyFolder.at(study_dir)
    run, log = Path(folder.run(setup, trial)), Path(folder.train_log(setup, trial))
    if (run / "run.json").is_file():
        record = read_json(run / "run.json")
        job, score = record.get("scheduler_job") or "", _reached(run, None, columns)[1]
        if diverged(record):
            where = f"losses not finite: {divergence_text(record)} (an outcome: its scores are inf, ranked worst)"
            stopped = max(facts["iteration"] for facts in record["diverged"].values())
            return TrialStatus(setup, trial, "diverged", stopped, iterations, score, "", where, job)
        seconds = record.get("train_seconds")
        return TrialStatus(setup, trial, "done", iterations, iterations, score, "", "", job, seconds=seconds)
    if not log.is_file():
        return TrialStatus(setup, trial, "waiting", None, iterations, _reached(run, None, columns)[1], "", "")
    lines = log.read_text(errors="replace").splitlines()
    last = next((match for line in reversed(lines) if (match := LINE.match(line))), None)
    iteration, score = _reached(run, last, columns)
    event = _last_event(lines)
    named = next((match for line in reversed(lines) if (match := PROCESS.match(line))), None)
    alive, evidence = _liveness(named, log, run, event is not None, now)
    job = (named.group(3) or "") if named else ""
    if alive:
        note = f"last line {_age(now - log.stat().st_mtime)}"
        if last and last.group(7) and "slowest rank" in last.group(7):
            note += "; " + last.group(7).split("; ")[-1]
        eta, rate = (last.group(6), float(last.group(5))) if last else ("", None)
        return TrialStatus(
            setup, trial, "running", iteration, iterations, score, eta, note, job, seconds_per_iteration=rate
        )
    if event and event[0] == "stopped":
        return TrialStatus(
            setup, trial, "stopped", iteration, iterations, score, "", f"{event[1]} (resumes when rerun)", job
        )
    cause = event[1] if event else f"{evidence}, without an error line (killed: out of memory, wall time?)"
    return TrialStatus(setup, trial, "failed", iteration, iterations, score, "", f"{cause} (log {log})", job)


def config_study_folder(argument: str, directory: str | os.PathLike[str] | None = None) -> Path | None:
    """The folder of the study a config file describes, results_dir/study under the workflow's working
    directory: ``directory`` (Snakemake's --directory) where given; else the current folder if the study
    was run there, else the nearest folder above the config file where it was (config/x.yaml of a
    checkout: the checkout), else the current folder; relative to the current folder where it is there.
    None when ``argument`` is no YAML file's name."""
    path = Path(argument)
    if path.suffix not in (".yaml", ".yml"):
        return None
    if not path.is_file():
        raise GanstudyError(f"{path}: no such study config")
    config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(config, dict):
        raise GanstudyError(f"{path}: a study config is a mapping of keys to values")
    settings = {**CONFIG_DEFAULTS, **config}
    relative = Path(settings["results_dir"]) / settings["study"]
    if directory is not None:
        return Path(directory) / relative

    def planned(folder: Path) -> bool:
        return Path(StudyFolder.at(folder).plan()).is_file()

    if planned(relative):
        return relative
    return next((base / relative for base in path.resolve().parents if planned(base / relative)), relative)


def study_status(study_dir: str | os.PathLike[str], runs: dict[str, Any] | None = None) -> list[TrialStatus]:
    """Every run's state: those of ``runs`` (study_runs of a config), or of the plan its last run wrote."""
    folder, plan_file = Path(study_dir), StudyFolder.at(study_dir).plan()
    if not Path(plan_file).is_file():
        raise GanstudyError(
            f"{plan_file} is missing: the study has not been run yet (the workflow writes it when a run "
            "starts); give results/<study> of a study that has, or the workflow's working directory (--directory)"
        )
    plan = runs or read_json(plan_file)
    columns = score_columns()
    rows = [
        trial_status(folder, name, trial, setup["iterations"], columns)
        for name, setup in plan["setups"].items()
        for trial in range(setup["trials"])
    ]
    return _rounds(rows, plan, folder) if plan.get("looks") else rows


def ended_at(study_dir: str | os.PathLike[str], plan: dict[str, Any]) -> int | None:
    """Trials on a schedule: the trials per set-up at which the looks ended the study; None for fixed trials
    or a study whose looks go on."""
    decision = Path(StudyFolder.at(study_dir).decision())
    return read_json(decision)["trials"] if plan.get("looks") and decision.is_file() else None


def stopped_setups(study_dir: str | os.PathLike[str], plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Trials on a schedule: the set-ups that stopped taking rounds before the study ended, by the latest
    look taken (its record's ``setups``: the look, why, and the trials each took)."""
    folder = StudyFolder.at(study_dir)
    for look in range(len(plan.get("looks", [])), 0, -1):
        path = Path(folder.look(look))
        if path.is_file():
            setups = read_json(path).get("setups", {})
            return {name: entry for name, entry in setups.items() if "stopped_at" in entry}
    return {}


def _rounds(rows: list[TrialStatus], plan: dict[str, Any], folder: Path) -> list[TrialStatus]:
    """Trials on a schedule: a waiting trial past the first look trains only if a look asks for its round,
    none does once the looks have ended the study, and none of a set-up that stopped taking rounds."""
    ended = ended_at(folder, plan)
    stopped = stopped_setups(folder, plan)
    for row in rows:
        if row.state != "waiting" or row.trial < plan["looks"][0]:
            continue
        stop = stopped.get(row.setup)
        if stop is not None and row.trial >= stop["trials"]:
            row.state = "not needed"
            row.note = f"{row.setup} stopped taking rounds at look {stop['stopped_at']}: {stop['why']}"
        elif ended is not None and row.trial >= ended:
            row.state, row.note = "not needed", f"the looks ended the study at {ended} trials per set-up"
        else:
            row.note = "a later round: trains only if a look leaves a comparison open"
    return rows


def status_table(rows: list[TrialStatus]) -> str:
    """One line per trial; the scheduler's job of each is a column where any trial ran in one."""
    jobs = any(r.job for r in rows)
    header = ("set-up", "trial", "state", "iteration", "latest score", "ETA", *(("job",) if jobs else ()), "note")
    cells = [header] + [
        (
            r.setup,
            str(r.trial),
            r.state,
            f"{r.iteration if r.iteration is not None else '-'}/{r.iterations}",
            r.score,
            r.eta,
            *((r.job or "-",) if jobs else ()),
            r.note,
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header) - 1)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1] for row in cells]
    counts = {
        state: sum(r.state == state for r in rows)
        for state in ("done", "diverged", "running", "stopped", "failed", "waiting", "not needed")
    }
    summary = ", ".join(f"{count} {state}" for state, count in counts.items() if count)
    eta = study_eta(rows)
    return "\n".join(line.rstrip() for line in lines) + f"\n{len(rows)} runs: {summary}" + (f"\n{eta}" if eta else "")


def study_eta(rows: list[TrialStatus]) -> str | None:
    """While trials run: when the study's training ends if every waiting trial trains, each at its set-up's
    training time per trial (its finished trials' mean, else a running trial's rate over its iterations), as
    many side by side as run now; None where nothing runs."""
    running = [r for r in rows if r.state == "running" and r.seconds_per_iteration is not None]
    if not running:
        return None
    per_trial: dict[str, list[float]] = {}
    for row in rows:
        if row.state == "done" and row.seconds is not None:
            per_trial.setdefault(row.setup, []).append(row.seconds)
    for row in running:
        per_trial.setdefault(row.setup, [row.seconds_per_iteration * row.iterations])
    waiting = [r for r in rows if r.state in ("waiting", "stopped")]
    unknown = sorted({r.setup for r in waiting if r.setup not in per_trial})
    if unknown:
        return f"study ETA: not yet known (no trial of {', '.join(unknown)} has trained long enough to time it)"
    left = sum(r.seconds_per_iteration * (r.iterations - (r.iteration or 0)) for r in running)
    left += sum(sum(per_trial[r.setup]) / len(per_trial[r.setup]) for r in waiting)
    more = f"; {len(waiting)} more to train, each at its set-up's time per trial" if waiting else ""
    return (
        f"study ETA: training ends in about {duration(left / len(running))} ({len(running)} trial(s) side by side "
        f"as now{more}; then the scoring and tables)"
    )
