"""A rank's grid cells trained together (seed 002's algorithm, unchanged): batched players.

The networks of every cell on the rank are held as stacked parameters and run with batched matrix
products (``StackedMLP``): one kernel call per layer serves every cell, where the per-cell loop pays
Python, autograd and optimizer overhead once per cell and per update. Each cell's draws are its own and
counter-based, as in the loop (draws.py; an nn.Dropout's masks are keyed by the cell's update,
``KeyedDropout``), and every row's arithmetic is independent of the other rows in its stack, so results
do not depend on how cells are spread over ranks. A stacked network draws nothing from torch's global
generator (mode.py keeps networks that would, such as those with Dropout2d, on the loop).

Two layouts of the work (``compute.stack_layout``): on a CPU, chunks of cells sized for the cache and
Adam row by row; on a GPU, the whole stack in every operation, so that the operators launched per
iteration do not grow with the cells. Either runs on either device, which lets a CPU count what the
GPU layout dispatches (benchmarks/grid_dispatch.py).

The per-cell loop (``LoopEngine``, cell.py: nn.Modules and torch's Adam) is the reference: this engine
makes the same draws with other kernels, so it trains alike within rounding, not to the bit
(tests/test_stacked_cells.py holds it to the loop). Each is bit-identical with itself on any rank count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass

import numpy as np
import torch

from ganstudy.core.device_copy import to_device
from ganstudy.models.stacked import StackedMLP, separate
from ganstudy.parallel.keyed_dropout import keyed_masks
from ganstudy.train.grid.draws import MUSTANGS_LOSSES, GridDraws, UpdateDraws
from ganstudy.train.grid.mixture_es import MixtureStep
from ganstudy.train.grid.population import Payload
from ganstudy.train.losses import LOSSES, AdversarialLoss

Tensor = torch.Tensor
# Parameters, gradients and Adam moments of the cells a CPU trains in lockstep (about the L3 cache):
# 8 digits cells per chunk trained at 89 ms per cell and pass, all 144 of a 12x12 grid at 105 ms, one
# at a time at 117 ms (AMD EPYC, 32 MB L3, one thread).
CPU_CHUNK_BYTES = 24 * 2**20
# Rows x samples x hidden units of one fitness call: activations that stay in cache (4 MB).
FITNESS_CHUNK_FLOATS = 2**20
# A mixture component's noise rows are padded to a multiple of this, so a span's kernel (its row
# count) is the cell's own choice; wider chunks pad more, narrower ones run slower per row (stacked
# digits generators: 1.9 ms per 250 rows at 16 rows per copy, 1.2-1.5 ms at 64).
MIXTURE_CHUNK_ROWS = 16
STACK_LAYOUTS = ("auto", "cache", "whole")


def why_not_captured(g_net, d_net, device: torch.device, whole: bool) -> str | None:
    """Why a pass's stacked updates cannot be replayed from CUDA graphs (compute.cuda_graphs), or None."""
    if device.type != "cuda":
        return f"this rank trains on {device}, not on a CUDA GPU"
    if not whole:
        return "compute.stack_layout cache updates row by row (whole, or auto on a GPU, stacks the updates)"
    if g_net.drops or d_net.drops:
        return "the networks have dropout, whose masks are keyed on the host at every update"
    if g_net.counters or d_net.counters:
        return "the networks have batch norms, whose batch counts the host keeps"
    return None


def whole_stack(layout: str, device: torch.device) -> bool:
    """Whether ``compute.stack_layout`` puts the whole stack in every operation on ``device`` (auto: on
    any device but the CPU)."""
    if layout not in STACK_LAYOUTS:
        raise ValueError(f"compute.stack_layout is {layout!r}; it is one of {', '.join(STACK_LAYOUTS)}")
    return layout == "whole" or (layout == "auto" and device.type != "cpu")


