"""Training mode ``grid``: the SPMD driver. Every active rank runs this with its block of cells.

Communicators (seed 000): the exchange communicator (Cartesian, or a graph when ranks hold
several cells) moves neighbour states; a control communicator carries reductions and the
per-iteration reports to rank 0; a third one belongs to the heartbeat alone.
"""

from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.config.typed import as_dict
from ganstudy.config.validate import grid_record
from ganstudy.core.checkpoint import CheckpointStore, checkpoint_due, run_fingerprint
from ganstudy.data.subsets import batches_per_pass
from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.mixture import MixtureGenerator
from ganstudy.models.stacked_network import StackedNetwork
from ganstudy.parallel.exchange import NeighbourExchange, placed
from ganstudy.parallel.heartbeat import Heartbeat
from ganstudy.parallel.timing import RoutineTimer
from ganstudy.parallel.topology import Cell, GridShape, assign_cells, resolve_shape
from ganstudy.train.grid.cell import CellStreams, GridCell, cell_label
from ganstudy.train.grid.draws import draws_engine
from ganstudy.train.grid.iteration import Engine, LoopEngine, StackedEvaluationEngine, iterate_cells, score_mixtures
from ganstudy.train.grid.pool import NetworkPool
from ganstudy.train.grid.stacked import StackedEngine, whole_stack, why_not_captured
from ganstudy.train.modes import TrainingContext, TrainingResult
from ganstudy.train.network_spec import network_spec
from ganstudy.train.score_curve import training_scorer


def _say(message: str) -> None:
    print(f"ganstudy grid: {message}", file=sys.stderr, flush=True)


def _fingerprint(context: TrainingContext, shape: GridShape, engine: int) -> str:
    # The engine too: another engine's random draws would continue a run that it did not start.
    setup = as_dict(context.setup)
    return run_fingerprint(
        {
            "setup": {**setup, "grid": grid_record(setup["grid"])},
            "seed": context.study_seed,
            "trial": context.trial,
            "shape": str(shape),
            "engine": engine,
        }
    )


def _check_settings(context: TrainingContext) -> None:
    grid = context.setup.grid
    if grid.n_replacements > grid.population_size:
        raise GanstudyError(
            f"grid.n_replacements={grid.n_replacements} exceeds grid.population_size={grid.population_size}"
        )
    batches_per_pass(len(context.data.images), context.setup.batch_size)


def _engine(
    setup: TrainingSettings, spec: Any, device: torch.device, layout: str, root: bool, cuda_graphs: str | bool = "auto"
) -> Engine:
    """The rank's engine (``_engine_for``), its stacked updates replayed from CUDA graphs where
    ``cuda_graphs`` (compute.cuda_graphs) asks for them and they can be; refused where true and they cannot."""
    engine = _engine_for(setup, spec, device, layout, root)
    if cuda_graphs is False:
        return engine
    if isinstance(engine, StackedEngine) and not isinstance(engine, StackedEvaluationEngine):
        why_not = why_not_captured(engine.g_net, engine.d_net, device, engine.whole)
    else:
        why_not = "the cells are not trained stacked"
    if why_not is None:
        engine.graphs = True
    elif cuda_graphs is True:
        raise GanstudyError(f"compute.cuda_graphs is true, but {why_not}: set it to auto or false")
    return engine


