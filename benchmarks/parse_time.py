"""What reading the workflow costs: every Snakemake process parses the Snakefile and builds the study's plan
(ganstudy.plan.study_plan), the main one and, on a cluster, each job's own before its command starts.

- startup: `snakemake --version`, Python and Snakemake alone (the floor under every figure below).
- list_rules: `snakemake --list-rules` on the finished default study: the Snakefile's parse and no DAG.
- dry_run: `snakemake -n` on the finished default study (it plans nothing): parse, plan and DAG.
- job_parse: what a cluster job's own Snakemake does before its command (`--mode remote`, the job's
  `--target-jobs`, here `evaluate` of the first run, with -n so that it stops where the command would start).
- largest_plan: `snakemake -n` of the largest shipped study (config/studies/lipizzaner_mnist_4lp.yaml, 381
  jobs) in an empty folder: parse, plan and a DAG of every job.
Each is the median wall time of --repeats rounds (each round runs every command once). --baseline times
another checkout of ganstudy too (its Snakefile and its own package, e.g. a `git worktree` of an older
commit) in the same rounds: <key>_baseline, and <key>_ratio = this checkout's over the baseline's (null
without one). --quick: the default study unfinished, in a temporary folder, one round, this checkout as its
own baseline: a check that the script runs, not a measurement. Prints one JSON record last (benchmarks/common.py).

    python benchmarks/parse_time.py [--quick] [--study results/digits_grid] [--baseline PATH] [--out FILE]
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
    cli.add_argument("--baseline", type=Path, help="another ganstudy checkout timed in the same rounds")
    cli.add_argument("--repeats", type=int, default=5)
    args = cli.parse_args()
    # Quick mode times this checkout as its own baseline: the path is run, its ratios are about 1.
    baseline = REPO if args.quick else args.baseline
    checkouts = {"": REPO, **({"_baseline": baseline.resolve()} if baseline else {})}
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
        runs = {name + suffix: (lines[name], checkout) for suffix, checkout in checkouts.items() for name in lines}
        medians = interleaved_medians(lambda run, _: timed(*runs[run]), runs, repeats)
    results: dict[str, float | int | None] = {"repeats": repeats}
    for name in lines:
        before = medians.get(f"{name}_baseline")
        results[name] = round(medians[name], 2)
        results[f"{name}_baseline"] = None if before is None else round(before, 2)
        results[f"{name}_ratio"] = None if before is None else round(medians[name] / before, 3)
    emit("parse_time", results, args)


if __name__ == "__main__":
    main()