class StackedPlayers:
    """Rows of trainable individuals of one kind (generators or discriminators): stacked parameters and
    their Adam moments, a learning rate and a step count per row."""

    def __init__(
        self,
        net: StackedMLP,
        payloads: Sequence[Payload],
        betas: tuple[float, float],
        device: torch.device,
        row_by_row: bool,
    ) -> None:
        self.net, self.betas, self.device = net, betas, device
        # ``row_by_row`` (the cache layout): torch's fused Adam on each row's views, one pass over memory
        # that is still in cache, where the whole-stack operations take a dozen (an 18x18 digits iteration
        # on 2 ranks: 31-34 s, against 31-40 s with whole-stack Adam; AMD EPYC, noisy VM). On a GPU one
        # launch per row and update would cost more than the arithmetic.
        self.row_by_row = row_by_row
        # Parameters, then buffers (StackedNetwork's running statistics), which the forward updates in place.
        self.params = net.stack([p["params"] for p in payloads], device)
        if not row_by_row:
            # The whole layout's trained tensors are views of one [rows, floats per row] buffer, and so are
            # the Adam moments: a step is a dozen operators for the network, not a dozen per tensor.
            self._flat, trained = _flat_rows(self.params[: net.trainable])
            self.params[: net.trainable] = trained
        self.trained = [p.requires_grad_() for p in self.params[: net.trainable]]
        # Forward passes in training mode per row since the payloads' counters (a batch norm's count of batches).
        self.forwards = np.zeros(len(payloads), dtype=np.int64)
        self._counters = [{name: p["params"][name] for name in net.counters} for p in payloads]
        states = [p["adam"]["state"] for p in payloads]
        self.exp_avg = self._moments(payloads, states, "exp_avg", device)
        self.exp_avg_sq = self._moments(payloads, states, "exp_avg_sq", device)
        if not row_by_row:
            (self._flat_exp_avg, self.exp_avg), (self._flat_exp_avg_sq, self.exp_avg_sq) = (
                _flat_rows(self.exp_avg),
                _flat_rows(self.exp_avg_sq),
            )
        # Every row's parameters and buffers without gradient tracking, made once: they share the rows'
        # storage, so they see every step (see ``frozen``).
        self._detached = [p.detach() for p in self.params]
        # torch's Adam counts steps per parameter tensor, equal within a network; a fresh individual's
        # optimizer has no state yet: step 0, zero moments.
        started = [state[0]["step"] for state in states if state]
        counts = iter(torch.stack(started).tolist() if started else [])
        self.steps = [int(next(counts)) if state else 0 for state in states]
        self.lrs = np.array([float(p["lr"]) for p in payloads])
        self._groups = [p["adam"]["param_groups"] for p in payloads]
        if self.row_by_row:
            views = lambda tensors: [list(rows) for rows in zip(*[t.detach().unbind(0) for t in tensors])]  # noqa: E731
            self._rows, self._exp_avg_rows, self._exp_avg_sq_rows = (
                views(self.trained),
                views(self.exp_avg),
                views(self.exp_avg_sq),
            )
            # Read by the fused kernel, one count per row (torch's Adam keeps one per tensor, all equal).
            self._step_counts = torch.tensor(self.steps, dtype=torch.float32)
            self._row_steps = [[count] * len(self.trained) for count in self._step_counts.unbind(0)]

    def _moments(self, payloads, states, moment: str, device: torch.device) -> list[Tensor]:
        names = self.net.names[: self.net.trainable]
        per_row = [
            {name: state[k][moment] for k, name in enumerate(names)}
            if state
            else {name: torch.zeros_like(p["params"][name]) for name in names}
            for p, state in zip(payloads, states)
        ]
        return self.net.stack(per_row, device)

    def __len__(self) -> int:
        return len(self.lrs)

    def frozen(self) -> list[Tensor]:
        """The parameters and buffers of all rows without gradient tracking, in their own storage: a
        defender's batch norms update its running statistics in place (networks with running statistics
        train stacked only in populations of one, where every cell's defender is its one opponent)."""
        return self._detached

    def rows_of(self, index: Tensor) -> list[Tensor]:
        """Copies of the parameters and buffers of the rows that ``index`` (on the device) names, in order:
        one index tensor for all of them, sent once per update (``to_device``)."""
        return [p.index_select(0, index) for p in self._detached]

    def next_factors(self) -> Tensor:
        """Counts the next step of every row and gives its per-row factors on the host, computed in float64
        and rounded once: [lr / (1 - beta1^t), sqrt(1 - beta2^t)] ([2, rows, 1], a factor per row of the
        flat buffers)."""
        beta1, beta2 = self.betas
        self.steps = [t + 1 for t in self.steps]
        return torch.tensor(
            [
                [lr / (1 - beta1**t) for lr, t in zip(self.lrs.tolist(), self.steps)],
                [math.sqrt(1 - beta2**t) for t in self.steps],
            ],
            dtype=self.params[0].dtype,
        ).unsqueeze(2)

    def step(self, factors: Tensor | None = None) -> None:
        """One Adam step of every row, as torch.optim.Adam defines it, with the row's own learning rate and
        step count: row by row, or a few operators on the whole stack for all rows, each rounded once per
        element (no fused multiply-add, no interpolation kernel), so that a row's bits do not depend on the
        rows beside it either way. ``factors``: the whole layout's ``next_factors`` already on the device
        (a captured update reads them from a buffer filled before each replay); made here if not given."""
        if self.row_by_row:
            self.steps = [t + 1 for t in self.steps]
            self._step_by_row()
            return
        if factors is None:
            factors = to_device(self.next_factors(), self.device)
        beta1, beta2 = self.betas
        step_size, root = factors.unbind(0)
        with torch.no_grad():
            grad = torch.cat([p.grad.flatten(1) for p in self.trained], dim=1)
            self._flat_exp_avg.mul_(beta1).add_(grad * (1 - beta1))
            self._flat_exp_avg_sq.mul_(beta2).add_((grad * grad).mul_(1 - beta2))
            denominator = self._flat_exp_avg_sq.sqrt().div_(root).add_(1e-8)
            self._flat.sub_(self._flat_exp_avg.div(denominator).mul_(step_size))
        for param in self.trained:
            param.grad = None

    def _step_by_row(self) -> None:
        beta1, beta2 = self.betas
        self._step_counts += 1
        grads = [list(views) for views in zip(*[p.grad.unbind(0) for p in self.trained])]
        for row, lr in enumerate(self.lrs.tolist()):
            torch._fused_adam_(
                self._rows[row],
                grads[row],
                self._exp_avg_rows[row],
                self._exp_avg_sq_rows[row],
                [],
                self._row_steps[row],
                lr=lr,
                beta1=beta1,
                beta2=beta2,
                weight_decay=0.0,
                eps=1e-8,
                amsgrad=False,
                maximize=False,
            )
        for param in self.trained:
            param.grad = None

    def payloads(self, selected: Sequence[Payload]) -> list[Payload]:
        """Every row as a payload in the format of a lone network and its torch Adam state, on the stack's
        device, with the fitness and origin of the selected individual the row was trained from."""
        params, exp_avg, exp_avg_sq = (self.net.states(t) for t in (self.params, self.exp_avg, self.exp_avg_sq))
        names = self.net.names[: self.net.trainable]
        # One step count per row and parameter tensor, as torch's fused Adam keeps them (on the parameters'
        # device; it adds to each in place).
        counts = to_device(torch.tensor(self.steps, dtype=torch.float32), self.device)
        steps = separate(counts.repeat_interleave(len(names)).unbind(0))
        made = []
        for row, (chosen, lr) in enumerate(zip(selected, self.lrs.tolist())):
            state = {
                k: {
                    "step": steps[row * len(names) + k],
                    "exp_avg": exp_avg[row][name],
                    "exp_avg_sq": exp_avg_sq[row][name],
                }
                for k, name in enumerate(names)
            }
            groups = [{**group, "lr": lr} for group in self._groups[row]]
            counted = {name: count + int(self.forwards[row]) for name, count in self._counters[row].items()}
            made.append(
                {
                    "params": params[row] | counted,
                    "adam": {"state": state, "param_groups": groups},
                    "lr": lr,
                    "fitness": chosen["fitness"],
                    "origin": chosen["origin"],
                }
            )
        return made


