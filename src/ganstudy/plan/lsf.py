"""IBM LSF for Snakemake's cluster-generic executor (profiles/summit): submit a job script with the
whole-node request Summit needs, and answer the executor's status polls.

Snakemake's LSF plugin cannot say ``-nnodes`` or ``-alloc_flags``; these two commands can. Project
and queue fall back to LSF's own LSB_DEFAULTPROJECT / LSB_DEFAULTQUEUE when not given.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from ganstudy.errors import GanstudyError

# The line of a Snakemake job script that describes its job as JSON (rule, wildcards, resources).
PROPERTIES = re.compile(r"^# properties = (\{.*\})$", re.MULTILINE)
# bjobs STAT -> what cluster-generic's status command must print.
STATES = {"DONE": "success", "EXIT": "failed", "ZOMBI": "failed"}


@dataclass(frozen=True)
class Request:
    """What one job asks of LSF. ``warning_minutes`` > 0: LSF sends SIGUSR1 that long before the wall time
    (training checkpoints and stops)."""

    name: str
    nodes: int
    minutes: int
    log_dir: str
    project: str | None = None
    queue: str | None = None
    alloc_flags: str | None = None
    warning_minutes: int = 0
    select: str | None = None  # the node kind (a site's constraint): -R "select[...]"


def bsub_command(request: Request) -> list[str]:
    """The bsub call for one job; the job script goes to bsub's standard input, as LSF expects."""
    hours, rest = divmod(int(request.minutes), 60)
    name, log_dir = request.name, request.log_dir
    line = [
        "bsub",
        "-J",
        name,
        "-nnodes",
        str(request.nodes),
        "-W",
        f"{hours}:{rest:02d}",
        "-o",
        f"{log_dir}/{name}.%J.out",
        "-e",
        f"{log_dir}/{name}.%J.err",
    ]
    if request.project:
        line += ["-P", request.project]
    if request.queue:
        line += ["-q", request.queue]
    if request.alloc_flags:
        line += ["-alloc_flags", request.alloc_flags]
    if request.warning_minutes > 0:
        line += ["-wa", "USR1", "-wt", str(request.warning_minutes)]
    if request.select:
        line += ["-R", f"select[{request.select}]"]
    return line


def job_name(rule: str, script: str) -> str:
    """``rule`` and the job's wildcard values (``train.grid2x2.0``), from the properties line Snakemake writes
    into each job script, so that bjobs and the log's name say which set-up and trial a job trains; ``rule``
    alone for a job without wildcards or a script without that line."""
    found = PROPERTIES.search(script)
    if found is None:
        return rule
    try:
        wildcards = json.loads(found.group(1)).get("wildcards") or {}
    except json.JSONDecodeError:
        return rule
    return ".".join([rule, *(re.sub(r"[^\w.-]", "_", str(value)) for value in wildcards.values())])


def submit(jobscript: str, request: Request) -> str:
    """Submit and return LSF's job id (bsub prints "Job <123> is submitted to queue <batch>."); the job is
    named by its rule and wildcards (job_name)."""
    Path(request.log_dir).mkdir(parents=True, exist_ok=True)
    script = Path(jobscript).read_text(errors="replace")
    request = replace(request, name=job_name(request.name, script))
    done = subprocess.run(bsub_command(request), input=script, capture_output=True, text=True)
    found = re.search(r"Job <(\d+)> is submitted", done.stdout)
    if done.returncode != 0 or not found:
        raise GanstudyError(
            f"bsub refused the job {request.name} (exit {done.returncode}): {(done.stderr or done.stdout).strip()}"
        )
    return found.group(1)


def status(job_id: str) -> str:
    """running, success or failed, from ``bjobs -a`` (finished jobs stay listed for LSF's CLEAN_PERIOD)."""
    done = subprocess.run(["bjobs", "-a", "-noheader", "-o", "stat", job_id], capture_output=True, text=True)
    state = done.stdout.strip().split()[0] if done.stdout.strip() else ""
    if not state:
        # Forgotten by LSF: report it failed, so Snakemake resubmits (training resumes from checkpoints).
        # Any other bjobs failure (a busy batch system) is asked again at the next poll.
        return "failed" if "not found" in done.stderr else "running"
    return STATES.get(state, "running")
