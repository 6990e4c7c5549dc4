"""Training mode ``grid``: the SPMD driver. Every active rank runs this with its block of cells.

Communicators (seed 000): the exchange communicator (Cartesian, or a graph when ranks hold
several cells) moves neighbour states; a control communicator carries reductions and the
per-iteration reports to rank 0; a third one belongs to the heartbeat alone.
"""

from __future__ import annotations

import socket
import sys
import time
from typing import Any

import numpy as np
import torch

from ganstudy.checkpoint import CheckpointStore, checkpoint_due, run_fingerprint
from ganstudy.errors import GanstudyError
from ganstudy.models import build_pair
from ganstudy.models.mixture import MixtureGenerator
from ganstudy.parallel.exchange import NeighbourExchange
from ganstudy.parallel.heartbeat import Heartbeat
from ganstudy.parallel.timing import RoutineTimer
from ganstudy.parallel.topology import Cell, GridShape, assign_cells, resolve_shape
from ganstudy.train.grid.cell import CellStreams, GridCell, cell_label
from ganstudy.train.grid.draws import GRID_ENGINE
from ganstudy.train.grid.iteration import Engine, LoopEngine, iterate_cells, score_mixtures
from ganstudy.train.grid.pool import NetworkPool
from ganstudy.train.grid.stacked import StackedEngine, whole_stack
from ganstudy.train.modes import TrainingContext, TrainingResult
from ganstudy.data.partition import batches_per_pass
from ganstudy.train.network_spec import network_spec
from ganstudy.train.score_curve import training_scorer
from ganstudy.setup_settings import TrainingSettings
from ganstudy.typed import as_dict


def _say(message: str) -> None:
    print(f"ganstudy grid: {message}", file=sys.stderr, flush=True)


def _fingerprint(context: TrainingContext, shape: GridShape) -> str:
    # The engine too: another engine's random draws would continue a run that it did not start.
    return run_fingerprint({"setup": as_dict(context.setup), "seed": context.study_seed, "trial": context.trial, "shape": str(shape),
                            "engine": GRID_ENGINE})


def _check_settings(context: TrainingContext) -> None:
    grid = context.setup.grid
    if grid.n_replacements > grid.population_size:
        raise GanstudyError(
            f"grid.n_replacements={grid.n_replacements} exceeds grid.population_size={grid.population_size}"
        )
    batches_per_pass(len(context.data.images), context.setup.batch_size)


def _engine(setup: TrainingSettings, spec: Any, device: torch.device, layout: str, root: bool) -> Engine:
    """Stacked cells in ``layout`` (compute.stack_layout) when asked for and possible; otherwise the
    per-cell loop, said once."""
    generator, discriminator = build_pair(setup.network, spec)
    threads = torch.get_num_threads()
    whole = whole_stack(layout, device)
    if not setup.grid.batch_cells:
        return LoopEngine(whole)
    if not (hasattr(generator, "stacked") and hasattr(discriminator, "stacked")):
        reason = f"network {setup.network} has no stacked form"
    elif device.type == "cpu" and threads > 1:
        # Threads split a stack's work at points that depend on the stack's size, i.e. on the layout.
        reason = f"stacked cells give the same bits on any rank count only with one CPU thread per rank, this rank has {threads}"
    else:
        return StackedEngine(generator.stacked(), discriminator.stacked(), whole)
    if root:
        _say(f"{reason}: each rank trains its cells one after another")
    return LoopEngine(whole)


def _restore(store: CheckpointStore, cells: dict[Cell, GridCell], control: Any, root: bool) -> tuple[int, dict[str, Any]]:
    """Load the newest checkpoint that every rank can read; (0, {}) when there is none."""
    if root and (warning := store.unmatched_warning()):
        _say(warning)
    # Rank 0's listing for all: nodes may see a shared folder differently right after a crash.
    for iteration in reversed(control.bcast(store.iterations() if root else None, root=0)):
        states, problem = {}, None
        try:
            for cell in cells:
                states[cell] = store.read_part(iteration, f"cell-{cell_label(cell)}")
            shared = store.read_part(iteration, "shared") if root else {}
        except ValueError as exc:
            problem = str(exc)
        problems = [p for p in control.allgather(problem) if p]
        if problems:
            if root:
                _say(f"warning: checkpoint of iteration {iteration} is unreadable ({problems[0]}); trying the previous one")
            continue
        for cell, state in states.items():
            cells[cell].load_checkpoint_state(state)
        if root:
            _say(f"resumed from the checkpoint of iteration {iteration}")
        return iteration, shared
    return 0, {}


