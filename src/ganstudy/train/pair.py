"""One generator against one discriminator over passes of a data set: the loop of the modes single,
conditional and per_class. Checkpoints hold every random state, so a resumed run is bit-identical
to an uninterrupted one.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.config.typed import as_dict
from ganstudy.core.checkpoint import CheckpointStore, checkpoint_due, run_fingerprint
from ganstudy.data.subsets import batches_per_pass
from ganstudy.models import NetworkSpec, build_pair, get_network
from ganstudy.parallel.stop import StopSignal
from ganstudy.parallel.timing import profile_rows
from ganstudy.study.outcomes import TrainingDiverged
from ganstudy.train.fused_adam import AnyOptimizer
from ganstudy.train.losses import LOSSES
from ganstudy.train.progress import Progress, TrainerReport
from ganstudy.train.score_curve import ScoreCurve
from ganstudy.train.steps import call_network, discriminator_step, generator_step, make_optimizer
from ganstudy.train.tasks import TASKS, Batch, Task, TrainingData


def discriminator_updates(task: Task) -> tuple[tuple[str, ...], ...]:
    """The sides of the batch each of a step's discriminator updates sees: both at once, or (3DGAN) the
    real batch and then the fake batch. The losses of split updates add up to one joint update's."""
    return (("real",), ("fake",)) if task.split_discriminator else (("real", "fake"),)


