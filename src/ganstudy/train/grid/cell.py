"""One cell of the grid and its iteration (Lipizzaner's, seed 002 section 2):

gather -> fitness of the neighbourhood's individuals against the neighbourhood's opponents ->
tournament selection -> one pass of training of the selected copies against each other, with
learning-rate mutation at each update -> fitness of the trained copies -> replacement of the
worst local individuals -> (1+1)-ES step on the mixture weights of the neighbourhood's generators.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ganstudy.evaluate.fid import FidScorer
from ganstudy.data.partition import cell_subset
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.mixture import MixtureGenerator
from ganstudy.parallel.timing import RoutineTimer
from ganstudy.parallel.topology import Cell, GridShape
from ganstudy.seeding import derive_seed
from ganstudy.train.grid.population import (
    Individual,
    Payload,
    mutate_learning_rate,
    replace_worst,
    restore,
    set_learning_rate,
    tournament,
)
from ganstudy.train.losses import LOSSES, AdversarialLoss
from ganstudy.train.steps import adam, discriminator_step, generator_step

MUSTANGS_LOSSES = ("bce", "mse", "heuristic")


def cell_label(cell: Cell) -> str:
    return f"{cell[0]}-{cell[1]}"


class CellStreams:
    """The cell's random streams, each derived from (study seed, trial, cell, stream name)."""

    TORCH = ("batches", "noise", "fitness", "mixture")

    def __init__(self, study_seed: int, trial: int, cell: Cell) -> None:
        seed = lambda name: derive_seed(study_seed, trial, "cell", cell[0], cell[1], name)  # noqa: E731
        self.torch = {name: torch.Generator().manual_seed(seed(name)) for name in self.TORCH}
        self.evolution = np.random.default_rng(seed("evolution"))
        self.data_seed = seed("data")
        self.init_seed = seed("init")

    def state(self) -> dict[str, Any]:
        return {"torch": {k: g.get_state() for k, g in self.torch.items()}, "evolution": self.evolution.bit_generator.state}

    def load(self, state: dict[str, Any]) -> None:
        for name, generator in self.torch.items():
            generator.set_state(state["torch"][name])
        self.evolution.bit_generator.state = state["evolution"]


def _aggregate(losses: np.ndarray, mode: str) -> np.ndarray:
    """Fitness of each row's individual from its losses against every opponent (columns)."""
    return {"average": losses.mean(axis=1), "worst": losses.max(axis=1), "best": losses.min(axis=1)}[mode]


@dataclass
class IterationReport:
    g_loss: float
    d_loss: float
    g_fitness: float
    d_fitness: float
    score: float
    g_lr: float
    d_lr: float


