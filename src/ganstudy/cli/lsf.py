"""LSF's submission and status commands (the summit profile)."""

from __future__ import annotations

import argparse

from ganstudy.cli.options import Commands


def _bsub(args: argparse.Namespace) -> None:
    from ganstudy.plan.lsf import Request, submit

    request = Request(
        args.name,
        args.nodes,
        args.minutes,
        args.log_dir,
        args.project,
        args.queue,
        args.alloc_flags,
        args.warning_minutes,
        args.select,
    )
    print(submit(args.jobscript, request))


def _bsub_command(commands: Commands) -> None:
    sub = commands.step("bsub", _bsub, "submit a Snakemake job script to LSF (profiles/summit); prints the job id")
    sub.add_argument("--name", required=True)
    sub.add_argument("--nodes", type=int, required=True, help="whole nodes (-nnodes)")
    sub.add_argument("--minutes", type=int, required=True, help="wall time (-W)")
    sub.add_argument("--project", help="-P; empty: LSB_DEFAULTPROJECT")
    sub.add_argument("--queue", help="-q; empty: LSB_DEFAULTQUEUE")
    sub.add_argument("--alloc-flags", help='-alloc_flags, e.g. "gpumps smt4"')
    sub.add_argument("--select", help='-R "select[...]": the node kind (the site\'s constraint); empty: any node')
    sub.add_argument("--log-dir", default="logs/lsf")
    sub.add_argument(
        "--warning-minutes", type=int, default=0, help="-wa USR1 -wt: signal the job this long before its wall time"
    )
    sub.add_argument("jobscript")


def _bjobs_status(args: argparse.Namespace) -> None:
    from ganstudy.plan.lsf import status

    print(status(args.job_id))


def _bjobs_status_command(commands: Commands) -> None:
    sub = commands.step("bjobs-status", _bjobs_status, "running, success or failed for an LSF job id (profiles/summit)")
    sub.add_argument("job_id")


def register(commands: Commands) -> None:
    """Steps of LSF's submission and status commands of the summit profile."""
    _bsub_command(commands)
    _bjobs_status_command(commands)
