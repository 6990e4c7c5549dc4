"""Where a grid trial's float path turns last-bit differences into another run (issue 82).

    python ci/float_trace.py run JOB.json --trial T --iterations N --out trace.npz   (one float path)
    MKL_CBWR=COMPATIBLE python ci/float_trace.py run ...                            (another)
    python ci/float_trace.py compare a.npz b.npz
    python ci/float_trace.py digest a.npz          (one line to hold against another machine's)

``run`` trains one trial of a grid set-up (a study's ``jobs/<setup>.json``; one rank, one thread) for its
first N iterations and records, per iteration and cell, every discrete decision the grid takes and the
continuous values it takes them on: the fitness of the neighbourhood's generators and discriminators,
the tournament winners, the mixture ES's two candidate scores and whether the mutation was kept, the
cell's score, mixture weights and learning rates; and the generator's weights at a few iterations.
The tournaments' entrants and the ES's mutations come from the cell's numpy stream, which draws the
same numbers on every float path: a decision differs between two paths only where its margin flips.

``compare`` prints, for two traces of the same trial, the first iteration at which each kind of
decision differs (with the margin it was taken on there), how the generators' weights drift apart,
and how alike the two runs' scores are at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

SNAPSHOTS = (1, 2, 3, 5, 8, 13, 20, 30, 50, 75, 100, 150, 200, 300, 400, 500)


def _run(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    from ganstudy.train.grid import cell as cell_module
    from ganstudy.train.grid import mode as mode_module
    from ganstudy.train.job import read_job, with_compute
    from ganstudy.train.run import run_training

    now: dict[str, int] = {"iteration": 0}
    rows: dict[str, list[Any]] = defaultdict(list)
    weights: dict[str, np.ndarray] = {}

    select, settle, iterate = cell_module.GridCell.select, cell_module.GridCell.settle, mode_module._RankRun.iterate
    final_scores = mode_module._RankRun.final_scores
    tournament, winners = cell_module.tournament, []

    def traced_tournament(fitness, size, entrants, rng):
        chosen = tournament(fitness, size, entrants, rng)
        winners.append(chosen)
        return chosen

    def traced_select(self, all_g, all_d, g_fit, d_fit):
        winners.clear()
        chosen = select(self, all_g, all_d, g_fit, d_fit)
        # The neighbourhood's places of the winners: generators', then discriminators'.
        rows["select"].append((now["iteration"], self.cell, *winners))
        rows["g_fit"].append((now["iteration"], self.cell, np.asarray(g_fit, dtype=float).tolist()))
        rows["d_fit"].append((now["iteration"], self.cell, np.asarray(d_fit, dtype=float).tolist()))
        return chosen

    def traced_settle(self, step, features):
        scores = cell_module.candidate_fids(self.scorer, step, features)
        kept = settle(self, step, features)
        accepted = len(step.candidates) == 2 and self.weights is step.candidates[1]
        rows["es"].append((now["iteration"], self.cell, [float(s) for s in scores], accepted))
        return kept

    def traced_iterate(self, iteration, heartbeat, report):
        now["iteration"] = iteration
        stopping = iterate(self, iteration, heartbeat, report)
        for cell, grid_cell in self.cells.items():
            rows["state"].append(
                (
                    iteration,
                    cell,
                    float(grid_cell.score),
                    grid_cell.weights.tolist(),
                    float(grid_cell.generators[0]["lr"]),
                    float(grid_cell.discriminators[0]["lr"]),
                )
            )
            if iteration in SNAPSHOTS:
                params = grid_cell.generators[0]["params"]
                weights[f"{iteration}/{cell[0]}-{cell[1]}"] = torch.cat(
                    [v.detach().reshape(-1).double().cpu() for v in params.values()]
                ).numpy()
        return stopping

    def traced_final_scores(self, heartbeat):
        # The final scoring of each cell's mixture (one candidate) is filed as an iteration after the last.
        now["iteration"] += 1
        return final_scores(self, heartbeat)

    mode_module._RankRun.final_scores = traced_final_scores
    cell_module.tournament = traced_tournament
    cell_module.GridCell.select = traced_select
    cell_module.GridCell.settle = traced_settle
    mode_module._RankRun.iterate = traced_iterate

    job = read_job(args.job)
    if args.compute is not None:
        job = with_compute(job, args.compute)
    # A grid's first N iterations are the same bits whatever its budget.
    settings = replace(job.settings, iterations=args.iterations, checkpoint_period=0)
    if args.shape:
        settings = replace(settings, grid=replace(settings.grid, shape=args.shape))
    job = replace(job, settings=settings)
    with tempfile.TemporaryDirectory() as scratch:
        run_training(job, args.trial, Path(scratch) / "run", None, 60.0)
    np.savez_compressed(
        args.out,
        trace=json.dumps({"path": _path_label(), "rows": rows}),
        **weights,
    )
    print(f"wrote {args.out}", file=sys.stderr)


def _path_label() -> str:
    """MKL's branch and ATen's kernels where the environment sets them."""
    set_here = [f"{name}={os.environ[name]}" for name in ("MKL_CBWR", "ATEN_CPU_CAPABILITY") if os.environ.get(name)]
    return " ".join(set_here) or "default"


def _load(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    with np.load(path) as arrays:
        trace = json.loads(str(arrays["trace"]))
        return trace, {k: arrays[k] for k in arrays.files if k != "trace"}


def _keyed(rows: list[list[Any]]) -> dict[tuple[int, str], list[Any]]:
    return {(row[0], f"{row[1][0]}-{row[1][1]}"): row[2:] for row in rows}


def _first_difference(a: dict, b: dict, differs) -> tuple[int, str] | None:
    for key in sorted(set(a) & set(b)):
        if differs(a[key], b[key]):
            return key
    return None


def _compare(args: argparse.Namespace) -> None:
    (trace_a, weights_a), (trace_b, weights_b) = _load(args.a), _load(args.b)
    rows_a, rows_b = trace_a["rows"], trace_b["rows"]
    print(f"float paths: {trace_a['path']} against {trace_b['path']}")
    g_a, g_b = _keyed(rows_a["g_fit"]), _keyed(rows_b["g_fit"])
    d_a, d_b = _keyed(rows_a["d_fit"]), _keyed(rows_b["d_fit"])
    for name, a, b in (("generator fitness", g_a, g_b), ("discriminator fitness", d_a, d_b)):
        key = _first_difference(a, b, lambda x, y: x[0] != y[0])
        if key is None:
            print(f"{name}: the same bits throughout")
            continue
        diff = np.abs(np.subtract(a[key][0], b[key][0])).max()
        print(f"{name}: first other bits at iteration {key[0]} (cell {key[1]}), largest difference {diff:.3g}")
    sel_a, sel_b = _keyed(rows_a["select"]), _keyed(rows_b["select"])
    key = _first_difference(sel_a, sel_b, lambda x, y: x != y)
    if key is None:
        print("tournaments: the same winners throughout")
    else:
        g_fit, d_fit = (np.array(g_a[key][0]), np.array(g_b[key][0])), (np.array(d_a[key][0]), np.array(d_b[key][0]))
        print(
            f"tournaments: first other winner at iteration {key[0]} (cell {key[1]}): places {sel_a[key]} against "
            f"{sel_b[key]} (generators, discriminators) on fitnesses G {g_fit[0].round(6).tolist()} / "
            f"{g_fit[1].round(6).tolist()}, D {d_fit[0].round(6).tolist()} / {d_fit[1].round(6).tolist()}"
        )
    es_a, es_b = _keyed(rows_a["es"]), _keyed(rows_b["es"])
    key = _first_difference(es_a, es_b, lambda x, y: x[1] != y[1])
    if key is None:
        print("mixture ES: the same decisions throughout")
    else:
        (scores_a, kept_a), (scores_b, kept_b) = es_a[key], es_b[key]
        print(
            f"mixture ES: first other decision at iteration {key[0]} (cell {key[1]}): kept {kept_a} on scores "
            f"{scores_a} against kept {kept_b} on {scores_b}"
        )
    flips = {
        "tournaments": sum(sel_a[k] != sel_b[k] for k in set(sel_a) & set(sel_b)),
        "ES decisions": sum(es_a[k][1] != es_b[k][1] for k in set(es_a) & set(es_b)),
    }
    print(f"decisions that differ over the run (cells x iterations): {flips}")
    print("generator weights apart (cell 0-0; relative L2 distance, the weights' own change from iteration 1):")
    for iteration in SNAPSHOTS:
        key = f"{iteration}/0-0"
        if key in weights_a and key in weights_b:
            a, b, start = weights_a[key], weights_b[key], weights_a["1/0-0"]
            apart = np.linalg.norm(a - b) / np.linalg.norm(a)
            moved = np.linalg.norm(a - start) / np.linalg.norm(start)
            print(f"  iteration {iteration:4d}: apart {apart:.3g}   moved {moved:.3g}")
    state_a, state_b = _keyed(rows_a["state"]), _keyed(rows_b["state"])
    last = max(k[0] for k in state_a)
    for label, rows in ((trace_a["path"], state_a), (trace_b["path"], state_b)):
        window = [v[0] for k, v in rows.items() if k[0] > last - 50]
        print(f"{label}: mean cell score over the last 50 iterations {np.mean(window):.3f}")


def _digest(args: argparse.Namespace) -> None:
    """Two hashes: the training's values (fitness, tournaments, generator weights), which no scorer touches,
    and the mixture scoring's (the ES's scores, the cells' scores and weights), which read the classifier."""
    trace, weights = _load(args.trace)
    rows = trace["rows"]
    training = hashlib.sha256(json.dumps([rows[k] for k in ("g_fit", "d_fit", "select")]).encode())
    for key in sorted(weights):
        training.update(weights[key].tobytes())
    scoring = hashlib.sha256(json.dumps([rows[k] for k in ("es", "state")]).encode())
    iterations = max(row[0] for row in rows["state"])
    print(
        f"{trace['path']}, {iterations} iterations: training sha256 {training.hexdigest()[:16]}, "
        f"scoring sha256 {scoring.hexdigest()[:16]}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="trace one trial's first iterations on this process's float path")
    run.add_argument("job", type=Path, help="a study's jobs/<setup>.json (a grid set-up)")
    run.add_argument("--compute", type=Path, help="a study's site/compute.json")
    run.add_argument("--trial", type=int, default=0)
    run.add_argument("--iterations", type=int, default=100)
    run.add_argument("--shape", help="the grid's shape instead of the set-up's (1x1: a plain GAN, no decisions)")
    run.add_argument("--out", type=Path, required=True)
    run.set_defaults(handler=_run)
    compare = sub.add_parser("compare", help="where two traces of one trial part")
    compare.add_argument("a", type=Path)
    compare.add_argument("b", type=Path)
    compare.set_defaults(handler=_compare)
    digest = sub.add_parser("digest", help="one hash of a trace's values: the same bits as another machine's?")
    digest.add_argument("trace", type=Path)
    digest.set_defaults(handler=_digest)
    args = parser.parse_args(argv)
    args.handler(args)


if __name__ == "__main__":
    main()
