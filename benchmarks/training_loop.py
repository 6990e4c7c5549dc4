"""Throughput of the single-GAN baseline: our training mode vs a bare PyTorch loop doing the same work.

Same networks (Lipizzaner 4LP), data (digits train split), batch (100), losses and steps per batch;
the bare loop has no registry, no seeding helpers, no history, no progress bar. Prints one JSON line:
{"ours_samples_per_s": ..., "bare_samples_per_s": ..., "ratio": ...}
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

from ganstudy.config import validate_study_config
from ganstudy.data.arrays import load_split
from ganstudy.data.prepare import prepare_dataset
from ganstudy.models import build_pair
from ganstudy.parallel.world import mpi_world
from ganstudy.train.modes import TrainingContext, get_mode
from ganstudy.train.single import network_spec

ITERATIONS = 20
REPEATS = 5
SCHEMA = "workflow/schemas/config.schema.yaml"


def bare_loop(images: torch.Tensor, setup: dict, spec) -> None:
    torch.manual_seed(0)
    generator, discriminator = build_pair("perceptron4", spec)
    # The same optimizer kernel as ours: the comparison is about loop overhead.
    opt_g = torch.optim.Adam(generator.parameters(), lr=setup["lr"], betas=tuple(setup["betas"]), fused=True)
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=setup["lr"], betas=tuple(setup["betas"]), fused=True)
    batch = setup["batch_size"]
    steps = len(images) // batch
    ones, zeros = torch.ones(batch), torch.zeros(batch)
    for _ in range(setup["iterations"]):
        order = torch.randperm(len(images))
        for step in range(steps):
            real = images[order[step * batch : (step + 1) * batch]]
            with torch.no_grad():
                fake = generator(torch.randn(batch, spec.latent_dim))
            d_loss = F.binary_cross_entropy(discriminator(real), ones) + F.binary_cross_entropy(discriminator(fake), zeros)
            opt_d.zero_grad(set_to_none=True)
            d_loss.backward()
            opt_d.step()
            g_loss = F.binary_cross_entropy(discriminator(generator(torch.randn(batch, spec.latent_dim))), ones)
            opt_g.zero_grad(set_to_none=True)
            g_loss.backward()
            opt_g.step()


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        prepare_dataset("digits", None, 0.2, 2026, tmp)
        data = load_split(f"{tmp}/train.npz")
    setup = validate_study_config({"setups": {"b": {"iterations": ITERATIONS}}}, SCHEMA)["setups"]["b"]
    spec = network_spec(setup, data)
    images = torch.from_numpy(data.images)
    samples = ITERATIONS * (len(images) // setup["batch_size"]) * setup["batch_size"]
    train_single = get_mode("single")
    context = TrainingContext(setup, data, 2026, 0, mpi_world(), torch.device("cpu"))
    ours, bare = [], []
    # Interleaved repeats, so that a slow spell of the machine hits both loops alike.
    for _ in range(REPEATS):
        started = time.perf_counter()
        train_single(context)
        ours.append(samples / (time.perf_counter() - started))
        started = time.perf_counter()
        bare_loop(images, setup, spec)
        bare.append(samples / (time.perf_counter() - started))
    result = {
        "ours_samples_per_s": round(statistics.median(ours), 1),
        "bare_samples_per_s": round(statistics.median(bare), 1),
        "ratio": round(statistics.median(ours) / statistics.median(bare), 3),
        "iterations": ITERATIONS,
        "repeats": REPEATS,
        "threads": 1,
    }
    print(json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