def train_grid(context: TrainingContext) -> TrainingResult | None:
    from mpi4py import MPI

    grid, world = context.setup.grid, context.world
    _check_settings(context)
    shape = resolve_shape(grid.shape, world.size, grid.min_cells, grid.max_cells)
    if grid.cell_classes and len(grid.cell_classes) != shape.size:
        raise GanstudyError(
            f"grid.cell_classes lists classes for {len(grid.cell_classes)} cells, the {shape} grid has {shape.size}: "
            "give one list per cell, row by row"
        )
    blocks = assign_cells(shape, world.size)
    active_ranks = sum(1 for block in blocks if block)
    if world.is_root and active_ranks < world.size:
        _say(f"{world.size - active_ranks} of {world.size} ranks have no cell of the {shape} grid and stay idle")
    comm = world.comm.Split(0 if blocks[world.rank] else MPI.UNDEFINED, world.rank)
    if comm == MPI.COMM_NULL:
        return None
    try:
        return _run(context, shape, blocks[:active_ranks], comm)
    finally:
        comm.Free()


def _run(context: TrainingContext, shape: GridShape, blocks: list[list[Cell]], comm: Any) -> TrainingResult | None:
    from mpi4py import MPI

    setup, grid = context.setup, context.setup.grid
    rank, root = comm.Get_rank(), comm.Get_rank() == 0
    control, heartbeat_comm = comm.Dup(), comm.Dup()
    exchange = NeighbourExchange(comm, shape, blocks)
    spec = network_spec(setup, context.data)
    images = torch.from_numpy(context.data.images).to(context.device)
    scorer = training_scorer(context, "training mode 'grid' scores its mixtures")
    pool = NetworkPool(setup.network, spec, context.device)
    cells = {
        cell: GridCell(cell, shape, setup, spec, images, context.data.labels, scorer,
                       CellStreams(context.study_seed, context.trial, cell, context.device), pool)
        for cell in blocks[rank]
    }
    store = None
    # Without periodic checkpoints (checkpoint_period 0) the store still takes a stop signal's one.
    if context.checkpoint_dir is not None:
        store = CheckpointStore(context.checkpoint_dir, setup.checkpoints_kept, _fingerprint(context, shape))
    done, shared = _restore(store, cells, control, root) if store else (0, {})
    if done == 0:
        for cell in cells.values():
            cell.initialise()
    history: list[dict[str, Any]] = shared.get("history", [])
    profile: list[dict[str, Any]] = shared.get("profile", [])
    engine = _engine(setup, spec, context.device, context.stack_layout, root)
    rank_timer = RoutineTimer()
    hosts = comm.allgather(socket.gethostname())
    describe = lambda r: f"host {hosts[r]}, cells " + ", ".join(cell_label(c) for c in blocks[r])  # noqa: E731

    report = None
    if root:
        report = context.progress.trainer(f"grid {shape}", setup.iterations, ("d_loss", "g_loss", "fid_best", "fid_mean"))
        report.restored(history)
    stopped_at = None
    try:
        with Heartbeat(heartbeat_comm, grid.heartbeat_timeout, describe) as heartbeat:
            for iteration in range(done + 1, setup.iterations + 1):
                started = time.perf_counter()
                with rank_timer("exchange"), heartbeat.waiting():
                    gathered = exchange.exchange({c: cells[c].shared_state() for c in cells})
                reports = iterate_cells(list(cells.values()), engine, gathered, iteration, rank_timer, heartbeat.beat)
                # Timed per rank: a rank's cells share each routine's batched work.
                rows = [
                    {"iteration": iteration, "cell": "*", "rank": rank, "routine": name, "seconds": s}
                    for name, s in rank_timer.take().items()
                ]
                with heartbeat.waiting():
                    collected = control.gather((reports, rows), root=0)
                    stopping = context.stop.agreed(control)
                if root:
                    _record(history, profile, iteration, collected, started)
                    report.row(history[-1], _slowest_rank(collected))
                if store and (stopping or checkpoint_due(iteration, setup.iterations, setup.checkpoint_period)):
                    with rank_timer("checkpoint"), heartbeat.waiting():
                        _checkpoint(store, iteration, cells, control, root, history, profile, heartbeat.beat)
                if stopping:
                    # Leave the heartbeat in order (every rank stops here) before the job ends.
                    stopped_at = iteration
                    break
            else:
                with rank_timer("exchange"), heartbeat.waiting():
                    gathered = exchange.exchange({c: cells[c].shared_state() for c in cells})
                with rank_timer("score"):
                    # Drawn as an iteration after the last.
                    finals = dict(zip(cells, score_mixtures(list(cells.values()), engine, gathered, setup.iterations + 1,
                                                            heartbeat.beat, evolve=False)))
                # Rank 0 holds the fewest cells: it keeps its pulse going until every rank has scored.
                with heartbeat.waiting():
                    control.Barrier()
    finally:
        exchange.free()
        heartbeat_comm.Free()
    if stopped_at is not None:
        raise context.stop.stopped(f"grid {shape}", stopped_at, str(store.directory) if store else None)

    # A NaN would compare inconsistently and make the choice depend on the reduction order.
    candidates = ((score if np.isfinite(score) else float("inf"), shape.index(c)) for c, (_, score) in finals.items())
    best_score, best_index = control.allreduce(min(candidates, default=(float("inf"), -1)), op=MPI.MIN)
    best_cell = shape.cells()[best_index]
    mine = finals.get(best_cell)
    table = [
        {"cell": cell_label(c), "rank": rank, "fid": score, "neighbourhood": " ".join(cell_label(n) for n in cells[c].neighbourhood),
         "weights": " ".join(f"{w:.6f}" for w in cells[c].weights),
         "g_lr": cells[c].generators[0]["lr"], "d_lr": cells[c].discriminators[0]["lr"], "images": len(cells[c].subset)}
        for c, (_, score) in finals.items()
    ]
    collected = control.gather((table, mine, cells[best_cell].weights if mine else None, rank_timer.take()), root=0)
    control.Free()
    if not root:
        return None
    cell_rows = sorted((row for part in collected for row in part[0]), key=lambda r: shape.index(tuple(map(int, r["cell"].split("-")))))
    payloads, weights = next((part[1][0], part[2]) for part in collected if part[1] is not None)
    components = []
    for payload in payloads:
        generator, _ = build_pair(setup.network, spec)
        generator.load_state_dict(payload["params"])
        components.append(generator.eval())
    # The final exchange and scoring come after the last iteration: they are filed as iteration n+1.
    profile += [
        {"iteration": setup.iterations + 1, "cell": "*", "rank": r, "routine": name, "seconds": s}
        for r, part in enumerate(collected) for name, s in part[3].items()
    ]
    return TrainingResult(
        MixtureGenerator(components, weights.tolist()),
        setup.network,
        spec,
        history,
        profile,
        tables={"cells": cell_rows},
        facts={"grid_shape": str(shape), "grid_engine": GRID_ENGINE, "active_ranks": len(blocks), "exchange": exchange.kind,
               "best_cell": cell_label(best_cell), "best_cell_fid": best_score, "resumed_from_iteration": done},
    )


