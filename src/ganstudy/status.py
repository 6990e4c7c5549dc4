"""``ganstudy status``: where a study stands, from the files in results/<study>/ alone (so it works on a
login node while the jobs run on compute nodes): per set-up and trial, done / running / stopped /
failed / waiting, the iteration reached, the latest in-training score, the ETA and the age of the
latest progress line, and for a failed job its log's last error line.

It reads plan.json (written by the workflow when a run starts: the set-ups, their trials and
iterations), each training job's log (the progress lines of ganstudy.train.progress) and the run's
files (run.json marks a finished run; losses.csv, live while the job runs, gives the latest score).
"""

from __future__ import annotations

import csv
import io
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ganstudy.atomic import read_json, write_json
from ganstudy.errors import GanstudyError
from ganstudy.train.progress import LINE

PLAN = "plan.json"
# The score columns of losses.csv, by mode and kind: the pair trainer's and the grid's best cell.
SCORE_COLUMNS = ("fid_best", "fid", "l1", "showers")
ERROR = re.compile(r"(ganstudy [\w-]+: error: .*|^\w*(?:Error|Exception): .*|^.*Killed.*$|MPI_ABORT.*)")
STOPPED = re.compile(r"^ganstudy train: .*(stopped|signal).*", re.IGNORECASE)


def write_plan(study_dir: str | os.PathLike[str], study: str, setups: dict[str, dict[str, Any]], trials: int) -> None:
    """The runs a study plans, for ``status``: its set-ups with their modes, trials and iterations."""
    write_json(Path(study_dir) / PLAN, {"study": study, "setups": {
        name: {"mode": setup["mode"], "trials": setup.get("trials") or trials, "iterations": setup["iterations"]}
        for name, setup in setups.items()}})


@dataclass
class TrialStatus:
    setup: str
    trial: int
    state: str  # done, running, stopped, failed, waiting
    iteration: int | None
    iterations: int
    score: str
    eta: str
    note: str


def _latest_score(run: Path) -> str:
    """The latest in-training score of a run's losses.csv (live or final), ignoring a torn last line."""
    found = ""
    for table in sorted(run.glob("losses*.csv")):
        text = table.read_text(errors="replace")
        text = text[: text.rfind("\n") + 1]
        for row in csv.DictReader(io.StringIO(text)):
            for column in SCORE_COLUMNS:
                if row.get(column):
                    found = f"{column} {float(row[column]):.4g} (at {row['iteration']})"
                    break
    return found


def _age(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m ago" if minutes >= 60 else f"{minutes}m{int(seconds % 60):02d}s ago"


def trial_status(study_dir: Path, setup: str, trial: int, iterations: int, now: float | None = None) -> TrialStatus:
    run = study_dir / "runs" / setup / f"trial{trial}"
    log = study_dir / "logs" / "train" / setup / f"trial{trial}.log"
    score = _latest_score(run) if run.is_dir() else ""
    if (run / "run.json").is_file():
        return TrialStatus(setup, trial, "done", iterations, iterations, score, "", "")
    if not log.is_file():
        return TrialStatus(setup, trial, "waiting", None, iterations, score, "", "")
    lines = log.read_text(errors="replace").splitlines()
    progress = [(index, match) for index, line in enumerate(lines) if (match := LINE.match(line))]
    last_index, last = progress[-1] if progress else (-1, None)
    iteration = int(last.group(3)) if last else None
    after = lines[last_index + 1 :]
    errors = [line.strip() for line in after if ERROR.search(line)]
    stopped = [line.strip() for line in after if STOPPED.match(line)]
    age = _age((now or time.time()) - log.stat().st_mtime)
    if stopped and not errors:
        return TrialStatus(setup, trial, "stopped", iteration, iterations, score, "", f"{stopped[-1]} (resumes when rerun)")
    if errors:
        return TrialStatus(setup, trial, "failed", iteration, iterations, score, "", f"{errors[-1]} (log {log})")
    note = f"last line {age}"
    if last and last.group(7) and "slowest rank" in last.group(7):
        note += "; " + last.group(7).split("; ")[-1]
    return TrialStatus(setup, trial, "running", iteration, iterations, score, last.group(6) if last else "", note)


def study_status(study_dir: str | os.PathLike[str]) -> list[TrialStatus]:
    folder = Path(study_dir)
    if not (folder / PLAN).is_file():
        raise GanstudyError(f"{folder / PLAN} is missing: the study has not been run yet (the workflow writes it when a run "
                            "starts); give results/<study> of a study that has")
    plan = read_json(folder / PLAN)
    return [trial_status(folder, name, trial, setup["iterations"])
            for name, setup in plan["setups"].items() for trial in range(setup["trials"])]


def status_table(rows: list[TrialStatus]) -> str:
    header = ("set-up", "trial", "state", "iteration", "latest score", "ETA", "note")
    cells = [header] + [(r.setup, str(r.trial), r.state, f"{r.iteration if r.iteration is not None else '-'}/{r.iterations}", r.score,
                         r.eta, r.note) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header) - 1)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1] for row in cells]
    counts = {state: sum(r.state == state for r in rows) for state in ("done", "running", "stopped", "failed", "waiting")}
    summary = ", ".join(f"{count} {state}" for state, count in counts.items() if count)
    return "\n".join(line.rstrip() for line in lines) + f"\n{len(rows)} runs: {summary}"
