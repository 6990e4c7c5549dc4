"""One grid iteration of a rank's cells (Lipizzaner's, seed 002 section 2), phase by phase:

gather -> fitness of the neighbourhood's individuals against the neighbourhood's opponents ->
tournament selection -> one pass of training of the selected copies against each other, with
learning-rate mutation at each update -> fitness of the trained copies -> replacement of the
worst local individuals -> (1+1)-ES step on the mixture weights of the neighbourhood's generators.

Every phase runs for all of the rank's cells before the next, so an engine can batch the cells'
networks (``StackedEngine``); ``LoopEngine`` runs them cell by cell, for networks with no stacked form;
``StackedEvaluationEngine`` stacks only the evaluations of networks whose stacked form cannot train them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

import numpy as np
import torch

from ganstudy.parallel.timing import RoutineTimer
from ganstudy.parallel.topology import Cell
from ganstudy.train.grid.cell import GridCell, IterationReport
from ganstudy.train.grid.draws import GridDraws
from ganstudy.train.grid.mixture_es import MixtureStep
from ganstudy.train.grid.population import Payload
from ganstudy.train.grid.stacked import FitnessCase, StackedEngine

Trained = tuple[list[Payload], list[Payload], float, float]  # generators, discriminators, mean G and D loss


class Engine(Protocol):
    whole: bool  # the whole-stack layout (compute.stack_layout): all cells in each call, draws included

    def fitness(
        self, cells: Sequence[GridCell], cases: Sequence[FitnessCase]
    ) -> list[tuple[np.ndarray, np.ndarray | None]]: ...

    def train(
        self,
        cells: Sequence[GridCell],
        selections: Sequence[tuple[list[Payload], list[Payload]]],
        iteration: int,
        beat: Callable[[], None],
    ) -> list[Trained]: ...

    def span_images(self, cells: Sequence[GridCell], steps: Sequence[MixtureStep]) -> list[torch.Tensor]: ...


class LoopEngine:
    """Each cell's networks one after another, as nn.Modules; the draws of all cells in ``whole`` layout
    or chunked for a CPU's cache."""

    def __init__(self, whole: bool) -> None:
        self.whole = whole

    def fitness(self, cells, cases):
        return [cell.loop_fitness(case) for cell, case in zip(cells, cases)]

    def train(self, cells, selections, iteration, beat):
        return [
            cell.loop_train(new_g, new_d, iteration, beat, self.whole)
            for cell, (new_g, new_d) in zip(cells, selections)
        ]

    def span_images(self, cells, steps):
        return [cell.span_images(step) for cell, step in zip(cells, steps)]


class StackedEvaluationEngine(StackedEngine):
    """Fitness and mixture images of all cells through stacked networks (``StackedNetwork``), training cell
    by cell, as the loop does: for networks that the stacked form cannot train (mode.py says which)."""

    def train(self, cells, selections, iteration, beat):
        return LoopEngine(self.whole).train(cells, selections, iteration, beat)


def score_mixtures(
    cells: Sequence[GridCell],
    engine: Engine,
    gathered: dict[Cell, dict[str, list[Payload]]],
    iteration: int,
    beat: Callable[[], None],
    evolve: bool = True,
) -> list[tuple[list[Payload], float]]:
    """Each cell's mixture step (the ES's when ``evolve``, else the final score of its weights): the
    mixture's generators and the FID of the weights it keeps.

    All cells' images are quantised in one call (element by element), but the classifier sees one cell's
    images per call: in one call for all cells, a cell's features would depend on where its images sit
    in the batch (measured: the classifier's 50-to-10 head, a matrix product, gives other bits at row
    offsets that are not a multiple of 6; AMD EPYC, one thread). The features of all cells then come to
    the host in one copy.
    """
    noise = GridDraws(cells, iteration, engine.whole).mixture_noise()
    steps = [cell.mixture_step(gathered, z, evolve) for cell, z in zip(cells, noise)]
    images = engine.span_images(cells, steps)
    scorer = cells[0].scorer
    inputs = scorer.network_input(torch.cat(images)).split([len(cell_images) for cell_images in images])
    features = torch.cat([scorer.network_features(cell_inputs) for cell_inputs in inputs]).cpu().numpy()
    bounds = np.cumsum([0, *(len(cell_images) for cell_images in images)])
    scored = []
    for cell, step, start, end in zip(cells, steps, bounds[:-1], bounds[1:]):
        scored.append((step.generators, cell.settle(step, features[start:end])))
        beat()
    return scored


def iterate_cells(
    cells: Sequence[GridCell],
    engine: Engine,
    gathered: dict[Cell, dict[str, list[Payload]]],
    iteration: int,
    timer: RoutineTimer,
    beat: Callable[[], None],
) -> list[IterationReport]:
    """Iteration ``iteration`` of every cell in ``cells``; their reports in the same order."""
    with timer("fitness"):
        pools = [cell.neighbourhood_payloads(gathered) for cell in cells]
        reals, noises = GridDraws(cells, iteration, engine.whole).fitness_samples()
        cases = [FitnessCase(g, d, real, z) for (g, d), real, z in zip(pools, reals, noises)]
        fits = [(cell.aggregate(g), cell.aggregate(d)) for cell, (g, d) in zip(cells, engine.fitness(cells, cases))]
        beat()
    with timer("selection"):
        selections = [cell.select(g, d, g_fit, d_fit) for cell, (g, d), (g_fit, d_fit) in zip(cells, pools, fits)]
    with timer("train"):
        trained = engine.train(cells, selections, iteration, beat)
    with timer("fitness"):
        # The trained copies meet the same opponents on the same sample as before their training.
        new_g_cases = [
            replace(case, generators=new_g, generators_only=True, fakes=None)
            for (new_g, *_), case in zip(trained, cases)
        ]
        new_d_cases = [replace(case, discriminators=new_d) for (_, new_d, *_), case in zip(trained, cases)]
        losses = engine.fitness(list(cells) * 2, new_g_cases + new_d_cases)
        for cell, (new_g, new_d, *_), (g_losses, _), (_, d_losses) in zip(
            cells, trained, losses[: len(cells)], losses[len(cells) :]
        ):
            for payload, fitness in zip(new_g, cell.aggregate(g_losses)):
                payload["fitness"] = float(fitness)
            for payload, fitness in zip(new_d, cell.aggregate(d_losses)):
                payload["fitness"] = float(fitness)
        beat()
    with timer("replacement"):
        for cell, (g_fit, d_fit), (new_g, new_d, *_) in zip(cells, fits, trained):
            cell.replace(g_fit, d_fit, new_g, new_d)
    with timer("mixture"):
        score_mixtures(cells, engine, gathered, iteration, beat)
    return [cell.report(g_loss, d_loss) for cell, (*_, g_loss, d_loss) in zip(cells, trained)]
