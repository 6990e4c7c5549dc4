"""One cell of the grid: its random streams, its populations, the parts of an iteration that are the
cell's own (fitness sample, selection, mutation, replacement, mixture ES) and, for networks with no
stacked form, its training and fitness network by network. ``iteration.py`` runs the phases in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.core.seeding import derive_seed
from ganstudy.data.subsets import cell_subset
from ganstudy.evaluate.fid import FidScorer
from ganstudy.models import NetworkSpec
from ganstudy.parallel.exchange import placed
from ganstudy.parallel.keyed_dropout import keyed_masks
from ganstudy.parallel.topology import Cell, GridShape
from ganstudy.train.grid.draws import GridDraws
from ganstudy.train.grid.mixture_es import MixtureStep, candidate_fids
from ganstudy.train.grid.pool import NetworkPool
from ganstudy.train.grid.population import Individual, Payload, replace_worst, restore, set_learning_rate, tournament
from ganstudy.train.grid.stacked import FitnessCase
from ganstudy.train.losses import LOSSES
from ganstudy.train.steps import adam, discriminator_step, generator_step
from ganstudy.train.tasks import TASKS, Batch


def cell_label(cell: Cell) -> str:
    return f"{cell[0]}-{cell[1]}"


class GlobalStream:
    """A cell's stream for the draws a network takes from torch's global generators (on the CPU or on the
    cell's GPU) in its forward, which take no generator argument: Dropout2d's masks, say, where nn.Dropout's
    are keyed (``KeyedDropout``). The cell's state is swapped in around the cell's work and read back
    after it. A rank's global state depends on the process and on the cells it ran before; the cell's
    does not."""

    def __init__(self, seed: int, device: torch.device) -> None:
        self.cuda = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=self.cuda):
            torch.manual_seed(seed)
            self._state = self._read()

    def _read(self) -> dict[str, Any]:
        return {"cpu": torch.get_rng_state(), "cuda": [torch.cuda.get_rng_state(i) for i in self.cuda]}

    def state(self) -> dict[str, Any]:
        return self._state

    def load(self, state: dict[str, Any]) -> None:
        self._state = state

    @contextmanager
    def active(self) -> Iterator[None]:
        with torch.random.fork_rng(devices=self.cuda):
            torch.set_rng_state(self._state["cpu"])
            for index, cuda_state in zip(self.cuda, self._state["cuda"]):
                torch.cuda.set_rng_state(cuda_state, index)
            yield
            self._state = self._read()


class CellStreams:
    """The cell's random streams and seeds, each derived from (study seed, trial, cell, stream name):
    the seed of its tensor draws (``GridDraws``, counter-based), the numpy stream of its tournaments and
    mixture mutations, and the stream of any other draws its networks take from torch's global generators."""

    def __init__(self, study_seed: int, trial: int, cell: Cell, device: torch.device) -> None:
        seed = lambda name: derive_seed(study_seed, trial, "cell", cell[0], cell[1], name)  # noqa: E731
        self.evolution = np.random.default_rng(seed("evolution"))
        self.dropout = GlobalStream(seed("dropout"), device)
        self.data_seed = seed("data")
        self.init_seed = seed("init")
        self.draw_seed = seed("draws")

    def state(self) -> dict[str, Any]:
        return {"evolution": self.evolution.bit_generator.state, "dropout": self.dropout.state()}

    def load(self, state: dict[str, Any]) -> None:
        self.evolution.bit_generator.state = state["evolution"]
        self.dropout.load(state["dropout"])


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
        setup: TrainingSettings,
        spec: NetworkSpec,
        images: torch.Tensor,
        labels: np.ndarray,
        scorer: FidScorer,
        streams: CellStreams,
        pool: NetworkPool,
    ) -> None:
        self.cell, self.setup, self.grid = cell, setup, setup.grid
        self.spec, self.images, self.scorer = spec, images, scorer
        self.streams, self.pool, self.device = streams, pool, pool.device
        self.betas = setup.betas
        self.neighbourhood = shape.neighbourhood(cell)
        self.loss = LOSSES.get("bce" if setup.loss == "mustangs" else setup.loss)
        self.task = TASKS.get("noise")(setup)
        self.only_better = self.grid.replacement == "better"
        # A fixed per-cell subset of the training split: its classes, then data dieting.
        classes = self.grid.cell_classes[shape.index(cell)] if self.grid.cell_classes else None
        self.subset = cell_subset(labels, self.grid.data_ratio, classes, setup.batch_size, streams.data_seed)
        self.generators: list[Payload] = []
        self.discriminators: list[Payload] = []
        self.weights = np.full(len(self.neighbourhood), 1.0 / len(self.neighbourhood))
        self.score = float("inf")

    def _net(self, payload: Payload, kind: int, slot: int) -> nn.Module:
        return self.pool.loaded(payload["params"], kind, slot).eval()

    def initialise(self) -> None:
        """Population slots seeded by the cell's init stream: the same networks on every rank layout."""
        label = cell_label(self.cell)
        for kind, population, name in ((0, self.generators, "G"), (1, self.discriminators, "D")):
            for slot in range(self.grid.population_size):
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(derive_seed(self.streams.init_seed, kind, slot))
                    net = self.pool.build(kind)
                optimizer = adam(net.parameters(), self.setup.lr, self.betas)
                population.append(
                    Individual(net, optimizer, self.setup.lr, float("inf"), f"{label}/{name}{slot}").payload()
                )

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
        """A checkpoint's state (read to the host) back in the cell, its populations on the cell's device."""
        self.generators, self.discriminators = placed((state["generators"], state["discriminators"]), self.device)
        self.weights, self.score = state["weights"].numpy().copy(), state["score"]
        self.streams.load(state["streams"])

    # -- the parts of one iteration (the rank's engine runs them for all its cells) ---------------
    def neighbourhood_payloads(
        self, gathered: dict[Cell, dict[str, list[Payload]]]
    ) -> tuple[list[Payload], list[Payload]]:
        """The neighbourhood's generators and discriminators, the cell's own first."""
        return (
            [p for n in self.neighbourhood for p in gathered[n]["generators"]],
            [p for n in self.neighbourhood for p in gathered[n]["discriminators"]],
        )

    def aggregate(self, losses: np.ndarray) -> np.ndarray:
        """Fitness of each row's individual from its losses against every opponent (columns)."""
        return {"average": losses.mean(axis=1), "worst": losses.max(axis=1), "best": losses.min(axis=1)}[
            self.grid.fitness_mode
        ]

    def select(
        self, all_g: list[Payload], all_d: list[Payload], g_fit: np.ndarray, d_fit: np.ndarray
    ) -> tuple[list[Payload], list[Payload]]:
        """Tournament winners from the neighbourhood, as payloads carrying this iteration's fitness."""
        size, rng = self.grid.population_size, self.streams.evolution
        winners_g = tournament(g_fit, size, self.grid.tournament_size, rng)
        winners_d = tournament(d_fit, size, self.grid.tournament_size, rng)
        return (
            [{**all_g[i], "fitness": float(g_fit[i])} for i in winners_g],
            [{**all_d[i], "fitness": float(d_fit[i])} for i in winners_d],
        )

    def steps(self) -> int:
        return len(self.subset) // self.setup.batch_size

    def d_updates(self, step: int) -> bool:
        """Whether the discriminators train at ``step`` (Lipizzaner's discriminator skip)."""
        skip = self.grid.discriminator_skip
        return skip == 0 or step % (skip + 1) == 0

    def replace(self, g_fit: np.ndarray, d_fit: np.ndarray, new_g: list[Payload], new_d: list[Payload]) -> None:
        """The worst local individuals give way to the trained ones (grid.replacement decides when)."""
        grid = self.grid
        # This iteration's fitness of the local individuals (the neighbourhood's first entries are the
        # cell's own). New dicts: other cells on this rank read the old ones in this iteration.
        self.generators = [{**p, "fitness": float(g_fit[k])} for k, p in enumerate(self.generators)]
        self.discriminators = [{**p, "fitness": float(d_fit[k])} for k, p in enumerate(self.discriminators)]
        self.generators = replace_worst(self.generators, new_g, grid.n_replacements, self.only_better)
        self.discriminators = replace_worst(self.discriminators, new_d, grid.n_replacements, self.only_better)

    def mixture_step(
        self, gathered: dict[Cell, dict[str, list[Payload]]], z: torch.Tensor, evolve: bool = True
    ) -> MixtureStep:
        """The mixture of the neighbourhood's best generators on the noise ``z``: its current weights and,
        with ``evolve`` and more than one generator, the (1+1)-ES's mutation of them by N(0, sigma)."""
        # Each neighbour's population arrives best first: its first generator joins the mixture.
        firsts = [gathered[n]["generators"][0] for n in self.neighbourhood]
        candidates = [self.weights]
        if evolve and len(firsts) > 1:
            mutated = np.clip(
                self.weights + self.streams.evolution.normal(0.0, self.grid.mixture_sigma, len(self.weights)), 0, None
            )
            if mutated.sum() > 0:
                candidates.append(mutated / mutated.sum())
        return MixtureStep(firsts, z, candidates)

    def span_images(self, step: MixtureStep) -> torch.Tensor:
        """The components' images of their spans of the step's noise, laid end to end (network by network)."""
        batch = self.setup.batch_size * 10
        z = step.z.to(self.device)
        with torch.no_grad(), self.streams.dropout.active():
            return torch.cat(
                [
                    self._net(p, 0, slot)(z[offset : min(offset + batch, end)])
                    for slot, (p, (start, end)) in enumerate(zip(step.generators, step.spans))
                    for offset in range(start, end, batch)
                ]
            )

    def settle(self, step: MixtureStep, features: np.ndarray) -> float:
        """Keep the mutated weights when their mixture's FID is lower (``features``: the classifier's, on
        the host, of the step's span images); the kept mixture's FID."""
        scores = candidate_fids(self.scorer, step, features)
        best = 1 if len(scores) == 2 and scores[1] < scores[0] else 0
        self.weights, self.score = step.candidates[best], scores[best]
        return self.score

    def report(self, g_loss: float, d_loss: float) -> IterationReport:
        return IterationReport(
            g_loss,
            d_loss,
            self.generators[0]["fitness"],
            self.discriminators[0]["fitness"],
            self.score,
            self.generators[0]["lr"],
            self.discriminators[0]["lr"],
        )

    # -- the per-cell loop (networks that have no stacked form) ---------------------------------
    def loop_fitness(self, case: FitnessCase) -> tuple[np.ndarray, np.ndarray | None]:
        """Losses of every generator against every discriminator ([Kg, Kd]) and the reverse ([Kd, Kg];
        None when the case wants the generators' alone)."""
        g_nets = [self._net(p, 0, slot) for slot, p in enumerate(case.generators)]
        d_nets = [self._net(p, 1, slot) for slot, p in enumerate(case.discriminators)]
        with torch.no_grad(), self.streams.dropout.active():
            d_real = [None if case.generators_only else d(case.real) for d in d_nets]
            g_losses = np.zeros((len(g_nets), len(d_nets)))
            d_losses = np.zeros((len(d_nets), len(g_nets)))
            for i, g in enumerate(g_nets):
                fake = g(case.z)
                for j, d in enumerate(d_nets):
                    out = d(fake)
                    g_losses[i, j] = float(self.loss.generator(out))
                    if not case.generators_only:
                        d_losses[j, i] = float(self.loss.discriminator(d_real[j], out))
        return g_losses, None if case.generators_only else d_losses

    def loop_train(
        self, new_g: list[Payload], new_d: list[Payload], iteration: int, beat: Callable[[], None], whole: bool
    ) -> tuple[list[Payload], list[Payload], float, float]:
        """One pass over the cell's images, network by network, its draws in the engine's layout (``whole``);
        the trained payloads and mean losses."""
        # Pool slots past the fitness views': those nets are reloaded while these train.
        slots = len(self.neighbourhood) * self.grid.population_size
        gs = [restore(p, self.pool.loaded(p["params"], 0, slots + k), self.betas) for k, p in enumerate(new_g)]
        ds = [restore(p, self.pool.loaded(p["params"], 1, slots + k), self.betas) for k, p in enumerate(new_d)]
        for individual in gs + ds:
            individual.net.train()
        with self.streams.dropout.active():
            g_loss, d_loss = self._train_pass(gs, ds, GridDraws([self], iteration, whole, self.steps()), beat)
        for individual in gs + ds:
            individual.net.eval()
        return [i.payload() for i in gs], [i.payload() for i in ds], g_loss, d_loss

    def _train_pass(
        self, gs: list[Individual], ds: list[Individual], draws: GridDraws, beat: Callable[[], None]
    ) -> tuple[float, float]:
        """The updates of one pass over the cell's images; the mean G and D losses."""
        steps, batch = self.steps(), self.setup.batch_size
        (order,) = draws.batch_orders(steps * batch)
        g_total, d_total, d_steps = 0.0, 0.0, 0
        for step in range(steps):
            real = self.images[order[step * batch : (step + 1) * batch]]
            g_total += self._updates(draws, step, "g", gs, ds, real)
            if self.d_updates(step):
                d_total += self._updates(draws, step, "d", ds, gs, real)
                d_steps += 1
            beat()
        return g_total / max(1, steps * len(gs)), d_total / max(1, d_steps * len(ds))

    def _updates(
        self,
        draws: GridDraws,
        step: int,
        player: str,
        attackers: list[Individual],
        opponents: list[Individual],
        real: torch.Tensor,
    ) -> float:
        """Each attacker's update against this step's defender; the sum of their losses."""
        drawn = draws.update(step, player, np.array([[a.lr for a in attackers]]), [len(opponents)])
        defender, loss, total = opponents[drawn.defenders[0]], drawn.losses[0], 0.0
        update = generator_step if player == "g" else discriminator_step
        attacker_kind = 0 if player == "g" else 1
        for attacker, lr, noise, keys in zip(attackers, drawn.lrs[0], drawn.noise, drawn.dropout):
            attacker.lr = float(lr)
            set_learning_rate(attacker.optimizer, attacker.lr)
            with keyed_masks(attacker.net, keys[attacker_kind]), keyed_masks(defender.net, keys[1 - attacker_kind]):
                total += float(
                    update(self.task, attacker.net, defender.net, attacker.optimizer, loss, Batch(real, (noise,)))
                )
        return total