def chosen_losses(
    losses: Sequence[AdversarialLoss], choice: Tensor | None, compute: Callable[[AdversarialLoss], Tensor]
) -> Tensor:
    """Per-row loss values: ``compute(losses[0])`` when ``choice`` is None, else row r's value under
    ``losses[choice[r]]`` (Mustangs draws one of three per cell and update), every candidate computed on
    every row and the row's picked on the device: the same operators whatever was drawn, and a row's value
    does not depend on the rows beside it."""
    values = compute(losses[0])
    if choice is None:
        return values
    # Selected by torch.where, not gather: gather's backward is a scatter-add, which CUDA has no
    # deterministic kernel for (compute.deterministic).
    for k, loss in enumerate(losses[1:], start=1):
        values = torch.where(choice == k, compute(loss), values)
    return values


@dataclass
class UpdateInputs:
    """What a stacked update reads besides its players, all on the device: the same shapes at every update
    of a pass, so that a captured update replays on copies of them filled in place."""

    noise: Tensor  # [attacker rows, batch, latent]
    factors: Tensor | None  # [2, attacker rows, 1]: Adam's (``StackedPlayers.next_factors``); None row by row
    defenders: Tensor | None  # [attacker rows]: each row's defender; None: row r's is the opponents' row r
    choice: Tensor | None  # [attacker rows]: each row's loss among the pass's candidates; None: one loss
    batch: Tensor | None  # [discriminator rows, batch]: each row's real images; None for generator rows

    def tensors(self) -> list[Tensor | None]:
        return [self.noise, self.factors, self.defenders, self.choice, self.batch]


