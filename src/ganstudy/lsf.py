"""IBM LSF for Snakemake's cluster-generic executor (profiles/summit): submit a job script with the
whole-node request Summit needs, and answer the executor's status polls.

Snakemake's LSF plugin cannot say ``-nnodes`` or ``-alloc_flags``; these two commands can. Project
and queue fall back to LSF's own LSB_DEFAULTPROJECT / LSB_DEFAULTQUEUE when not given.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ganstudy.errors import GanstudyError

# bjobs STAT -> what cluster-generic's status command must print.
STATES = {"DONE": "success", "EXIT": "failed", "ZOMBI": "failed"}


def bsub_command(
    jobscript: str,
    name: str,
    nodes: int,
    minutes: int,
    project: str | None,
    queue: str | None,
    alloc_flags: str | None,
    log_dir: str,
    warning_minutes: int = 0,
) -> list[str]:
    """The bsub call for one job; the job script goes to bsub's standard input, as LSF expects.
    ``warning_minutes`` > 0: LSF sends SIGUSR1 that long before the wall time (training checkpoints and stops)."""
    hours, rest = divmod(int(minutes), 60)
    line = [
        "bsub",
        "-J",
        name,
        "-nnodes",
        str(nodes),
        "-W",
        f"{hours}:{rest:02d}",
        "-o",
        f"{log_dir}/{name}.%J.out",
        "-e",
        f"{log_dir}/{name}.%J.err",
    ]
    if project:
        line += ["-P", project]
    if queue:
        line += ["-q", queue]
    if alloc_flags:
        line += ["-alloc_flags", alloc_flags]
    if warning_minutes > 0:
        line += ["-wa", "USR1", "-wt", str(warning_minutes)]
    return line


def submit(
    jobscript: str,
    name: str,
    nodes: int,
    minutes: int,
    project: str | None,
    queue: str | None,
    alloc_flags: str | None,
    log_dir: str,
    warning_minutes: int = 0,
) -> str:
    """Submit and return LSF's job id (bsub prints "Job <123> is submitted to queue <batch>.")."""
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    line = bsub_command(jobscript, name, nodes, minutes, project, queue, alloc_flags, log_dir, warning_minutes)
    with open(jobscript, "rb") as script:
        done = subprocess.run(line, stdin=script, capture_output=True, text=True)
    found = re.search(r"Job <(\d+)> is submitted", done.stdout)
    if done.returncode != 0 or not found:
        raise GanstudyError(
            f"bsub refused the job {name} (exit {done.returncode}): {(done.stderr or done.stdout).strip()}"
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