def _engine_for(setup: TrainingSettings, spec: Any, device: torch.device, layout: str, root: bool) -> Engine:
    """Stacked cells in ``layout`` (compute.stack_layout) when asked for and possible; otherwise the
    per-cell loop, said once. A network with a hand-stacked form (``stacked()``) is stacked in either
    layout; any other in the whole layout only (``StackedNetwork``: grouped convolutions, slower than the
    loop's on a CPU, measured), its training too where ``_why_not_trained_stacked`` allows."""
    generator, discriminator = build_pair(setup.network, spec)
    threads = torch.get_num_threads()
    whole = whole_stack(layout, device)
    if not setup.grid.batch_cells:
        return LoopEngine(whole)
    if device.type == "cpu" and threads > 1:
        # Threads split a stack's work at points that depend on the stack's size, i.e. on the layout.
        reason = (
            f"stacked cells give the same bits on any rank count only with one CPU thread per rank, this rank has "
            f"{threads}"
        )
    elif hasattr(generator, "stacked") and hasattr(discriminator, "stacked"):
        return StackedEngine(generator.stacked(), discriminator.stacked(), whole)
    elif not whole:
        reason = (
            f"network {setup.network} has no hand-stacked form, and its general one is slower than the loop on a CPU "
            "(compute.stack_layout whole stacks it)"
        )
    else:
        try:
            nets = StackedNetwork(generator), StackedNetwork(discriminator)
        except TypeError as error:
            reason = f"network {setup.network} has no stacked form ({error})"
        else:
            why_not = _why_not_trained_stacked(nets, setup.grid.population_size)
            if root:
                _say(
                    f"network {setup.network}: "
                    + (
                        f"fitness and mixture images stacked, training cell by cell ({why_not})"
                        if why_not
                        else "cells stacked (general form)"
                    )
                )
            return StackedEvaluationEngine(*nets, whole) if why_not else StackedEngine(*nets, whole)
    if root:
        _say(f"{reason}: each rank trains its cells one after another")
    return LoopEngine(whole)


def _why_not_trained_stacked(nets: tuple[StackedNetwork, StackedNetwork], population: int) -> str:
    """Why the stacked form of a network cannot train it, or "" when it can."""
    if not all(net.trains for net in nets):
        return (
            "only nn.Dropout's masks are keyed by each cell's update; other dropout layers draw from the process's "
            "generator"
        )
    if population > 1 and any(len(net.names) > net.trainable for net in nets):
        # The attackers of a cell share their defender, whose running statistics the loop updates attacker
        # after attacker.
        return "batch norms train stacked in populations of one"
    return ""


def _restore(
    store: CheckpointStore, cells: dict[Cell, GridCell], control: Any, root: bool
) -> tuple[int, dict[str, Any]]:
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
                _say(
                    f"warning: checkpoint of iteration {iteration} is unreadable ({problems[0]}); trying the previous "
                    "one"
                )
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
    shape = resolve_shape(grid.shape, world.size, grid.min_cells, grid.max_cells, grid.topology, grid.ring_radius)
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
    setup, rank = context.setup, comm.Get_rank()
    control, heartbeat_comm = comm.Dup(), comm.Dup()
    exchange = NeighbourExchange(comm, shape, blocks, context.device)
    spec = network_spec(setup, context.data)
    cells, engine_version = _rank_cells(context, shape, spec, blocks[rank])
    # Without periodic checkpoints (checkpoint_period 0) the store still takes a stop signal's one.
    store = None
    if context.checkpoint_dir:
        store = CheckpointStore(
            context.checkpoint_dir, setup.checkpoints_kept, _fingerprint(context, shape, engine_version)
        )
    done, shared = _restore(store, cells, control, rank == 0) if store else (0, {})
    if done == 0:
        for cell in cells.values():
            cell.initialise()
    engine = _engine(setup, spec, context.device, context.stack_layout, rank == 0, context.cuda_graphs)
    run = _RankRun(
        context, shape, cells, exchange, engine, control, store, shared.get("history", []), shared.get("profile", [])
    )
    hosts = comm.allgather(socket.gethostname())
    describe = lambda r: f"host {hosts[r]}, cells " + ", ".join(cell_label(c) for c in blocks[r])  # noqa: E731
    report = None
    if run.root:
        report = context.progress.trainer(
            f"grid {shape}", setup.iterations, ("d_loss", "g_loss", "fid_best", "fid_mean")
        )
        report.restored(run.history)
    stopped_at = None
    try:
        with Heartbeat(heartbeat_comm, setup.grid.heartbeat_timeout, describe) as heartbeat:
            for iteration in range(done + 1, setup.iterations + 1):
                if run.iterate(iteration, heartbeat, report):
                    # Leave the heartbeat in order (every rank stops here) before the job ends.
                    stopped_at = iteration
                    break
            else:
                finals = run.final_scores(heartbeat)
    finally:
        run.exchange.free()
        heartbeat_comm.Free()
    if stopped_at is not None:
        raise context.stop.stopped(f"grid {shape}", stopped_at, str(store.directory) if store else None)
    facts = {
        "grid_shape": str(shape),
        "grid_topology": shape.describe(),
        "grid_engine": engine_version,
        "active_ranks": len(blocks),
        "exchange": run.exchange.kind,
        "cuda_graphs_used": getattr(engine, "graphs", False),
    }
    result = run.result(finals, spec, facts)
    control.Free()
    if result is not None:
        result.facts["resumed_from_iteration"] = done
    return result