class CapturedUpdate:
    """An update replayed from a CUDA graph (compute.cuda_graphs). The first call runs eagerly on a side
    stream, as a capture needs (cuBLAS's and autograd's first-call set-up outside the graph), and is a real
    update; the second records the update on copies of its inputs and replays it; every later one copies
    its inputs into those and replays: the same kernels on the same buffers, one launch for the update."""

    def __init__(self, run: Callable[[UpdateInputs], Tensor]) -> None:
        self.run = run
        self.graph: torch.cuda.CUDAGraph | None = None
        self.inputs: UpdateInputs | None = None
        self.output: Tensor | None = None
        self.calls = 0

    def __call__(self, inputs: UpdateInputs) -> Tensor:
        self.calls += 1
        if self.calls == 1:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                values = self.run(inputs)
            torch.cuda.current_stream().wait_stream(side)
            return values
        if self.graph is None:
            self.inputs = UpdateInputs(*(None if t is None else t.clone() for t in inputs.tensors()))
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.output = self.run(self.inputs)
        else:
            for static, given in zip(self.inputs.tensors(), inputs.tensors()):
                if static is not None:
                    static.copy_(given)
        self.graph.replay()
        return self.output


@dataclass
class FitnessCase:
    """One cell's fitness evaluation: its generators against its discriminators on one sample."""

    generators: list[Payload]
    discriminators: list[Payload]
    real: Tensor  # [S, ...]
    z: Tensor  # [S, latent]
    # Only the generators' losses are wanted: the discriminators never see the real sample.
    generators_only: bool = False
    # The generators' samples on z ([Kg, S, ...]), kept by the engine that made them: after training,
    # the new discriminators meet the same generators on the same noise (a tenth of fitness's work).
    fakes: Tensor | None = None


