"""Individuals of a cell's populations and the evolutionary operators on them (Lipizzaner's).

An individual travels between cells as a plain payload (network weights, Adam state, learning
rate, fitness); a cell turns the payloads it needs back into live networks. Every tensor of a payload
stays on its rank's device (the GPU's, where it trains): the host sees it only on the wire to another
rank (``parallel.exchange``), in a checkpoint and in the final mixture.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import nn

from ganstudy.train.fused_adam import FusedAdam
from ganstudy.train.steps import adam

Payload = dict[str, Any]


@dataclass
class Individual:
    net: nn.Module
    optimizer: FusedAdam
    lr: float
    fitness: float
    origin: str  # "r-c/G0": the cell and slot it was created in, for the logs

    def payload(self) -> Payload:
        """A detached copy, on the network's device, that later training of ``self`` leaves alone."""
        return {
            "params": {k: v.detach().clone() for k, v in self.net.state_dict().items()},
            "adam": copy.deepcopy(self.optimizer.state_dict()),
            "lr": self.lr,
            "fitness": self.fitness,
            "origin": self.origin,
        }


def restore(payload: Payload, net: nn.Module, betas: tuple[float, float]) -> Individual:
    """A live individual from a payload, in ``net`` (which holds the payload's parameters); its optimizer
    continues with the payload's Adam moments."""
    optimizer = adam(net.parameters(), payload["lr"], betas)
    # A copy: the payload may be another cell's live state on this rank, and Adam updates in place.
    optimizer.load_state_dict(copy.deepcopy(payload["adam"]))
    set_learning_rate(optimizer, payload["lr"])
    return Individual(net, optimizer, payload["lr"], payload["fitness"], payload["origin"])


def set_learning_rate(optimizer: FusedAdam, lr: float) -> None:
    # load_state_dict restores the old rate; the individual's (mutated) rate is the one that counts.
    for group in optimizer.param_groups:
        group["lr"] = lr


def tournament(fitness: Sequence[float], winners: int, size: int, rng: np.random.Generator) -> list[int]:
    """Indices of ``winners`` tournament winners; lower fitness (a loss) wins; ties go to the lower index."""
    size = min(size, len(fitness))
    chosen = []
    for _ in range(winners):
        entrants = rng.choice(len(fitness), size=size, replace=False)
        chosen.append(int(min(entrants, key=lambda i: (fitness[i], i))))
    return chosen


def mutate_learning_rates(
    lrs: np.ndarray, lr0: float, alpha: float, probability: float, normals: np.ndarray, uniforms: np.ndarray
) -> np.ndarray:
    """Lipizzaner's rule for each rate, given a standard normal and a uniform draw per rate: where the
    uniform is below p, lr <- max(0, lr + alpha * N(-lr0/10, lr0))."""
    delta = lr0 * normals + (-lr0 / 10)
    return np.where(uniforms < probability, np.maximum(0.0, lrs + alpha * delta), lrs)


def replace_worst(
    local: list[Payload], new: list[Payload], n_replacements: int, only_better: bool = False
) -> list[Payload]:
    """The local population after its n worst are replaced by the n best new individuals, best first.

    As in Lipizzaner, the best new individual is paired with the best of the n worst local ones, the
    second best with the next, and so on. ``only_better`` keeps the local individual unless the new
    one's fitness is lower, as the ALFA-group repository's current code does (ALWAYS_REPLACE = False);
    otherwise the replacement is unconditional (ALWAYS_REPLACE = True): with a population of one, the
    individual trained this iteration always becomes the cell's.
    """
    by_fitness = lambda p: p["fitness"]  # noqa: E731
    ranked, best_new = sorted(local, key=by_fitness), sorted(new, key=by_fitness)[:n_replacements]
    worst = ranked[len(ranked) - n_replacements :]
    taken = [n if not only_better or n["fitness"] < w["fitness"] else w for n, w in zip(best_new, worst)]
    return sorted(ranked[: len(ranked) - n_replacements] + taken, key=by_fitness)