def _record(history, profile, iteration, collected, started) -> None:
    reports = [r for part in collected for r in part[0]]
    profile.extend(row for part in collected for row in part[1])
    scores = np.array([r.score for r in reports])
    history.append({
        "iteration": iteration,
        "g_loss": float(np.mean([r.g_loss for r in reports])),
        "d_loss": float(np.mean([r.d_loss for r in reports])),
        "g_fitness": float(np.mean([r.g_fitness for r in reports])),
        "d_fitness": float(np.mean([r.d_fitness for r in reports])),
        "fid_best": float(scores.min()),
        "fid_mean": float(scores.mean()),
        "g_lr_mean": float(np.mean([r.g_lr for r in reports])),
        "seconds": time.perf_counter() - started,
    })


def _slowest_rank(collected) -> str:
    """Which rank spent the most time in this iteration, for the progress line (the rank that holds the
    grid back)."""
    seconds = [sum(row["seconds"] for row in part[1]) for part in collected]
    slowest = int(np.argmax(seconds))
    return f"slowest rank {slowest} ({seconds[slowest]:.3g} s)"


def _checkpoint(store, iteration, cells, control, root, history, profile, beat) -> None:
    for cell, grid_cell in cells.items():
        store.write_part(iteration, f"cell-{cell_label(cell)}", grid_cell.checkpoint_state())
        beat()
    if root:
        store.write_part(iteration, "shared", {"history": history, "profile": profile})
    control.Barrier()
    if root:
        store.complete(iteration)
    control.Barrier()