class GridCell:
    def __init__(
        self,
        cell: Cell,
        shape: GridShape,
        setup: dict[str, Any],
        spec: NetworkSpec,
        images: torch.Tensor,
        labels: np.ndarray,
        scorer: FidScorer,
        streams: CellStreams,
        device: torch.device,
    ) -> None:
        self.cell, self.setup, self.grid = cell, setup, setup["grid"]
        self.spec, self.images, self.scorer = spec, images, scorer
        self.streams, self.device = streams, device
        self.betas = tuple(setup["betas"])
        self.neighbourhood = shape.neighbourhood(cell)
        self.loss = LOSSES.get("bce" if setup["loss"] == "mustangs" else setup["loss"])
        self.only_better = self.grid["replacement"] == "better"
        # A fixed per-cell subset of the training split: its classes, then data dieting.
        classes = self.grid["cell_classes"][shape.index(cell)] if self.grid["cell_classes"] else None
        self.subset = torch.from_numpy(cell_subset(labels, self.grid["data_ratio"], classes, setup["batch_size"], streams.data_seed))
        self.generators: list[Payload] = []
        self.discriminators: list[Payload] = []
        self.weights = np.full(len(self.neighbourhood), 1.0 / len(self.neighbourhood))
        self.score = float("inf")
        self._pool: dict[int, list[nn.Module]] = {0: [], 1: []}
        self._view_slots = len(self.neighbourhood) * self.grid["population_size"]

    # -- networks -----------------------------------------------------------------------------
    def _build(self, kind: int) -> nn.Module:
        return build_pair(self.setup["network"], self.spec)[kind].to(self.device)

    def _pooled(self, kind: int, slot: int) -> nn.Module:
        """A reusable network: building modules costs more than the small nets' forward passes."""
        pool = self._pool[kind]
        while len(pool) <= slot:
            pool.append(self._build(kind))
        return pool[slot]

    def _net(self, payload: Payload, kind: int, slot: int) -> nn.Module:
        net = self._pooled(kind, slot)
        net.load_state_dict(payload["params"])
        return net.eval()

    def _individual(self, payload: Payload, kind: int, slot: int) -> Individual:
        # Slots past the neighbourhood's: the trained copies must not share nets with the fitness views.
        return restore(payload, self._pooled(kind, self._view_slots + slot), self.betas)

    def initialise(self) -> None:
        """Population slots seeded by the cell's init stream: the same networks on every rank layout."""
        label = cell_label(self.cell)
        for kind, population, name in ((0, self.generators, "G"), (1, self.discriminators, "D")):
            for slot in range(self.grid["population_size"]):
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(derive_seed(self.streams.init_seed, kind, slot))
                    net = self._build(kind)
                optimizer = adam(net.parameters(), self.setup["lr"], self.betas)
                population.append(Individual(net, optimizer, self.setup["lr"], float("inf"), f"{label}/{name}{slot}").payload())

    # -- state --------------------------------------------------------------------------------
    def shared_state(self) -> dict[str, list[Payload]]:
        """What neighbours receive: the local populations, best first."""
        return {"generators": self.generators, "discriminators": self.discriminators}

    def checkpoint_state(self) -> dict[str, Any]:
        return {
            "generators": self.generators,
            "discriminators": self.discriminators,
            "weights": torch.from_numpy(self.weights.copy()),
            "score": self.score,
            "streams": self.streams.state(),
        }

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        self.generators, self.discriminators = state["generators"], state["discriminators"]
        self.weights, self.score = state["weights"].numpy().copy(), state["score"]
        self.streams.load(state["streams"])

    # -- one iteration ------------------------------------------------------------------------
    def _fitness(self, g_nets, d_nets, real, z, d_real=None):
        """Losses of every generator against every discriminator on one fitness sample."""
        with torch.no_grad():
            d_real = d_real if d_real is not None else [d(real) for d in d_nets]
            g_losses = np.zeros((len(g_nets), len(d_nets)))
            d_losses = np.zeros((len(d_nets), len(g_nets)))
            for i, g in enumerate(g_nets):
                fake = g(z)
                for j, d in enumerate(d_nets):
                    out = d(fake)
                    g_losses[i, j] = float(self.loss.generator(out))
                    d_losses[j, i] = float(self.loss.discriminator(d_real[j], out))
        return g_losses, d_losses, d_real

    def _step_loss(self) -> AdversarialLoss:
        if self.setup["loss"] != "mustangs":
            return self.loss
        # Mustangs: each update draws its loss at random among Lipizzaner's three.
        return LOSSES.get(MUSTANGS_LOSSES[int(self.streams.evolution.integers(len(MUSTANGS_LOSSES)))])

    def _mutate(self, individual: Individual) -> None:
        grid = self.grid
        individual.lr = mutate_learning_rate(
            individual.lr, self.setup["lr"], grid["mutation_rate"], grid["mutation_probability"], self.streams.evolution
        )
        set_learning_rate(individual.optimizer, individual.lr)

    def _train(self, new_g: list[Individual], new_d: list[Individual], beat: Callable[[], None]) -> tuple[float, float]:
        grid, rng, batch = self.grid, self.streams.evolution, self.setup["batch_size"]
        order = self.subset[torch.randperm(len(self.subset), generator=self.streams.torch["batches"])].to(self.device)
        steps = len(order) // batch
        skip = grid["discriminator_skip"]
        g_total, d_total, d_steps = 0.0, 0.0, 0
        noise = self.streams.torch["noise"]
        for step in range(steps):
            real = self.images[order[step * batch : (step + 1) * batch]]
            defender = new_d[int(rng.integers(len(new_d)))]
            loss = self._step_loss()
            for attacker in new_g:
                self._mutate(attacker)
                z = torch.randn(batch, self.spec.latent_dim, generator=noise).to(self.device)
                g_total += float(generator_step(attacker.net, defender.net, attacker.optimizer, loss, z))
            if skip == 0 or step % (skip + 1) == 0:
                defender = new_g[int(rng.integers(len(new_g)))]
                loss = self._step_loss()
                for attacker in new_d:
                    self._mutate(attacker)
                    z = torch.randn(batch, self.spec.latent_dim, generator=noise).to(self.device)
                    d_total += float(discriminator_step(attacker.net, defender.net, attacker.optimizer, loss, real, z))
                d_steps += 1
            beat()
        return g_total / max(1, steps * len(new_g)), d_total / max(1, d_steps * len(new_d))

    def mixture_score(self, generators: list[nn.Module], weights: np.ndarray, z: torch.Tensor) -> float:
        with torch.no_grad():
            images = MixtureGenerator(generators, weights)(z.to(self.device), batch_size=self.setup["batch_size"] * 10)
        return self.scorer.fid(images)

    def _evolve_mixture(self, generators: list[nn.Module]) -> float:
        """(1+1)-ES: mutate the weights with N(0, sigma), keep them when the mixture's FID improves."""
        z = torch.randn(self.grid["score_sample_size"], self.spec.latent_dim, generator=self.streams.torch["mixture"])
        current = self.mixture_score(generators, self.weights, z)
        if len(generators) > 1:
            mutated = np.clip(self.weights + self.streams.evolution.normal(0.0, self.grid["mixture_sigma"], len(self.weights)), 0, None)
            if mutated.sum() > 0:
                mutated /= mutated.sum()
                candidate = self.mixture_score(generators, mutated, z)
                if candidate < current:
                    self.weights, current = mutated, candidate
        return current

    def iterate(self, gathered: dict[Cell, dict[str, list[Payload]]], timer: RoutineTimer, beat: Callable[[], None]) -> IterationReport:
        grid = self.grid
        all_g = [p for n in self.neighbourhood for p in gathered[n]["generators"]]
        all_d = [p for n in self.neighbourhood for p in gathered[n]["discriminators"]]
        with timer("fitness"):
            g_nets = [self._net(p, 0, slot) for slot, p in enumerate(all_g)]
            d_nets = [self._net(p, 1, slot) for slot, p in enumerate(all_d)]
            picks = torch.randint(len(self.subset), (grid["fitness_sample_size"],), generator=self.streams.torch["fitness"])
            real = self.images[self.subset[picks].to(self.device)]
            z = torch.randn(grid["fitness_sample_size"], self.spec.latent_dim, generator=self.streams.torch["fitness"]).to(self.device)
            g_losses, d_losses, d_real = self._fitness(g_nets, d_nets, real, z)
            g_fit, d_fit = _aggregate(g_losses, grid["fitness_mode"]), _aggregate(d_losses, grid["fitness_mode"])
            beat()
        with timer("selection"):
            size, rng = grid["population_size"], self.streams.evolution
            winners_g = tournament(g_fit, size, grid["tournament_size"], rng)
            winners_d = tournament(d_fit, size, grid["tournament_size"], rng)
            new_g = [self._individual({**all_g[i], "fitness": g_fit[i]}, 0, k) for k, i in enumerate(winners_g)]
            new_d = [self._individual({**all_d[i], "fitness": d_fit[i]}, 1, k) for k, i in enumerate(winners_d)]
        with timer("train"):
            for individual in new_g + new_d:
                individual.net.train()
            g_loss, d_loss = self._train(new_g, new_d, beat)
        with timer("fitness"):
            for individual in new_g + new_d:
                individual.net.eval()
            g_new_losses, _, _ = self._fitness([i.net for i in new_g], d_nets, real, z, d_real)
            _, d_new_losses, _ = self._fitness(g_nets, [i.net for i in new_d], real, z)
            for individual, fitness in zip(new_g, _aggregate(g_new_losses, grid["fitness_mode"])):
                individual.fitness = float(fitness)
            for individual, fitness in zip(new_d, _aggregate(d_new_losses, grid["fitness_mode"])):
                individual.fitness = float(fitness)
            beat()
        with timer("replacement"):
            # This iteration's fitness of the local individuals (the neighbourhood's first entries are the
            # cell's own). New dicts: other cells on this rank read the old ones in this iteration.
            self.generators = [{**p, "fitness": float(g_fit[k])} for k, p in enumerate(self.generators)]
            self.discriminators = [{**p, "fitness": float(d_fit[k])} for k, p in enumerate(self.discriminators)]
            self.generators = replace_worst(self.generators, [i.payload() for i in new_g], grid["n_replacements"], self.only_better)
            self.discriminators = replace_worst(self.discriminators, [i.payload() for i in new_d], grid["n_replacements"], self.only_better)
        with timer("mixture"):
            # Each neighbour's population arrives best first: its first generator joins the mixture.
            firsts = np.cumsum([0] + [len(gathered[n]["generators"]) for n in self.neighbourhood[:-1]])
            self.score = self._evolve_mixture([g_nets[i] for i in firsts])
            beat()
        return IterationReport(
            g_loss, d_loss, self.generators[0]["fitness"], self.discriminators[0]["fitness"], self.score,
            self.generators[0]["lr"], self.discriminators[0]["lr"],
        )

    def final_mixture(self, gathered: dict[Cell, dict[str, list[Payload]]]) -> tuple[list[Payload], float]:
        """The cell's mixture after training (the neighbourhood's best generators) and its FID."""
        payloads = [gathered[n]["generators"][0] for n in self.neighbourhood]
        z = torch.randn(self.grid["score_sample_size"], self.spec.latent_dim, generator=self.streams.torch["mixture"])
        return payloads, self.mixture_score([self._net(p, 0, slot) for slot, p in enumerate(payloads)], self.weights, z)
