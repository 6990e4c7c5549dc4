"""Training mode ``data_parallel`` (seeds 003 and 004): one generator-discriminator pair replicated on
every MPI rank, each rank computing the gradients of its shard of every global batch, averaged by an
all-reduce before every optimiser step.

The global batch (``batch_size``) is what one optimiser step sees, whatever the rank count: rank r
takes rows [r*B/W, (r+1)*B/W), optionally in ``accumulation_steps`` micro-batches. Batch order and
noise are drawn for the whole global batch from generators every rank seeds alike; batch norm uses the
statistics of the global batch (parallel/sync_batchnorm.py) and dropout a mask fixed by each row's
global place (parallel/shard_dropout.py). So W ranks give one rank's result up to the order of
floating-point sums, with one micro-batch per rank. With ``accumulation_steps`` > 1 and batch norm they do
not: micro-batch m's statistics are then those of the m-th micro-batch of every rank's share (rows spread over
the global batch), not of one rank's m-th contiguous quarter, half, ... of it. Options (``data_parallel:`` of
the set-up): mixed precision, gradient accumulation, clipping by norm and ZeRO: stage 1 shards the optimiser
state (torch's
ZeroRedundancyOptimizer), stages 2 and 3 also the gradients and weights, optionally offloaded to the
host (parallel/sharding.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.config.typed import as_dict
from ganstudy.core.checkpoint import CheckpointStore
from ganstudy.core.seeding import pair_seeds
from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec, build_pair, get_network
from ganstudy.models.mixture import pair_generator
from ganstudy.parallel.process_group import backend_for, torch_process_group
from ganstudy.parallel.rank_work import shard_rows
from ganstudy.parallel.shard_dropout import ShardDropout, row_masks, shard_dropout
from ganstudy.parallel.sharding import Sharding, full_optimizer_state, full_state, load_full_state
from ganstudy.parallel.stop import StopSignal
from ganstudy.parallel.sync_batchnorm import globalise_batchnorm
from ganstudy.parallel.timing import RoutineTimer, profile_rows
from ganstudy.parallel.world import World
from ganstudy.train.fused_adam import AnyOptimizer
from ganstudy.train.modes import TrainingContext, TrainingResult
from ganstudy.train.network_spec import network_spec
from ganstudy.train.pair import PairTrainer
from ganstudy.train.score_curve import ScoreCurve, score_curve
from ganstudy.train.steps import optimizer_class
from ganstudy.train.tasks import Batch

AMP_TYPES = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def allreduce_mean(parameters: list[torch.nn.Parameter], world_size: int) -> None:
    """Average the gradients of ``parameters`` over the ranks, in one flat buffer (one collective)."""
    if world_size == 1:
        return
    grads = [p.grad for p in parameters if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= world_size
    for grad, part in zip(grads, flat.split([g.numel() for g in grads])):
        grad.copy_(part.view_as(grad))


class DataParallelTrainer(PairTrainer):
    def __init__(
        self,
        setup: TrainingSettings,
        spec: NetworkSpec,
        images: np.ndarray,
        labels: np.ndarray | None,
        seeds: dict[str, int],
        devices: tuple[torch.device, torch.device],
        world: World,
        curve: ScoreCurve | None = None,
        conditions: np.ndarray | None = None,
    ) -> None:
        options = setup.data_parallel
        self.world, self.zero1 = world, options.zero_stage == 1
        self.sharding = Sharding(options.zero_stage, options.offload == "cpu") if options.zero_stage >= 2 else None
        self.accumulation, self.clip_norm = options.accumulation_steps, options.clip_norm
        self.rows = shard_rows(setup.global_batch(world.size), world.size, self.accumulation)
        self.batch_norm = options.batch_norm
        self.amp = AMP_TYPES[options.amp]
        if self.amp is torch.float16 and devices[0].type != "cuda":
            raise GanstudyError("data_parallel.amp fp16 needs a GPU (compute.device cuda); on the CPU use bf16")
        if devices[0] != devices[1]:
            raise GanstudyError(
                "mode data_parallel keeps a rank's pair on one GPU (nccl binds a process to one): "
                "set compute.gpus_per_rank to 1"
            )
        super().__init__(setup, spec, images, labels, seeds, devices, name="pair", curve=curve, conditions=conditions)
        self.generator_dropout = any(isinstance(m, ShardDropout) for m in self.generator.modules())
        # Gradient scaling keeps fp16 gradients from underflowing; bf16 has fp32's range and needs none.
        self.scalers = {net: torch.amp.GradScaler("cuda", enabled=self.amp is torch.float16) for net in ("g", "d")}
        self.dropout_rng = torch.Generator().manual_seed(seeds["dropout"])
        self.timer = RoutineTimer()
        self.profile: list[dict[str, Any]] = []
        self.scoring_copy = None
        if self.sharding is not None and curve is not None:
            # The scorer reads whole weights on rank 0: a plain copy that each score gathers them into.
            with torch.random.fork_rng(devices=self._cuda):
                self.scoring_copy = self._adapt(build_pair(setup.network, spec)[0]).to(self.g_device)

    def _ranks(self) -> int:
        return self.world.size

    def _adapt(self, network: torch.nn.Module) -> torch.nn.Module:
        return shard_dropout(globalise_batchnorm(network) if self.batch_norm == "global" else network)

    def _place(self, network: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        network = network.to(device)
        return network if self.sharding is None else self.sharding.shard(network, device)

    def _optimizer(self, network: torch.nn.Module) -> AnyOptimizer:
        if not self.zero1 and self.sharding is None:
            return super()._optimizer(network)
        # torch.distributed's ZeRO and sharded state dicts read torch.optim's internals: its own Adam here.
        kind, options = optimizer_class(self.task.optimizer, self.setup.betas)
        if not self.zero1:
            return kind(network.parameters(), lr=self.lr, **options)
        # Imported here: torch.distributed.optim pulls in TorchScript, slow and noisy to import.
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return ZeroRedundancyOptimizer(network.parameters(), optimizer_class=kind, lr=self.lr, **options)

    def _autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        if self.amp is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=self.amp)

    def _diverged_message(self, d_loss: float, g_loss: float) -> str:
        message = super()._diverged_message(d_loss, g_loss)
        if self.amp is None:
            return message
        # Seen on an AMD EPYC with AVX512-BF16 and no AMX (torch 2.13, oneDNN 3.12): calo3d at 5x5x7 went NaN
        # after one step because oneDNN's avx512_core_bf16 kernel got a 3D convolution's weight gradient wrong.
        return (
            f"{message}; or train without data_parallel.amp: low precision can overflow, and on some CPUs "
            "oneDNN's bf16 kernels compute wrong gradients for convolutions whose kernel is larger than their "
            "input (docs/guide.md, Modes)"
        )

    def _call_seed(self) -> int:
        return int(torch.randint(0, 2**62, (1,), generator=self.dropout_rng))

    def _update(self, network: torch.nn.Module, optimizer: AnyOptimizer, scaler: torch.amp.GradScaler) -> None:
        parameters = list(network.parameters())
        if self.sharding is None:
            # (Sharded networks reduce-scatter their gradients' mean during the backward pass.)
            with self.timer("allreduce"):
                allreduce_mean(parameters, self.world.size)
        with self.timer("step"):
            if self.clip_norm is not None:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(parameters, self.clip_norm)
            scaler.step(optimizer)
            scaler.update()

    def _micro_batches(self, batch: Batch) -> Iterator[tuple[int, Batch]]:
        """(global offset, rows) of this rank's micro-batches of one global batch."""
        for m in range(self.accumulation):
            offset = (self.world.rank * self.accumulation + m) * self.rows
            yield offset, batch.rows(offset, self.rows)

    def _generator_seed(self) -> int:
        # Drawn only for generators with dropout (pix2pix), so the other networks' streams stay as they were.
        return self._call_seed() if self.generator_dropout else 0

    def _fakes(self, batch: Batch) -> list[torch.Tensor]:
        """This rank's fakes of each micro-batch, with their graphs, for a task that reuses them."""
        seed_g, fakes = self._generator_seed(), []
        for offset, part in self._micro_batches(batch):
            with self.timer("compute"), self._autocast(self.g_device), row_masks(self.generator, seed_g, offset):
                fakes.append(self.task.fake(self.generator, part))
        return fakes

    def _discriminator_update(
        self, batch: Batch, sides: tuple[str, ...] = ("real", "fake"), fakes: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        seed_real, seed_fake, seed_g = self._call_seed(), self._call_seed(), self._generator_seed()
        self.opt_d.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.d_device)
        for m, (offset, part) in enumerate(self._micro_batches(batch)):
            with self.timer("compute"):
                terms = []
                if "fake" in sides and fakes is not None:
                    fake = fakes[m].detach().to(self.d_device)
                elif "fake" in sides:
                    with torch.no_grad(), self._autocast(self.g_device), row_masks(self.generator, seed_g, offset):
                        fake = self.task.fake_for_discriminator(self.generator, part).to(self.d_device)
                with self._autocast(self.d_device):
                    if "real" in sides:
                        with row_masks(self.discriminator, seed_real, offset):
                            d_real = self.task.judge(self.discriminator, part.real, part)
                    if "fake" in sides:
                        with row_masks(self.discriminator, seed_fake, offset):
                            d_fake = self.task.judge(self.discriminator, fake, part)
                if "real" in sides:
                    terms.append(self.task.real_loss(self.loss, d_real.float(), part))
                if "fake" in sides:
                    terms.append(self.task.fake_loss(self.loss, d_fake.float(), part))
                value = sum(terms[1:], terms[0]) / self.accumulation
                self.scalers["d"].scale(value).backward()
            total += value.detach()
        self._update(self.discriminator, self.opt_d, self.scalers["d"])
        return total

    def _generator_update(self, batch: Batch, fakes: list[torch.Tensor] | None = None) -> torch.Tensor:
        seed = self._call_seed()
        seed_g = self._generator_seed() if fakes is None else 0
        self.opt_g.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.d_device)
        # The discriminator only passes gradients through: computing its own would be wasted work.
        self.discriminator.requires_grad_(False)
        try:
            for m, (offset, part) in enumerate(self._micro_batches(batch)):
                with self.timer("compute"):
                    if fakes is not None:
                        fake = fakes[m]
                    else:
                        with self._autocast(self.g_device), row_masks(self.generator, seed_g, offset):
                            fake = self.task.fake(self.generator, part)
                    with self._autocast(self.d_device), row_masks(self.discriminator, seed, offset):
                        d_fake = self.task.judge(self.discriminator, fake.to(self.d_device), part)
                    value = self.task.generator_loss(self.loss, d_fake.float(), fake.float(), part) / self.accumulation
                    self.scalers["g"].scale(value).backward()
                total += value.detach()
        finally:
            self.discriminator.requires_grad_(True)
        self._update(self.generator, self.opt_g, self.scalers["g"])
        return total

    def _one_pass(self) -> tuple[float, float]:
        # Every rank draws the whole global batch (noise included) and keeps its rows: the same numbers on any
        # rank count.
        totals = self._pass_totals()
        # Each rank's losses are those of its shard: the global batch's loss is their mean.
        if self.world.size > 1:
            dist.all_reduce(totals)
            totals /= self.world.size
        self.profile += [
            {
                "iteration": self.done + 1,
                "cell": f"shard{self.world.rank}",
                "rank": self.world.rank,
                "routine": name,
                "seconds": s,
            }
            for name, s in self.timer.take().items()
        ]
        return float(totals[0]) / self.steps, float(totals[1]) / self.steps

    def _stop_agreed(self, stop: StopSignal) -> bool:
        return stop.agreed(self.world.comm)

    def _scores_here(self) -> bool:
        # Every rank holds the same generator; eval-mode batch norm and dropout need no other rank.
        return self.world.is_root

    def _score(self, total: int) -> tuple[float | None, float]:
        if self.scoring_copy is not None and self._score_due(total):
            state = self.full_state(self.generator)  # every rank takes part
            if self.world.is_root:
                self.scoring_copy.load_state_dict(state)
        return super()._score(total)

    def _scoring_generator(self) -> torch.nn.Module:
        return self.generator if self.scoring_copy is None else self.scoring_copy

    def full_state(self, network: torch.nn.Module) -> dict[str, torch.Tensor]:
        """``network``'s whole state, in host memory; a collective when it is sharded (then only rank 0 gets it)."""
        if self.sharding is not None:
            return full_state(network)
        return {key: value.cpu() for key, value in network.state_dict().items()}

    def _network_state(self) -> dict[str, Any]:
        # A collective on every rank; only rank 0's is written.
        if self.sharding is not None:
            pairs = {"generator": (self.generator, self.opt_g), "discriminator": (self.discriminator, self.opt_d)}
            state = {}
            for name, (network, optimizer) in pairs.items():
                state[name] = full_state(network)
                state[f"opt_{name[0]}"] = full_optimizer_state(network, optimizer)
            return state
        if self.zero1:
            # Each rank holds a shard of the optimiser state; rank 0 gathers the whole.
            for optimizer in (self.opt_g, self.opt_d):
                optimizer.consolidate_state_dict(to=0)
        return super()._network_state() if self.world.is_root else {}

    def _load_network_state(self, state: dict[str, Any]) -> None:
        if self.sharding is None:
            super()._load_network_state(state)
            return
        load_full_state(self.generator, self.opt_g, state["generator"], state["opt_g"])
        load_full_state(self.discriminator, self.opt_d, state["discriminator"], state["opt_d"])

    def _state(self) -> dict[str, Any]:
        state = super()._state()
        if not self.world.is_root:
            return {}
        return {**state, "dropout_rng": self.dropout_rng.get_state(), "profile": self.profile}

    def _checkpoint(self, store: CheckpointStore) -> None:
        state = self._state()
        if self.world.is_root:
            store.write_part(self.done, "pair", state)
            store.complete(self.done)
        dist.barrier()

    def _load(self, state: dict[str, Any]) -> None:
        super()._load(state)
        self.dropout_rng.set_state(state["dropout_rng"])
        # Rank 0's profile of the iterations before the checkpoint; the other ranks' are lost with their process.
        self.profile = state["profile"] if self.world.is_root else []


