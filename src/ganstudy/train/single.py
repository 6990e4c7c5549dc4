"""Training mode ``single``: one generator against one discriminator (the non-distributed baseline)."""

from __future__ import annotations

import time
from typing import Any

import torch
from tqdm import tqdm

from ganstudy.data.arrays import Split
from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.mixture import MixtureGenerator
from ganstudy.seeding import derive_seed
from ganstudy.train.losses import LOSSES
from ganstudy.train.modes import TRAINING_MODES, TrainingContext, TrainingResult
from ganstudy.train.steps import adam, discriminator_step, generator_step


def network_spec(setup: dict[str, Any], data: Split) -> NetworkSpec:
    return NetworkSpec(data.image_shape, setup["latent_dim"], setup["hidden_units"])


def batches_per_pass(size: int, batch_size: int) -> int:
    if batch_size > size:
        raise GanstudyError(
            f"batch_size {batch_size} is larger than the {size} training images; lower batch_size in the set-up"
        )
    # Full batches only: every step sees the same batch size, as in Lipizzaner.
    return size // batch_size


@TRAINING_MODES.register("single")
def train_single(context: TrainingContext) -> TrainingResult:
    setup, world = context.setup, context.world
    if world.size != 1:
        raise GanstudyError(
            f"training mode 'single' runs on 1 MPI rank, but the job has {world.size}; "
            "give the set-up 1 task or choose a distributed mode"
        )
    spec = network_spec(setup, context.data)
    seeds = {name: derive_seed(context.study_seed, context.trial, name) for name in ("init", "batches", "noise")}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seeds["init"])
        generator, discriminator = build_pair(setup["network"], spec)
    generator.to(context.device)
    discriminator.to(context.device)
    loss = LOSSES.get(setup["loss"])
    betas = tuple(setup["betas"])
    opt_g = adam(generator.parameters(), setup["lr"], betas)
    opt_d = adam(discriminator.parameters(), setup["lr"], betas)
    # Random numbers come from CPU generators, so a run draws the same numbers on any device.
    batch_rng = torch.Generator().manual_seed(seeds["batches"])
    noise_rng = torch.Generator().manual_seed(seeds["noise"])

    images = torch.from_numpy(context.data.images).to(context.device)
    batch_size = setup["batch_size"]
    steps = batches_per_pass(len(images), batch_size)
    history, profile = [], []
    for iteration in tqdm(range(setup["iterations"]), desc="train", unit="it", disable=None, mininterval=5):
        started = time.perf_counter()
        order = torch.randperm(len(images), generator=batch_rng).to(context.device)
        d_total = torch.zeros((), device=context.device)
        g_total = torch.zeros((), device=context.device)
        for step in range(steps):
            real = images[order[step * batch_size : (step + 1) * batch_size]]
            z_d = torch.randn(batch_size, spec.latent_dim, generator=noise_rng).to(context.device)
            z_g = torch.randn(batch_size, spec.latent_dim, generator=noise_rng).to(context.device)
            d_total += discriminator_step(discriminator, generator, opt_d, loss, real, z_d)
            g_total += generator_step(generator, discriminator, opt_g, loss, z_g)
        seconds = time.perf_counter() - started
        history.append(
            {"iteration": iteration + 1, "d_loss": float(d_total) / steps, "g_loss": float(g_total) / steps, "seconds": seconds}
        )
        profile.append({"iteration": iteration + 1, "cell": "0-0", "rank": 0, "routine": "train", "seconds": seconds})
    generator.eval()
    return TrainingResult(MixtureGenerator([generator.cpu()], [1.0]), setup["network"], spec, history, profile, seeds=seeds)
