"""A rank's grid cells trained together (seed 002's algorithm, unchanged): batched players.

The networks of every cell on the rank are held as stacked parameters and run with batched matrix
products (``StackedMLP``): one kernel call per layer serves every cell, where the per-cell loop pays
Python, autograd and optimizer overhead once per cell and per update. Each cell still draws from its
own random streams in the same order as the loop, and every row's arithmetic is independent of the
other rows in its stack, so results do not depend on how cells are spread over ranks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ganstudy.models.stacked import StackedMLP
from ganstudy.train.grid.population import Payload
from ganstudy.train.losses import AdversarialLoss

Tensor = torch.Tensor
# Rows x samples x hidden units of one fitness chunk: bounds the activations' memory (about 256 MB).
FITNESS_CHUNK_FLOATS = 64 * 2**20


def _per_row(values: Sequence[float], like: Tensor) -> Tensor:
    """One value per row, shaped to broadcast over ``like``'s other dimensions."""
    return torch.tensor(values, dtype=like.dtype, device=like.device).view(-1, *[1] * (like.dim() - 1))


class StackedPlayers:
    """Rows of trainable individuals of one kind (generators or discriminators): stacked parameters and
    their Adam states, one learning rate and step count per row.

    The update is torch's single-tensor Adam written per row (bias corrections per row), so a row's new
    parameters depend on its own gradients, moments and learning rate alone.
    """

    def __init__(self, net: StackedMLP, payloads: Sequence[Payload], betas: tuple[float, float], device: torch.device) -> None:
        self.net, self.betas, self.eps = net, betas, 1e-8
        self.params = [p.to(device).requires_grad_() for p in net.stack([p["params"] for p in payloads])]
        states = [p["adam"]["state"] for p in payloads]
        self.exp_avg = [self._moments(states, k, "exp_avg", p) for k, p in enumerate(self.params)]
        self.exp_avg_sq = [self._moments(states, k, "exp_avg_sq", p) for k, p in enumerate(self.params)]
        # A fresh individual's optimizer has no state yet: Adam starts at step 0 with zero moments.
        self.steps = [float(state[0]["step"]) if state else 0.0 for state in states]
        self.lrs = [float(p["lr"]) for p in payloads]
        self._groups = [p["adam"]["param_groups"] for p in payloads]

    @staticmethod
    def _moments(states, k: int, name: str, like: Tensor) -> Tensor:
        return torch.stack([state[k][name].to(like.device) if state else torch.zeros_like(like[0]) for state in states])

    def __len__(self) -> int:
        return len(self.lrs)

    def frozen(self, rows: list[int] | None = None) -> list[Tensor]:
        """The parameters without gradient tracking, optionally one row per entry of ``rows``."""
        detached = [p.detach() for p in self.params]
        return detached if rows is None or rows == list(range(len(self))) else [p[rows] for p in detached]

    def step(self) -> None:
        beta1, beta2 = self.betas
        self.steps = [s + 1 for s in self.steps]
        with torch.no_grad():
            for param, exp_avg, exp_avg_sq in zip(self.params, self.exp_avg, self.exp_avg_sq):
                grad = param.grad
                step_size = _per_row([lr / (1 - beta1**s) for lr, s in zip(self.lrs, self.steps)], param)
                correction = _per_row([(1 - beta2**s) ** 0.5 for s in self.steps], param)
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = (exp_avg_sq.sqrt() / correction).add_(self.eps)
                param.addcdiv_(exp_avg * step_size, denom, value=-1.0)
                param.grad = None

    def payload(self, row: int, fitness: float, origin: str) -> Payload:
        """Row ``row`` as a payload in the format of a lone network and its torch Adam state."""
        state = {
            k: {"step": torch.tensor(self.steps[row]), "exp_avg": m[row].detach().cpu().clone(),
                "exp_avg_sq": v[row].detach().cpu().clone()}
            for k, (m, v) in enumerate(zip(self.exp_avg, self.exp_avg_sq))
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

    generators: list[dict[str, Tensor]]
    discriminators: list[dict[str, Tensor]]
    real: Tensor  # [S, ...]
    z: Tensor  # [S, latent]


def fitness_losses(
    cases: Sequence[FitnessCase], g_net: StackedMLP, d_net: StackedMLP, loss: AdversarialLoss, hidden: int,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each case, the loss of every generator against every discriminator ([Kg, Kd]) and of every
    discriminator against every generator ([Kd, Kg]), as the loop's ``_fitness`` defines them.

    Cases of equal sizes go through the stacked networks together, a chunk of cases at a time.
    """
    results: list[tuple[np.ndarray, np.ndarray]] = [None] * len(cases)  # type: ignore[list-item]
    by_size: dict[tuple[int, int, int], list[int]] = {}
    for index, case in enumerate(cases):
        by_size.setdefault((len(case.generators), len(case.discriminators), len(case.z)), []).append(index)
    for (kg, kd, samples), indices in by_size.items():
        per_case = kd * (1 + kg) * samples * hidden
        chunk = max(1, FITNESS_CHUNK_FLOATS // per_case)
        for start in range(0, len(indices), chunk):
            part = [cases[i] for i in indices[start : start + chunk]]
            for index, result in zip(indices[start : start + chunk], _fitness_chunk(part, g_net, d_net, loss, kg, kd)):
                results[index] = result
    return results


def _fitness_chunk(cases, g_net, d_net, loss, kg, kd):
    with torch.no_grad():
        g_params = g_net.stack([g for case in cases for g in case.generators])
        d_params = d_net.stack([d for case in cases for d in case.discriminators])
        z = torch.stack([case.z for case in cases for _ in range(kg)])
        fakes = g_net(g_params, z)  # [cases * kg, S, ...]
        samples = z.shape[1]
        inputs = []
        for c, case in enumerate(cases):
            # Each discriminator of the case sees the real sample, then every generator's fakes.
            seen = torch.cat([case.real.unsqueeze(0), fakes[c * kg : (c + 1) * kg]]).flatten(0, 1)
            inputs += [seen] * kd
        out = d_net(d_params, torch.stack(inputs)).view(len(cases), kd, 1 + kg, samples)
        d_real, d_fake = out[:, :, :1], out[:, :, 1:]
        g_losses = loss.generator(d_fake).transpose(1, 2)  # [cases, kg, kd]
        d_losses = loss.discriminator(d_real, d_fake)  # [cases, kd, kg]
    return [(g.double().cpu().numpy(), d.double().cpu().numpy()) for g, d in zip(g_losses, d_losses)]


class StackedEngine:
    """The rank's cells together: fitness of all neighbourhood pairs and training of all selected
    copies in stacked networks (cells with the same number of updates per pass train in lockstep)."""

    def __init__(self, g_net: StackedMLP, d_net: StackedMLP, hidden_units: int) -> None:
        self.g_net, self.d_net, self.hidden = g_net, d_net, hidden_units

    def fitness(self, cells, cases):
        """Every case scored with its cell's fitness loss (bce under Mustangs, as the loop does)."""
        loss = cells[0].loss
        return fitness_losses(
            [FitnessCase([p["params"] for p in c.generators], [p["params"] for p in c.discriminators], c.real, c.z) for c in cases],
            self.g_net, self.d_net, loss, self.hidden,
        )

    def train(self, cells, selections, beat):
        results: list = [None] * len(cells)
        by_steps: dict[int, list[int]] = {}
        for index, cell in enumerate(cells):
            by_steps.setdefault(cell.steps(), []).append(index)
        for indices in by_steps.values():
            trained = self._train_lockstep([cells[i] for i in indices], [selections[i] for i in indices], beat)
            for index, result in zip(indices, trained):
                results[index] = result
        return results

    def _train_lockstep(self, cells, selections, beat):
        """One pass over each cell's images, every cell's update k in one stacked step."""
        first = cells[0]
        betas, device, batch, mustangs = first.betas, first.device, first.setup["batch_size"], first.setup["loss"] == "mustangs"
        gens = StackedPlayers(self.g_net, [p for new_g, _ in selections for p in new_g], betas, device)
        discs = StackedPlayers(self.d_net, [p for _, new_d in selections for p in new_d], betas, device)
        # Row ranges of each cell's copies in the stacks.
        g_rows = _row_ranges([len(new_g) for new_g, _ in selections])
        d_rows = _row_ranges([len(new_d) for _, new_d in selections])
        orders = [cell.batch_order() for cell in cells]
        g_totals, d_totals, d_steps = np.zeros(len(cells)), np.zeros(len(cells)), 0
        for step in range(first.steps()):
            real = torch.stack([cell.images[order[step * batch : (step + 1) * batch]] for cell, order in zip(cells, orders)])
            # Each cell draws its defender, its loss, then mutates and draws noise for each attacker.
            defenders, losses, noises = [], [], []
            for cell, rows, opponents in zip(cells, g_rows, d_rows):
                defender, loss = opponents[cell.pick(len(opponents))], cell.step_loss()
                for row in rows:
                    gens.lrs[row] = cell.mutated_lr(gens.lrs[row])
                    noises.append(cell.noise())
                    defenders.append(defender)
                    losses.append(loss)
            out = self.d_net(discs.frozen(defenders), self.g_net(gens.params, torch.stack(noises)))
            values = row_losses(losses if mustangs else first.loss, lambda loss, r: loss.generator(out[r]))
            values.sum().backward()
            gens.step()
            _add_by_cell(g_totals, values, g_rows)
            if first.d_updates(step):
                defenders, losses, noises = [], [], []
                for cell, rows, opponents in zip(cells, d_rows, g_rows):
                    defender, loss = opponents[cell.pick(len(opponents))], cell.step_loss()
                    for row in rows:
                        discs.lrs[row] = cell.mutated_lr(discs.lrs[row])
                        noises.append(cell.noise())
                        defenders.append(defender)
                        losses.append(loss)
                with torch.no_grad():
                    fake = self.g_net(gens.frozen(defenders), torch.stack(noises))
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


def _row_ranges(counts: Sequence[int]) -> list[list[int]]:
    starts = np.cumsum([0, *counts])
    return [list(range(int(a), int(b))) for a, b in zip(starts[:-1], starts[1:])]


def _add_by_cell(totals: np.ndarray, values: Tensor, rows: Sequence[Sequence[int]]) -> None:
    """Add each row's loss to its cell's total, in row order (the loop's order of additions)."""
    floats = values.detach().cpu().tolist()
    for c, cell_rows in enumerate(rows):
        for row in cell_rows:
            totals[c] += floats[row]