def _plain_generator(trained: dict[str, torch.Tensor], network: str, spec: NetworkSpec) -> torch.nn.Module:
    """The trained weights in the registered network (plain batch norm and dropout layers), so that the
    generator artifact loads like any other mode's."""
    generator, _ = build_pair(network, spec)
    generator.load_state_dict(trained)
    return generator.eval()


def train_data_parallel(context: TrainingContext) -> TrainingResult | None:
    setup, data, world = context.setup, context.data, context.world
    conditional = get_network(setup.network).conditional
    spec = network_spec(setup, data, conditional=conditional, any_task=True)
    seeds = pair_seeds(context.study_seed, context.trial)
    with torch_process_group(world, context.device):
        trainer = DataParallelTrainer(
            setup,
            spec,
            data.images,
            data.labels if conditional else None,
            seeds,
            context.devices,
            world,
            score_curve(context),
            data.conditions if spec.condition_shape is not None else None,
        )
        report = trainer.report(context.progress) if context.world.is_root else None
        trainer.train(context.checkpoint_dir, context.stop, report=report)
        trained = trainer.full_state(trainer.generator)
        profiles = world.comm.gather(trainer.profile, root=0)
    if not world.is_root:
        return None
    generator = pair_generator(_plain_generator(trained, setup.network, spec), data.labels if conditional else None)
    options = setup.data_parallel
    return TrainingResult(
        generator,
        setup.network,
        spec,
        trainer.history,
        [row for part in profiles for row in part]
        + [r for r in profile_rows(trainer.history, "shard0", 0) if r["routine"] == "score"],
        seeds=seeds,
        facts={
            "data_parallel": {
                **as_dict(options),
                "global_batch": trainer.batch_size,
                "lr": trainer.lr,
                "rows_per_micro_batch": trainer.rows,
                "backend": backend_for(context.device),
            }
        },
    )
