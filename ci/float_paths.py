"""One grid set-up's trials under two float paths of the same code on one machine, scored alike (issue 82).

    snakemake --profile profiles/local --configfile STUDY.yaml --until reference_statistics training_job compute_options
    python ci/float_paths.py train results/<study> grid2x2 --trials 0-15 --path default --path COMPATIBLE
    python ci/float_paths.py compare results/<study> grid2x2

``train`` trains each trial of a set-up of a planned study (its jobs/<set-up>.json, site/compute.json and
classifier) under each float path: ``default`` is MKL's own choice of kernels for this CPU, any other value
is given to MKL as MKL_CBWR (COMPATIBLE: MKL's generic kernels, other float bits on any CPU). Runs go to
<study>/float-paths/<path>/runs/<set-up>/trial<t>, two jobs at a time, one thread each, and each is scored
by the study's evaluate step on the default path with the study's classifier, so that the paths differ in
their training alone. A trial already trained is kept.

``compare`` prints each path's final scores, the in-training curve's end (``fid_best`` and ``fid_mean``, the
mean over the last 50 iterations) and the best cell's final in-training score, and compares the paths'
final scores by the study's exact rank test, A12 and the Hodges-Lehmann shift.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from ganstudy.stats.summary import markdown_table
from ganstudy.stats.tests import a12, a12_interval, rank_test, shift_interval

DEFAULT = "default"


def _trials(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def _folder(study: Path, path: str, setup: str, trial: int, kind: str) -> Path:
    return study / "float-paths" / path / kind / setup / f"trial{trial}"


def _environment(path: str) -> dict[str, str]:
    environ = {key: value for key, value in os.environ.items() if key != "MKL_CBWR"}
    return environ if path == DEFAULT else {**environ, "MKL_CBWR": path}


def train_and_score(study: Path, setup: str, trial: int, path: str) -> str:
    """One trial on one float path, then its evaluate step on the default path; what happened, in a line."""
    run = _folder(study, path, setup, trial, "runs")
    score = _folder(study, path, setup, trial, "scores").with_suffix(".json")
    if not (run / "run.json").is_file():
        run.mkdir(parents=True, exist_ok=True)
        command = ["mpiexec", "-n", "1", "ganstudy", "train", str(study / "jobs" / f"{setup}.json")]
        command += ["--compute", str(study / "site" / "compute.json"), "--trial", str(trial), "--out-dir", str(run)]
        with open(run.parent / f"trial{trial}.log", "w") as log:
            subprocess.run(command, env=_environment(path), stdout=log, stderr=subprocess.STDOUT, check=True)
    if not score.is_file():
        # The study's own evaluate arguments, with this run's generator, record and score file.
        arguments = (study / "arguments" / "evaluate" / setup / f"trial{trial}.args").read_text().splitlines()
        given = dict(zip(arguments[::2], arguments[1::2]))
        given |= {"--generator": str(run / "generator.pt"), "--run-record": str(run / "run.json"), "--out": str(score)}
        command = ["ganstudy", "evaluate", *(item for pair in given.items() for item in pair), "--threads", "1"]
        subprocess.run(command, env=_environment(DEFAULT), capture_output=True, check=True)
    return f"{path} {setup}/trial{trial}: {json.loads(score.read_text())['scores']}"


def _train(args: argparse.Namespace) -> None:
    jobs = [(trial, path) for trial in _trials(args.trials) for path in args.path]
    with ThreadPoolExecutor(args.jobs) as pool:
        for line in pool.map(lambda job: train_and_score(args.study, args.setup, *job), jobs):
            print(line, flush=True)


def path_table(study: Path, setup: str, metric: str) -> pd.DataFrame:
    """Every finished trial of every float path: its final score and its in-training ends."""
    rows = []
    for score in sorted((study / "float-paths").glob(f"*/scores/{setup}/trial*.json")):
        path, trial = score.parts[-4], int(score.stem.removeprefix("trial"))
        run = _folder(study, path, setup, trial, "runs")
        losses = pd.read_csv(run / "losses.csv")
        record = json.loads((run / "run.json").read_text())
        rows.append(
            {
                "path": path,
                "trial": trial,
                metric: json.loads(score.read_text())["scores"][metric],
                "best_cell_fid": record.get("best_cell_fid"),
                "fid_best_last50": losses.fid_best.tail(50).mean(),
                "fid_mean_last50": losses.fid_mean.tail(50).mean(),
            }
        )
    return pd.DataFrame(rows).sort_values(["path", "trial"], kind="stable")


def comparison(table: pd.DataFrame, metric: str, first: str, second: str) -> dict[str, object]:
    x, y = (table[table.path == path][metric].to_numpy() for path in (first, second))
    low, high = a12_interval(x, y)
    shift, shift_low, shift_high = shift_interval(x, y)
    return {
        "paths": f"{first} vs {second}",
        "trials": f"{len(x)} / {len(y)}",
        "p": rank_test(x, y).p,
        "a12": a12(x, y),
        "a12_interval": f"[{low:.2f}, {high:.2f}]",
        "shift": shift,
        "shift_interval": f"[{shift_low:.3g}, {shift_high:.3g}]",
    }


def _compare(args: argparse.Namespace) -> None:
    table = path_table(args.study, args.setup, args.metric)
    paths = list(dict.fromkeys(table.path))
    summary = table.groupby("path", sort=False).agg(
        trials=("trial", "size"),
        **{f"{args.metric}_mean": (args.metric, "mean"), f"{args.metric}_sd": (args.metric, "std")},
        **{f"{args.metric}_min": (args.metric, "min"), f"{args.metric}_max": (args.metric, "max")},
        best_cell_fid=("best_cell_fid", "mean"),
        fid_best_last50=("fid_best_last50", "mean"),
        fid_mean_last50=("fid_mean_last50", "mean"),
    )
    print(markdown_table(table, False, 4))
    print(markdown_table(summary.reset_index(), False, 4))
    if len(paths) == 2:
        print(markdown_table(pd.DataFrame([comparison(table, args.metric, *paths)]), False, 4))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train and score trials of a set-up on each float path")
    train.add_argument("study", type=Path, help="a planned study's folder (results/<study>)")
    train.add_argument("setup")
    train.add_argument("--trials", default="0-7", help="first-last, e.g. 0-15")
    train.add_argument("--path", action="append", required=True, help="default, or an MKL_CBWR value")
    train.add_argument("--jobs", type=int, default=2)
    train.set_defaults(handler=_train)
    compare = sub.add_parser("compare", help="the paths' scores side by side, and their rank test")
    compare.add_argument("study", type=Path)
    compare.add_argument("setup")
    compare.add_argument("--metric", default="fid")
    compare.set_defaults(handler=_compare)
    args = parser.parse_args(argv)
    args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