def _rank_cells(
    context: TrainingContext, shape: GridShape, spec: NetworkSpec, block: list[Cell]
) -> tuple[dict[Cell, GridCell], str]:
    """This rank's cells (``block``) over one copy of the training images, with their networks from one
    pool, and the version of the engine their draws follow (a checkpoint's fingerprint names it)."""
    images = torch.from_numpy(context.data.images).to(context.device)
    scorer = training_scorer(context, "training mode 'grid' scores its mixtures")
    pool = NetworkPool(context.setup.network, spec, context.device)
    engine_version = draws_engine(pool.drops())
    cells = {
        cell: GridCell(
            cell,
            shape,
            context.setup,
            spec,
            images,
            context.data.labels,
            scorer,
            CellStreams(context.study_seed, context.trial, cell, context.device),
            pool,
        )
        for cell in block
    }
    return cells, engine_version


@dataclass
class _RankRun:
    """One rank's part of a grid run: its cells, their exchange with the neighbours' cells, the engine
    that trains them, and (on rank 0) the run's tables so far."""

    context: TrainingContext
    shape: GridShape
    cells: dict[Cell, GridCell]
    exchange: NeighbourExchange
    engine: Engine
    control: Any  # the control communicator: reductions and the reports to rank 0
    store: CheckpointStore | None
    history: list[dict[str, Any]]
    profile: list[dict[str, Any]]
    timer: RoutineTimer = field(default_factory=RoutineTimer)

    @property
    def rank(self) -> int:
        return self.control.Get_rank()

    @property
    def root(self) -> bool:
        return self.rank == 0

    def iterate(self, iteration: int, heartbeat: Heartbeat, report: Any) -> bool:
        """One grid iteration of this rank's cells, reported to rank 0 and checkpointed when due; True
        when the ranks agreed to stop after it."""
        setup, cells = self.context.setup, self.cells
        started = time.perf_counter()
        with self.timer("exchange"), heartbeat.waiting():
            gathered = self.exchange.exchange({c: cells[c].shared_state() for c in cells})
        reports = iterate_cells(list(cells.values()), self.engine, gathered, iteration, self.timer, heartbeat.beat)
        # Timed per rank: a rank's cells share each routine's batched work.
        rows = [
            {"iteration": iteration, "cell": "*", "rank": self.rank, "routine": name, "seconds": s}
            for name, s in self.timer.take().items()
        ]
        with heartbeat.waiting():
            collected = self.control.gather((reports, rows), root=0)
            stopping = self.context.stop.agreed(self.control)
        if self.root:
            _record(self.history, self.profile, iteration, collected, started)
            report.row(self.history[-1], _slowest_rank(collected))
        if self.store and (stopping or checkpoint_due(iteration, setup.iterations, setup.checkpoint_period)):
            with self.timer("checkpoint"), heartbeat.waiting():
                _checkpoint(
                    self.store, iteration, cells, self.control, self.root, self.history, self.profile, heartbeat.beat
                )
        return stopping

    def final_scores(self, heartbeat: Heartbeat) -> dict[Cell, tuple[Any, float]]:
        """Every cell's final mixture and its score, after the last iteration."""
        with self.timer("exchange"), heartbeat.waiting():
            gathered = self.exchange.exchange({c: self.cells[c].shared_state() for c in self.cells})
        with self.timer("score"):
            # Drawn as an iteration after the last.
            finals = dict(
                zip(
                    self.cells,
                    score_mixtures(
                        list(self.cells.values()),
                        self.engine,
                        gathered,
                        self.context.setup.iterations + 1,
                        heartbeat.beat,
                        evolve=False,
                    ),
                )
            )
        # Rank 0 holds the fewest cells: it keeps its pulse going until every rank has scored.
        with heartbeat.waiting():
            self.control.Barrier()
        return finals

    def result(
        self, finals: dict[Cell, tuple[Any, float]], spec: NetworkSpec, facts: dict[str, Any]
    ) -> TrainingResult | None:
        """The best cell's mixture (the lowest final score over the grid) and the cells' table, on rank 0
        (None elsewhere); ``facts`` gain the best cell and its score."""
        from mpi4py import MPI

        setup, shape, cells = self.context.setup, self.shape, self.cells
        # A NaN would compare inconsistently and make the choice depend on the reduction order.
        candidates = (
            (score if np.isfinite(score) else float("inf"), shape.index(c)) for c, (_, score) in finals.items()
        )
        best_score, best_index = self.control.allreduce(min(candidates, default=(float("inf"), -1)), op=MPI.MIN)
        best_cell = shape.cells()[best_index]
        # The best mixture's payloads go to rank 0 from the host (on a GPU they are on this rank's device).
        mine = placed(finals.get(best_cell), torch.device("cpu"))
        table = [
            {
                "cell": cell_label(c),
                "rank": self.rank,
                "fid": score,
                "neighbourhood": " ".join(cell_label(n) for n in cells[c].neighbourhood),
                "weights": " ".join(f"{w:.6f}" for w in cells[c].weights),
                "g_lr": cells[c].generators[0]["lr"],
                "d_lr": cells[c].discriminators[0]["lr"],
                "images": len(cells[c].subset),
            }
            for c, (_, score) in finals.items()
        ]
        collected = self.control.gather(
            (table, mine, cells[best_cell].weights if mine else None, self.timer.take()), root=0
        )
        if not self.root:
            return None
        cell_rows = sorted(
            (row for part in collected for row in part[0]),
            key=lambda r: shape.index(tuple(map(int, r["cell"].split("-")))),
        )
        payloads, weights = next((part[1][0], part[2]) for part in collected if part[1] is not None)
        components = []
        for payload in payloads:
            generator, _ = build_pair(setup.network, spec)
            generator.load_state_dict(payload["params"])
            components.append(generator.eval())
        # The final exchange and scoring come after the last iteration: they are filed as iteration n+1.
        self.profile += [
            {"iteration": setup.iterations + 1, "cell": "*", "rank": r, "routine": name, "seconds": s}
            for r, part in enumerate(collected)
            for name, s in part[3].items()
        ]
        return TrainingResult(
            MixtureGenerator(components, weights.tolist()),
            setup.network,
            spec,
            self.history,
            self.profile,
            tables={"cells": cell_rows},
            facts={**facts, "best_cell": cell_label(best_cell), "best_cell_fid": best_score},
        )


def _record(history, profile, iteration, collected, started) -> None:
    reports = [r for part in collected for r in part[0]]
    profile.extend(row for part in collected for row in part[1])
    scores = np.array([r.score for r in reports])
    history.append(
        {
            "iteration": iteration,
            "g_loss": float(np.mean([r.g_loss for r in reports])),
            "d_loss": float(np.mean([r.d_loss for r in reports])),
            "g_fitness": float(np.mean([r.g_fitness for r in reports])),
            "d_fitness": float(np.mean([r.d_fitness for r in reports])),
            "fid_best": float(scores.min()),
            "fid_mean": float(scores.mean()),
            "g_lr_mean": float(np.mean([r.g_lr for r in reports])),
            "seconds": time.perf_counter() - started,
        }
    )


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
