"""A rank's grid cells trained together (seed 002's algorithm, unchanged): batched players.

The networks of every cell on the rank are held as stacked parameters and run with batched matrix
products (``StackedMLP``): one kernel call per layer serves every cell, where the per-cell loop pays
Python, autograd and optimizer overhead once per cell and per update. Each cell still draws from its
own random streams in the same order as the loop, and every row's arithmetic is independent of the
other rows in its stack, so results do not depend on how cells are spread over ranks. Stacked networks
are Linear layers and activations: they draw nothing from torch's global generator, which the loop
swaps per cell for networks with dropout (``GlobalStream`` in cell.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ganstudy.models.stacked import StackedMLP
from ganstudy.train.grid.mixture_es import MixtureStep
from ganstudy.train.grid.population import Payload
from ganstudy.train.losses import AdversarialLoss

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


class StackedPlayers:
    """Rows of trainable individuals of one kind (generators or discriminators): stacked parameters and
    their Adam states, one learning rate and step count per row.

    Each row is updated by torch's fused Adam on views of its own slices, one call per row: the loop's
    arithmetic, a row's result independent of the other rows, and measured 8 times cheaper than a
    per-row-learning-rate Adam written with stacked tensor operations (0.07 vs 0.53 ms per row).
    """

    def __init__(self, net: StackedMLP, payloads: Sequence[Payload], betas: tuple[float, float], device: torch.device) -> None:
        self.net, self.betas = net, betas
        self.params = [p.requires_grad_() for p in net.stack([p["params"] for p in payloads], device)]
        states = [p["adam"]["state"] for p in payloads]
        self.exp_avg = self._moments(payloads, states, "exp_avg", device)
        self.exp_avg_sq = self._moments(payloads, states, "exp_avg_sq", device)
        # A fresh individual's optimizer has no state yet: Adam starts at step 0 with zero moments.
        self.steps = [
            [(state[k]["step"].clone() if state else torch.tensor(0.0)).to(device) for k in range(len(net.names))]
            for state in states
        ]
        self.lrs = [float(p["lr"]) for p in payloads]
        self._groups = [p["adam"]["param_groups"] for p in payloads]
        self._rows = [list(views) for views in zip(*[t.detach().unbind(0) for t in self.params])]
        self._exp_avg_rows = [list(views) for views in zip(*[t.unbind(0) for t in self.exp_avg])]
        self._exp_avg_sq_rows = [list(views) for views in zip(*[t.unbind(0) for t in self.exp_avg_sq])]

    def _moments(self, payloads, states, moment: str, device: torch.device) -> list[Tensor]:
        names = self.net.names
        per_row = [
            {name: state[k][moment] for k, name in enumerate(names)} if state else {name: torch.zeros_like(p["params"][name]) for name in names}
            for p, state in zip(payloads, states)
        ]
        return self.net.stack(per_row, device)

    def __len__(self) -> int:
        return len(self.lrs)

    def frozen(self, rows: list[int] | None = None) -> list[Tensor]:
        """The parameters without gradient tracking, optionally one row per entry of ``rows``."""
        detached = [p.detach() for p in self.params]
        return detached if rows is None or rows == list(range(len(self))) else [p[rows] for p in detached]

    def step(self) -> None:
        beta1, beta2 = self.betas
        grads = [list(views) for views in zip(*[p.grad.unbind(0) for p in self.params])]
        for row, lr in enumerate(self.lrs):
            # As torch.optim.Adam does: the step count goes up before the fused kernel reads it.
            torch._foreach_add_(self.steps[row], 1)
            torch._fused_adam_(
                self._rows[row], grads[row], self._exp_avg_rows[row], self._exp_avg_sq_rows[row], [], self.steps[row],
                lr=lr, beta1=beta1, beta2=beta2, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False,
            )
        for param in self.params:
            param.grad = None

    def payload(self, row: int, fitness: float, origin: str) -> Payload:
        """Row ``row`` as a payload in the format of a lone network and its torch Adam state."""
        exp_avg, exp_avg_sq = self.net.state(self.exp_avg, row), self.net.state(self.exp_avg_sq, row)
        state = {
            k: {"step": self.steps[row][k].cpu().clone(), "exp_avg": exp_avg[name].cpu(), "exp_avg_sq": exp_avg_sq[name].cpu()}
            for k, name in enumerate(self.net.names)
        }
        groups = [{**group, "lr": self.lrs[row]} for group in self._groups[row]]
        params = {k: v.cpu() for k, v in self.net.state(self.params, row).items()}
        return {"params": params, "adam": {"state": state, "param_groups": groups}, "lr": self.lrs[row],
                "fitness": fitness, "origin": origin}


def row_losses(losses: Sequence[AdversarialLoss] | AdversarialLoss, compute: Callable[[AdversarialLoss, slice | int], Tensor]) -> Tensor:
    """Per-row loss values: one loss for every row in one call, or (Mustangs) each row with its own.

    Which of the two is fixed by the set-up, never by which rows share a rank.
    """
    if isinstance(losses, AdversarialLoss):
        return compute(losses, slice(None))
    return torch.stack([compute(loss, row) for row, loss in enumerate(losses)])


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
    cases: Sequence[FitnessCase], g_net: StackedMLP, d_net: StackedMLP, loss: AdversarialLoss,
) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """For each case, the loss of every generator against every discriminator ([Kg, Kd]) and of every
    discriminator against every generator ([Kd, Kg]), as the loop's ``loop_fitness`` defines them.

    Cases of equal sizes go through the stacked networks together, a chunk of cases at a time; within a
    chunk the discriminators see one block of samples (the real ones, one generator's fakes) per call,
    which keeps the activations in cache (measured faster than one call on all blocks).
    """
    results: list[tuple[np.ndarray, np.ndarray | None]] = [None] * len(cases)  # type: ignore[list-item]
    by_size: dict[tuple[int, int, int, bool], list[int]] = {}
    for index, case in enumerate(cases):
        by_size.setdefault((len(case.generators), len(case.discriminators), len(case.z), case.generators_only), []).append(index)
    widest = max(shape[0] for shape in d_net.shapes + g_net.shapes)
    for (kg, kd, samples, _), indices in by_size.items():
        chunk = max(1, FITNESS_CHUNK_FLOATS // (max(kg, kd) * samples * widest))
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

    def __init__(self, g_net: StackedMLP, d_net: StackedMLP) -> None:
        self.g_net, self.d_net = g_net, d_net

    def fitness(self, cells, cases):
        """Every case scored with its cell's fitness loss (bce under Mustangs, as the loop does)."""
        return fitness_losses(cases, self.g_net, self.d_net, cells[0].loss)

    def train(self, cells, selections, beat):
        results: list = [None] * len(cells)
        by_steps: dict[int, list[int]] = {}
        for index, cell in enumerate(cells):
            by_steps.setdefault(cell.steps(), []).append(index)
        chunk = self._cells_per_chunk(cells[0])
        for indices in [same[i : i + chunk] for same in by_steps.values() for i in range(0, len(same), chunk)]:
            trained = self._train_lockstep([cells[i] for i in indices], [selections[i] for i in indices], beat)
            for index, result in zip(indices, trained):
                results[index] = result
        return results

    def span_images(self, cells, steps: Sequence[MixtureStep]) -> list[Tensor]:
        """Every cell's mixture components on their spans of its noise, through the stacked generator:
        spans of one padded length in one call per chunk of them."""
        spans = [step.spans for step in steps]
        by_rows: dict[int, list[tuple[int, int]]] = {}
        for s, cell_spans in enumerate(spans):
            for k, (start, end) in enumerate(cell_spans):
                if end > start:
                    by_rows.setdefault(-(-(end - start) // MIXTURE_CHUNK_ROWS) * MIXTURE_CHUNK_ROWS, []).append((s, k))
        device = cells[0].device
        widest = max(shape[0] for shape in self.g_net.shapes)
        made: dict[tuple[int, int], Tensor] = {}
        for rows, items in by_rows.items():
            chunk = max(1, FITNESS_CHUNK_FLOATS // (rows * widest))
            for first in range(0, len(items), chunk):
                part = items[first : first + chunk]
                z = torch.zeros(len(part), rows, steps[0].z.shape[1])
                for i, (s, k) in enumerate(part):
                    start, end = spans[s][k]
                    z[i, : end - start] = steps[s].z[start:end]
                with torch.no_grad():
                    out = self.g_net(self.g_net.stack([steps[s].generators[k]["params"] for s, k in part], device), z.to(device))
                for i, (s, k) in enumerate(part):
                    start, end = spans[s][k]
                    made[s, k] = out[i, : end - start]
        return [torch.cat([made[s, k] for k, (start, end) in enumerate(cell_spans) if end > start]) for s, cell_spans in enumerate(spans)]

    def _cells_per_chunk(self, cell) -> int:
        """Cells trained in lockstep at once. A GPU takes them all; on a CPU a chunk's parameters, gradients
        and Adam moments stay within CPU_CHUNK_BYTES, so that they are still in cache at the next update."""
        if cell.device.type != "cpu":
            return 2**31
        population = cell.grid.population_size
        floats = sum(int(np.prod(shape)) for shape in self.g_net.shapes + self.d_net.shapes)
        return max(1, CPU_CHUNK_BYTES // (4 * 4 * floats * population))

    def _train_lockstep(self, cells, selections, beat):
        """One pass over each cell's images, every cell's update k in one stacked step."""
        first = cells[0]
        betas, device, batch, mustangs = first.betas, first.device, first.setup.batch_size, first.setup.loss == "mustangs"
        gens = StackedPlayers(self.g_net, [p for new_g, _ in selections for p in new_g], betas, device)
        discs = StackedPlayers(self.d_net, [p for _, new_d in selections for p in new_d], betas, device)
        # Row ranges of each cell's copies in the stacks.
        g_rows = _row_ranges([len(new_g) for new_g, _ in selections])
        d_rows = _row_ranges([len(new_d) for _, new_d in selections])
        orders = [cell.batch_order() for cell in cells]
        g_totals, d_totals, d_steps = np.zeros(len(cells)), np.zeros(len(cells)), 0
        for step in range(first.steps()):
            real = torch.stack([cell.images[order[step * batch : (step + 1) * batch]] for cell, order in zip(cells, orders)])
            defenders, losses, noises = _draw_update(cells, gens, g_rows, d_rows)
            out = self.d_net(discs.frozen(defenders), self.g_net(gens.params, noises))
            values = row_losses(losses if mustangs else first.loss, lambda loss, r: loss.generator(out[r]))
            values.sum().backward()
            gens.step()
            _add_by_cell(g_totals, values, g_rows)
            if first.d_updates(step):
                defenders, losses, noises = _draw_update(cells, discs, d_rows, g_rows)
                with torch.no_grad():
                    fake = self.g_net(gens.frozen(defenders), noises)
                cell_of_row = [c for c, rows in enumerate(d_rows) for _ in rows]
                d_real, d_fake = self.d_net(discs.params, real[cell_of_row]), self.d_net(discs.params, fake)
                values = row_losses(losses if mustangs else first.loss, lambda loss, r: loss.discriminator(d_real[r], d_fake[r]))
                values.sum().backward()
                discs.step()
                _add_by_cell(d_totals, values, d_rows)
                d_steps += 1
            beat()
        steps = first.steps()
        return [
            ([gens.payload(r, p["fitness"], p["origin"]) for r, p in zip(rows, new_g)],
             [discs.payload(r, p["fitness"], p["origin"]) for r, p in zip(drows, new_d)],
             g_totals[c] / max(1, steps * len(rows)), d_totals[c] / max(1, d_steps * len(drows)))
            for c, (rows, drows, (new_g, new_d)) in enumerate(zip(g_rows, d_rows, selections))
        ]


def _draw_update(cells, attackers: StackedPlayers, rows_of: list[list[int]], opponents_of: list[list[int]]):
    """One update's draws, cell by cell in the loop's order: the defender (an opponent row), the loss,
    then for each attacker its mutated learning rate and its noise. Returns per attacker row the
    defender row, the loss and the noise batch."""
    defenders, losses, noises = [], [], []
    for cell, rows, opponents in zip(cells, rows_of, opponents_of):
        defender, loss = opponents[cell.pick(len(opponents))], cell.step_loss()
        for row in rows:
            attackers.lrs[row] = cell.mutated_lr(attackers.lrs[row])
            noises.append(cell.noise())
            defenders.append(defender)
            losses.append(loss)
    return defenders, losses, torch.stack(noises)


def _row_ranges(counts: Sequence[int]) -> list[list[int]]:
    starts = np.cumsum([0, *counts])
    return [list(range(int(a), int(b))) for a, b in zip(starts[:-1], starts[1:])]


def _add_by_cell(totals: np.ndarray, values: Tensor, rows: Sequence[Sequence[int]]) -> None:
    """Add each row's loss to its cell's total, in row order (the loop's order of additions)."""
    floats = values.detach().cpu().tolist()
    for c, cell_rows in enumerate(rows):
        for row in cell_rows:
            totals[c] += floats[row]