class PairTrainer:
    """Trains a freshly initialised pair; ``labels`` is given for conditional networks only, ``conditions``
    (input images, primary energies) for networks of the paired and energy tasks.

    The generator lives on ``devices[0]`` and the discriminator (and the real images) on
    ``devices[1]``: the same device, or two GPUs as in seed 001. Batch order and noise come from CPU
    generators and dropout from torch's global generator, seeded here and saved with each checkpoint.
    """

    def __init__(
        self,
        setup: TrainingSettings,
        spec: NetworkSpec,
        images: np.ndarray,
        labels: np.ndarray | None,
        seeds: dict[str, int],
        devices: tuple[torch.device, torch.device],
        name: str = "pair",
        curve: ScoreCurve | None = None,
        conditions: np.ndarray | None = None,
    ) -> None:
        self.setup, self.spec, self.seeds, self.name = setup, spec, seeds, name
        self.g_device, self.d_device = devices
        self.batch_size = setup.global_batch(self._ranks())
        self.lr = setup.rank_lr(self._ranks())
        self.steps = batches_per_pass(len(images), self.batch_size, f"training images of {name}")
        self.images = torch.from_numpy(images).to(self.d_device)
        self.labels = None if labels is None else torch.from_numpy(labels).to(self.d_device)
        self.task = TASKS.get(get_network(setup.network).task)(setup)
        self.data = TrainingData(
            self.images, self.labels, None if conditions is None else torch.from_numpy(conditions).to(self.d_device)
        )
        self._cuda = sorted({d.index or 0 for d in devices if d.type == "cuda"})
        with torch.random.fork_rng(devices=self._cuda):
            torch.manual_seed(seeds["init"])
            self.generator, self.discriminator = (self._adapt(net) for net in build_pair(setup.network, spec))
            torch.manual_seed(seeds["dropout"])
            self._global_rng = self._read_global_rng()
        self.generator = self._place(self.generator, self.g_device)
        self.discriminator = self._place(self.discriminator, self.d_device)
        self.loss = LOSSES.get(setup.loss)
        self.opt_g = self._optimizer(self.generator)
        self.opt_d = self._optimizer(self.discriminator)
        self.batch_rng = torch.Generator().manual_seed(seeds["batches"])
        self.noise_rng = torch.Generator().manual_seed(seeds["noise"])
        self.curve = curve
        if curve is not None and not curve.held_out:
            fixed = torch.Generator().manual_seed(seeds["score"])
            self.score_noise = torch.randn(curve.samples, spec.latent_dim, generator=fixed).to(self.g_device)
            # A conditional pair draws the fixed batch's labels from the training split: the classes' prior.
            rows = torch.randint(len(images), (curve.samples,), generator=fixed)
            self.score_labels = None if self.labels is None else self.labels[rows.to(self.d_device)]
        self.done = 0
        self.history: list[dict[str, float]] = []

    def _ranks(self) -> int:
        """Ranks training this pair together (data parallelism shares it out)."""
        return 1

    def _adapt(self, network: torch.nn.Module) -> torch.nn.Module:
        """A freshly initialised network as this trainer trains it (data parallelism swaps layers)."""
        return network

    def _place(self, network: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """The network on the device it trains on (data parallelism may also shard it there)."""
        return network.to(device)

    def _optimizer(self, network: torch.nn.Module) -> AnyOptimizer:
        return make_optimizer(self.task.optimizer, network.parameters(), self.lr, self.setup.betas)

    def _set_lr(self, iteration: int) -> None:
        # A function of the iteration alone, so a resumed run continues the schedule without saving it.
        lr = self.lr * self.task.lr_factor(iteration)
        for optimizer in (self.opt_g, self.opt_d):
            for group in optimizer.param_groups:
                group["lr"] = lr

    def _read_global_rng(self) -> dict[str, Any]:
        return {"cpu": torch.get_rng_state(), "cuda": [torch.cuda.get_rng_state(i) for i in self._cuda]}

    def _write_global_rng(self, state: dict[str, Any]) -> None:
        torch.set_rng_state(state["cpu"])
        for index, cuda_state in zip(self._cuda, state["cuda"]):
            torch.cuda.set_rng_state(cuda_state, index)

    def _fakes(self, batch: Batch) -> Any:
        """The fakes of a task that reuses them, with their graph."""
        return self.task.fake(self.generator, batch)

    def _discriminator_update(self, batch: Batch, sides: tuple[str, ...], fakes: Any) -> torch.Tensor:
        return discriminator_step(
            self.task, self.discriminator, self.generator, self.opt_d, self.loss, batch, sides, fakes
        )

    def _generator_update(self, batch: Batch, fakes: Any = None) -> torch.Tensor:
        return generator_step(self.task, self.generator, self.discriminator, self.opt_g, self.loss, batch, fakes)

    def _step(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step on a global batch's rows, made of the task's updates: (discriminator loss, mean generator loss)."""
        batch = self.task.draw(self.data, rows, self.noise_rng, self.g_device)
        fakes = self._fakes(batch) if self.task.reuse_fakes else None
        d_loss = torch.zeros((), device=self.d_device)
        for sides in discriminator_updates(self.task):
            d_loss += self._discriminator_update(batch, sides, fakes)
        if fakes is not None:
            return d_loss, self._generator_update(batch, fakes)
        g_loss = torch.zeros((), device=self.d_device)
        for _ in range(self.task.generator_steps):
            g_loss += self._generator_update(self.task.draw(self.data, rows, self.noise_rng, self.g_device))
        return d_loss, g_loss / self.task.generator_steps

    def _pass_totals(self) -> torch.Tensor:
        """(discriminator, generator) losses summed over one pass's steps."""
        order = torch.randperm(len(self.images), generator=self.batch_rng).to(self.d_device)
        totals = torch.zeros(2, device=self.d_device)
        for step in range(self.steps):
            totals += torch.stack(self._step(order[step * self.batch_size : (step + 1) * self.batch_size]))
        return totals

    def _one_pass(self) -> tuple[float, float]:
        totals = self._pass_totals()
        return float(totals[0]) / self.steps, float(totals[1]) / self.steps

    @property
    def score_column(self) -> str:
        """The in-training score's column in losses.csv."""
        return "fid" if self.curve is None else self.curve.column

    def report(self, progress: Progress, fixed: dict[str, Any] | None = None) -> TrainerReport:
        """This trainer's progress report: its losses and its in-training score."""
        return progress.trainer(self.name, self.setup.iterations, ("d_loss", "g_loss", self.score_column), fixed)

    def train(
        self,
        checkpoint_dir: Path | None = None,
        stop: StopSignal | None = None,
        final_checkpoint: bool = False,
        report: TrainerReport | None = None,
    ) -> torch.nn.Module:
        """Run the set-up's iterations (resuming from the newest readable checkpoint in
        ``checkpoint_dir``); returns the generator in eval mode, on its device. When ``stop`` has seen a
        scheduler's signal, a checkpoint is written after the current iteration and TrainingStopped
        raised. ``final_checkpoint`` keeps the finished state too (per-class runs: a restarted job
        skips the classes it finished). ``report`` gets every iteration's row (progress lines, live
        losses.csv)."""
        store = self._store(checkpoint_dir)
        if store is not None:
            self._restore(store)
        if report is not None:
            report.restored(self.history)
        period = self.setup.checkpoint_period
        total = self.setup.iterations
        column = self.score_column
        with torch.random.fork_rng(devices=self._cuda):
            self._write_global_rng(self._global_rng)
            for iteration in range(self.done, total):
                started = time.perf_counter()
                self._set_lr(iteration + 1)
                d_loss, g_loss = self._one_pass()
                self.done = iteration + 1
                finite = math.isfinite(d_loss) and math.isfinite(g_loss)
                seconds = time.perf_counter() - started
                # Every later step would only spread the NaN: stop before scoring or checkpointing it.
                score, score_seconds = self._score(total) if finite else (None, 0.0)
                self.history.append(
                    {
                        "iteration": self.done,
                        "d_loss": d_loss,
                        "g_loss": g_loss,
                        column: score,
                        "seconds": seconds,
                        "score_seconds": score_seconds,
                    }
                )
                if not finite:
                    raise self._diverged(d_loss, g_loss)
                if report is not None:
                    report.row(self.history[-1])
                stopping = stop is not None and self._stop_agreed(stop)
                if store is not None and (stopping or checkpoint_due(self.done, total, period, final_checkpoint)):
                    self._global_rng = self._read_global_rng()
                    self._checkpoint(store)
                if stopping:
                    raise stop.stopped(self.name, self.done, str(store.directory) if store else None)
        self.generator.eval()
        return self.generator

    def _diverged(self, d_loss: float, g_loss: float) -> TrainingDiverged:
        """The run's outcome when its losses are no longer finite, with the message that says what to check."""
        return TrainingDiverged(
            self._diverged_message(d_loss, g_loss),
            {
                self.name: {
                    "iteration": self.done,
                    "iterations": self.setup.iterations,
                    "d_loss": d_loss,
                    "g_loss": g_loss,
                }
            },
            list(self.history),
            profile_rows(self.history, self.name, 0),
        )

    def _diverged_message(self, d_loss: float, g_loss: float) -> str:
        return (
            f"{self.name}: the losses are not finite after iteration {self.done} of {self.setup.iterations} "
            f"(d_loss {d_loss}, g_loss {g_loss}), so the weights are lost to NaN or inf: lower the set-up's lr "
            f"(now {self.lr:g}) or look for non-finite values in the training data"
        )

    def _scores_here(self) -> bool:
        """Whether this process scores (ranks training one pair together leave it to one)."""
        return True

    def _score_due(self, total: int) -> bool:
        """Whether the score curve takes a point after this iteration (on every rank alike)."""
        curve = self.curve
        return curve is not None and (self.done % curve.period == 0 or self.done == total)

    def _scoring_generator(self) -> torch.nn.Module:
        """The generator as the scorer reads it."""
        return self.generator

    def _score(self, total: int) -> tuple[float | None, float]:
        """(score, seconds) after this iteration when one is due, else (None, 0): an empty cell in
        losses.csv."""
        curve = self.curve
        if not self._score_due(total) or not self._scores_here():
            return None, 0.0
        started = time.perf_counter()
        generator = self._scoring_generator()
        if curve.held_out:
            return curve.scorer.score(generator), time.perf_counter() - started
        generator.eval()
        with torch.no_grad():
            images = call_network(generator, self.score_noise, self.score_labels)
        generator.train()
        return curve.scorer.fid(images, curve.label), time.perf_counter() - started

    def _stop_agreed(self, stop: StopSignal) -> bool:
        """Whether to stop after this iteration; ranks training one pair together must agree."""
        return stop.requested

    def _store(self, checkpoint_dir: Path | None) -> CheckpointStore | None:
        # Without periodic checkpoints (checkpoint_period 0) the store still takes a stop signal's one.
        if checkpoint_dir is None:
            return None
        identity = {"setup": as_dict(self.setup), "seeds": self.seeds, "name": self.name}
        return CheckpointStore(checkpoint_dir / self.name, self.setup.checkpoints_kept, run_fingerprint(identity))

    def _checkpoint(self, store: CheckpointStore) -> None:
        store.write_part(self.done, "pair", self._state())
        store.complete(self.done)

    def _network_state(self) -> dict[str, Any]:
        """The networks' and optimisers' states as a checkpoint holds them."""
        return {
            "generator": self.generator.state_dict(),
            "discriminator": self.discriminator.state_dict(),
            "opt_g": self.opt_g.state_dict(),
            "opt_d": self.opt_d.state_dict(),
        }

    def _load_network_state(self, state: dict[str, Any]) -> None:
        self.generator.load_state_dict(state["generator"])
        self.discriminator.load_state_dict(state["discriminator"])
        self.opt_g.load_state_dict(state["opt_g"])
        self.opt_d.load_state_dict(state["opt_d"])

    def _state(self) -> dict[str, Any]:
        return {
            "done": self.done,
            "history": self.history,
            **self._network_state(),
            "batch_rng": self.batch_rng.get_state(),
            "noise_rng": self.noise_rng.get_state(),
            "global_rng": self._global_rng,
        }

    def _restore(self, store: CheckpointStore) -> None:
        if warning := store.unmatched_warning():
            print(f"ganstudy: {self.name}: {warning}", file=sys.stderr, flush=True)
        for iteration in reversed(store.iterations()):
            try:
                state = store.read_part(iteration, "pair")
            except ValueError as exc:
                print(
                    f"ganstudy: warning: checkpoint {exc} is unreadable; trying the previous one",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            self._load(state)
            print(
                f"ganstudy: {self.name} resumed from the checkpoint of iteration {iteration}",
                file=sys.stderr,
                flush=True,
            )
            return

    def _load(self, state: dict[str, Any]) -> None:
        self._load_network_state(state)
        self.batch_rng.set_state(state["batch_rng"])
        self.noise_rng.set_state(state["noise_rng"])
        self._global_rng = state["global_rng"]
        self.done, self.history = state["done"], state["history"]