def fitness_losses(
    cases: Sequence[FitnessCase],
    g_net: StackedMLP,
    d_net: StackedMLP,
    loss: AdversarialLoss,
    whole: bool = False,
) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """For each case, the loss of every generator against every discriminator ([Kg, Kd]) and of every
    discriminator against every generator ([Kd, Kg]), as the loop's ``loop_fitness`` defines them.

    Cases of equal sizes go through the stacked networks together, a chunk of cases at a time (all of
    them when ``whole``); within a chunk the discriminators see one block of samples (the real ones, one
    generator's fakes) per call, which keeps the activations in cache (measured faster than one call on
    all blocks).
    """
    results: list[tuple[np.ndarray, np.ndarray | None]] = [None] * len(cases)  # type: ignore[list-item]
    by_size: dict[tuple[int, int, int, bool], list[int]] = {}
    for index, case in enumerate(cases):
        by_size.setdefault(
            (len(case.generators), len(case.discriminators), len(case.z), case.generators_only), []
        ).append(index)
    widest = max(shape[0] for shape in d_net.shapes + g_net.shapes)
    for (kg, kd, samples, _), indices in by_size.items():
        chunk = len(indices) if whole else max(1, FITNESS_CHUNK_FLOATS // (max(kg, kd) * samples * widest))
        for start in range(0, len(indices), chunk):
            part = indices[start : start + chunk]
            for index, result in zip(part, _fitness_chunk([cases[i] for i in part], g_net, d_net, loss, kg, kd)):
                results[index] = result
    return results


def _fitness_chunk(cases, g_net, d_net, loss, kg, kd):
    device = cases[0].z.device
    with torch.no_grad():
        d_params = d_net.stack([d["params"] for case in cases for d in case.discriminators], device)
        if all(case.fakes is not None for case in cases):
            fakes = torch.stack([case.fakes for case in cases])
        else:
            g_params = g_net.stack([g["params"] for case in cases for g in case.generators], device)
            z = torch.stack([case.z for case in cases]).repeat_interleave(kg, dim=0)
            fakes = g_net(g_params, z).unflatten(0, (len(cases), kg))  # [cases, kg, S, ...]
            for case, made in zip(cases, fakes):
                case.fakes = made
        real = torch.stack([case.real for case in cases])  # [cases, S, ...]
        # Every discriminator of a case sees the same block: one row of input per discriminator.
        seen = lambda block: d_net(d_params, block.repeat_interleave(kd, dim=0)).unflatten(0, (len(cases), kd))  # noqa: E731
        d_fake = torch.stack([seen(fakes[:, i]) for i in range(kg)], dim=2)  # [cases, kd, kg, S]
        g_losses = loss.generator(d_fake).transpose(1, 2).double().cpu().numpy()  # [cases, kg, kd]
        if cases[0].generators_only:
            return [(g, None) for g in g_losses]
        d_real = seen(real)  # [cases, kd, S]
        d_losses = loss.discriminator(d_real.unsqueeze(2), d_fake).double().cpu().numpy()  # [cases, kd, kg]
    return list(zip(g_losses, d_losses))


class StackedEngine:
    """The rank's cells together: fitness of all neighbourhood pairs and training of all selected
    copies in stacked networks (cells with the same number of updates per pass train in lockstep)."""

    def __init__(self, g_net: StackedMLP, d_net: StackedMLP, whole: bool, graphs: bool = False) -> None:
        # ``whole``: every operation on the whole stack (see the module's doc), else chunks for a CPU's cache.
        # ``graphs``: each pass's updates replayed from CUDA graphs (``CapturedUpdate``; whole layout only).
        self.g_net, self.d_net, self.whole, self.graphs = g_net, d_net, whole, graphs

    def fitness(self, cells, cases):
        """Every case scored with its cell's fitness loss (bce under Mustangs, as the loop does)."""
        return fitness_losses(cases, self.g_net, self.d_net, cells[0].loss, self.whole)

    def train(self, cells, selections, iteration, beat):
        results: list = [None] * len(cells)
        by_steps: dict[int, list[int]] = {}
        for index, cell in enumerate(cells):
            by_steps.setdefault(cell.steps(), []).append(index)
        chunk = self._cells_per_chunk(cells[0])
        for indices in [same[i : i + chunk] for same in by_steps.values() for i in range(0, len(same), chunk)]:
            trained = self._train_lockstep(
                [cells[i] for i in indices], [selections[i] for i in indices], iteration, beat
            )
            for index, result in zip(indices, trained):
                results[index] = result
        return results

    def span_images(self, cells, steps: Sequence[MixtureStep]) -> list[Tensor]:
        """Every cell's mixture components on their spans of its noise, through the stacked generator:
        spans of one padded length in one call per chunk of them, their noise rows gathered by one index
        and their images put in order by another."""
        spans = [step.spans for step in steps]
        samples, device = len(steps[0].z), cells[0].device
        noise = torch.stack([step.z for step in steps]).flatten(0, 1).to(device)  # [cells * samples, latent]
        by_rows: dict[int, list[tuple[int, int]]] = {}
        for s, cell_spans in enumerate(spans):
            for k, (start, end) in enumerate(cell_spans):
                if end > start:
                    by_rows.setdefault(-(-(end - start) // MIXTURE_CHUNK_ROWS) * MIXTURE_CHUNK_ROWS, []).append((s, k))
        widest = max(shape[0] for shape in self.g_net.shapes)
        outputs, first_row, made = [], {}, 0
        for rows, items in by_rows.items():
            chunk = len(items) if self.whole else max(1, FITNESS_CHUNK_FLOATS // (rows * widest))
            for first in range(0, len(items), chunk):
                part = items[first : first + chunk]
                # Each span's noise rows; past its end, noise row 0, whose images are dropped.
                index = np.zeros((len(part), rows), dtype=np.int64)
                for i, (s, k) in enumerate(part):
                    start, end = spans[s][k]
                    index[i, : end - start] = np.arange(s * samples + start, s * samples + end)
                    first_row[s, k] = made + i * rows
                with torch.no_grad():
                    params = self.g_net.stack([steps[s].generators[k]["params"] for s, k in part], device)
                    outputs.append(self.g_net(params, noise[torch.from_numpy(index).to(device)]).flatten(0, 1))
                made += len(part) * rows
        order = np.concatenate(
            [
                np.arange(first_row[s, k], first_row[s, k] + end - start)
                for s, cell_spans in enumerate(spans)
                for k, (start, end) in enumerate(cell_spans)
                if end > start
            ]
        )
        images = torch.cat(outputs)[torch.from_numpy(order).to(device)]
        return list(images.split([sum(end - start for start, end in cell_spans) for cell_spans in spans]))

    def _cells_per_chunk(self, cell) -> int:
        """Cells trained in lockstep at once: all of them in the whole-stack layout; otherwise as many as
        keep their parameters, gradients and Adam moments within CPU_CHUNK_BYTES, so that they are still
        in cache at the next update."""
        if self.whole:
            return 2**31
        population = cell.grid.population_size
        floats = sum(int(np.prod(shape)) for shape in self.g_net.shapes + self.d_net.shapes)
        return max(1, CPU_CHUNK_BYTES // (4 * 4 * floats * population))

    def _train_lockstep(self, cells, selections, iteration, beat):
        """One pass over each cell's images, every cell's update k in one stacked step."""
        first = cells[0]
        betas, device, batch, steps = first.betas, first.device, first.setup.batch_size, first.steps()
        gens = StackedPlayers(self.g_net, [p for new_g, _ in selections for p in new_g], betas, device, not self.whole)
        discs = StackedPlayers(self.d_net, [p for _, new_d in selections for p in new_d], betas, device, not self.whole)
        # Row ranges of each cell's copies in the stacks.
        g_rows = _row_ranges([len(new_g) for new_g, _ in selections])
        d_rows = _row_ranges([len(new_d) for _, new_d in selections])
        draws = GridDraws(cells, iteration, self.whole, steps)
        # Each discriminator row's image order (its cell's), indexed once per pass rather than per update.
        d_cells = torch.tensor([c for c, rows in enumerate(d_rows) for _ in rows], device=device)
        orders = draws.batch_orders(steps * batch)[d_cells]
        # Each row's losses summed on the device: read once, after the pass.
        g_sums = torch.zeros(len(gens), dtype=torch.float64, device=device)
        d_sums = torch.zeros(len(discs), dtype=torch.float64, device=device)
        d_steps = 0
        g_update = self._pass_update(gens, discs, first, None)
        d_update = self._pass_update(discs, gens, first, first.images)
        for step in range(steps):
            drawn = draws.update(step, "g", _by_cell(gens.lrs, g_rows), [len(r) for r in d_rows])
            g_sums += self._update(g_update, drawn, gens, discs, g_rows, d_rows, None)
            if first.d_updates(step):
                drawn = draws.update(step, "d", _by_cell(discs.lrs, d_rows), [len(r) for r in g_rows])
                batch_index = orders[:, step * batch : (step + 1) * batch]  # [discriminator rows, batch]
                d_sums += self._update(d_update, drawn, discs, gens, d_rows, g_rows, batch_index)
                d_steps += 1
            beat()
        g_totals, d_totals = g_sums.tolist(), d_sums.tolist()
        g_made = gens.payloads([p for new_g, _ in selections for p in new_g])
        d_made = discs.payloads([p for _, new_d in selections for p in new_d])
        return [
            (
                [g_made[r] for r in rows],
                [d_made[r] for r in drows],
                sum(g_totals[r] for r in rows) / max(1, steps * len(rows)),
                sum(d_totals[r] for r in drows) / max(1, d_steps * len(drows)),
            )
            for rows, drows in zip(g_rows, d_rows)
        ]

    def _pass_update(
        self, attackers: StackedPlayers, opponents: StackedPlayers, cell, images: Tensor | None
    ) -> Callable[[UpdateInputs], Tensor]:
        """The pass's update of ``attackers`` (generators when ``images`` is None; else discriminators
        trained on ``images``) against their drawn defenders, eager or captured."""
        mustangs = cell.setup.loss == "mustangs"
        candidates = tuple(LOSSES.get(name) for name in MUSTANGS_LOSSES) if mustangs else (cell.loss,)

        def run(inputs: UpdateInputs) -> Tensor:
            return self._stacked_update(attackers, opponents, candidates, images, inputs)

        return CapturedUpdate(run) if self.graphs else run

    def _update(
        self,
        update: Callable[[UpdateInputs], Tensor],
        drawn: UpdateDraws,
        attackers: StackedPlayers,
        opponents: StackedPlayers,
        rows: list[list[int]],
        opponent_rows: list[list[int]],
        batch: Tensor | None,
    ) -> Tensor:
        """One update of every attacker row against its cell's drawn defender (``batch``: each discriminator
        row's real images, None for generators); the rows' losses. The host's values reach the device here,
        outside the update itself, which reads them as inputs."""
        device = attackers.device
        attackers.lrs = drawn.lrs.ravel()
        defenders = [opponent_rows[c][drawn.defenders[c]] for c, cell_rows in enumerate(rows) for _ in cell_rows]
        # One attacker and one opponent per cell (the thesis's population of one): row r meets row r.
        identity = len(defenders) == len(opponents) and all(len(r) == 1 for r in rows + opponent_rows)
        choice = None
        if drawn.loss_picks is not None:
            picks = [drawn.loss_picks[c] for c, cell_rows in enumerate(rows) for _ in cell_rows]
            choice = to_device(torch.tensor(picks), device)
        inputs = UpdateInputs(
            drawn.noise,
            None if attackers.row_by_row else to_device(attackers.next_factors(), device),
            None if identity else to_device(torch.tensor(defenders), device),
            choice,
            batch,
        )
        with self._masks(drawn):
            values = update(inputs)
        attackers.forwards += 1 if batch is None else 2
        np.add.at(opponents.forwards, defenders, 1)
        return values.double()

    def _stacked_update(
        self,
        attackers: StackedPlayers,
        opponents: StackedPlayers,
        losses: tuple[AdversarialLoss, ...],
        images: Tensor | None,
        inputs: UpdateInputs,
    ) -> Tensor:
        """The update itself, on the device alone: no host read, no size or value that the host decides
        per call (tests/test_stacked_cells.py counts both), so that a CUDA graph can replay it."""
        defenders = opponents.frozen() if inputs.defenders is None else opponents.rows_of(inputs.defenders)
        # Both players in training mode, as in the loop: a defender's batch norms, too, normalise by the
        # batch and update their running statistics (StackedNetwork; in place, in the opponents' stack),
        # and its dropout drops by the attacker row's key, as the loop's lone defender does.
        if images is None:
            out = self.d_net(defenders, self.g_net(attackers.params, inputs.noise, True), True)
            values = chosen_losses(losses, inputs.choice, lambda loss: loss.generator(out))
        else:
            real = images[inputs.batch]  # [discriminator rows, batch, ...]
            with torch.no_grad():
                fake = self.g_net(defenders, inputs.noise, True)
            d_real, d_fake = self.d_net(attackers.params, real, True), self.d_net(attackers.params, fake, True)
            values = chosen_losses(losses, inputs.choice, lambda loss: loss.discriminator(d_real, d_fake))
        values.sum().backward()
        attackers.step(inputs.factors)
        return values.detach()

    def _masks(self, drawn: UpdateDraws) -> ExitStack:
        """The update's dropout masks keyed per row (an attacker row's and its defender's), in the
        networks that drop."""
        masks = ExitStack()
        for kind, net in enumerate((self.g_net, self.d_net)):
            if net.drops:
                masks.enter_context(keyed_masks(net.twin, drawn.dropout[:, kind], self.whole))
        return masks


def _flat_rows(stacked: Sequence[Tensor]) -> tuple[Tensor, list[Tensor]]:
    """One [rows, floats per row] buffer holding ``stacked`` (each [rows, ...]) side by side, and a view of
    it shaped like each; a row of a view is contiguous, as the stacked tensor's was."""
    flat = torch.cat([t.flatten(1) for t in stacked], dim=1)
    ends = np.cumsum([0] + [t[0].numel() for t in stacked])
    return flat, [flat[:, a:b].view(t.shape) for t, a, b in zip(stacked, ends[:-1].tolist(), ends[1:].tolist())]


def _by_cell(values: np.ndarray, rows: list[list[int]]) -> np.ndarray:
    """Per-row values as [cells, rows per cell] (every cell has as many rows)."""
    return values.reshape(len(rows), -1)


def _row_ranges(counts: Sequence[int]) -> list[list[int]]:
    starts = np.cumsum([0, *counts])
    return [list(range(int(a), int(b))) for a, b in zip(starts[:-1], starts[1:])]
