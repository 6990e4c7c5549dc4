"""What reading the workflow costs: every Snakemake process parses the Snakefile and builds the study's plan
(ganstudy.plan.study_plan), the main one and, on a cluster, each job's own before its command starts.

- startup: `snakemake --version`, Python and Snakemake alone (the floor under every figure below).
- list_rules: `snakemake --list-rules` on the finished default study: the Snakefile's parse and no DAG.
- dry_run: `snakemake -n` on the finished default study (it plans nothing): parse, plan and DAG.
- job_parse: what a cluster job's own Snakemake does before its command (`--mode remote`, the job's
  `--target-jobs`, here `evaluate` of the first run, with -n so that it stops where the command would start).
- largest_plan: `snakemake -n` of the largest shipped study (config/studies/lipizzaner_mnist_4lp.yaml, 381
  jobs) in an empty folder: parse, plan and a DAG of every job.
Each is the median wall time of --repeats rounds (each round runs every command once). --checkout times
another checkout of ganstudy (its Snakefile and its own package, e.g. a `git worktree` of an older commit):
compare figures measured in one run only. --quick: the default study unfinished, in a temporary folder, one
round: a check that the script runs, not a measurement. Prints one JSON record last (benchmarks/common.py).

    python benchmarks/parse_time.py [--quick] [--study results/digits_grid] [--checkout PATH] [--out FILE]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ENV, REPO, emit, interleaved_medians, parser

LARGEST = "config/studies/lipizzaner_mnist_4lp.yaml"


def commands(study: Path, scratch: Path) -> dict[str, list[str]]:
    """Each measured Snakemake command line; ``study``: a default study's folder, ``scratch``: an empty one."""
    default = ["--configfile", "config/config.yaml", "--config", f"results_dir={study.parent}", "--cores", "2"]
    first_run = "evaluate:setup=grid1x1,trial=0"
    return {
        "startup": ["--version"],
        "list_rules": ["--list-rules", *default],
        "dry_run": ["-n", *default],
        "job_parse": [
            *("--mode", "remote", "--target-jobs", first_run, "--allowed-rules", "evaluate"),
            *("-n", "--force", "--nolock", *default),
        ],
        "largest_plan": ["-n", "--configfile", LARGEST, "--config", f"results_dir={scratch}", "--cores", "2"],
    }


def timed(command: list[str], checkout: Path) -> float:
    """Wall seconds of ``snakemake command`` run in ``checkout`` with its own package first on the path."""
    env = {**ENV, "PYTHONPATH": str(checkout / "src")}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", *command], cwd=checkout, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"snakemake {' '.join(command)} failed (exit {done.returncode})")
    return seconds


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--study", type=Path, default=REPO / "results" / "digits_grid", help="a finished default study")
    cli.add_argument("--checkout", type=Path, default=REPO, help="the ganstudy checkout whose workflow is timed")
    cli.add_argument("--repeats", type=int, default=5)
    args = cli.parse_args()
    checkout = args.checkout.resolve()
    with tempfile.TemporaryDirectory(prefix="parse-time-") as folder:
        scratch = Path(folder, "scratch")
        if args.quick:
            study = Path(folder, "results", "digits_grid")
        else:
            if not (args.study / "summary.md").is_file():
                raise SystemExit(f"{args.study} is not a finished study (no summary.md): run `make run` first")
            study = Path(folder, "results", "digits_grid")
            shutil.copytree(args.study, study, symlinks=True)
        lines = commands(study, scratch)
        repeats = 1 if args.quick else args.repeats
        medians = interleaved_medians(lambda name, _: timed(lines[name], checkout), lines, repeats)
    results = {name: round(seconds, 2) for name, seconds in medians.items()}
    emit("parse_time", {**results, "repeats": repeats, "checkout": str(checkout)}, args)


if __name__ == "__main__":
    main()
