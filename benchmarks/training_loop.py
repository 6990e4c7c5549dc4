"""Throughput of the single-GAN baseline: our training mode vs a bare PyTorch loop doing the same work.

Same networks (Lipizzaner 4LP), data (digits train split), batch (100), losses (BCE on the
discriminator's logits) and steps per batch; the bare loop has no registry, no seeding helpers, no
history, no progress bar. One torch thread, in this process; each figure is the median of interleaved
repeats (full: 20 iterations x 5 repeats; --quick: 1 x 1).

ours_samples_per_s, bare_samples_per_s: training images per second of each loop.
ratio: ours / bare (ideal 1.0: our loop adds no overhead).
grid_train_samples_per_s, grid_train_ratio: the same for the training pass of a 1x1 grid (the grid
mode's "train" routine: the same updates, with the grid's drawn noise, defenders and learning-rate
mutations; the fitness, mixture and scores of its iterations are not counted): the grid engine's
overhead per update, which grows with each thing a cell draws per update.
iterations, repeats, threads: the sizes measured.
Prints one JSON record last (benchmarks/common.py).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from common import emit, interleaved_medians, parser, setup
from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.data.arrays import load_split
from ganstudy.data.prepare import prepare_dataset
from ganstudy.models import build_pair
from ganstudy.parallel.world import mpi_world
from ganstudy.train.job import job_settings
from ganstudy.train.modes import TrainingContext, get_mode
from ganstudy.train.network_spec import network_spec
from grid_scaling import score_inputs

FULL = {"iterations": 20, "repeats": 5}
QUICK = {"iterations": 1, "repeats": 1}


def bare_loop(images: torch.Tensor, setup: dict, spec) -> None:
    torch.manual_seed(0)
    generator, discriminator = build_pair("perceptron4", spec)
    # The same optimizer kernel as ours: the comparison is about loop overhead.
    opt_g = torch.optim.Adam(generator.parameters(), lr=setup["lr"], betas=tuple(setup["betas"]), fused=True)
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=setup["lr"], betas=tuple(setup["betas"]), fused=True)
    batch = setup["batch_size"]
    steps = len(images) // batch
    ones, zeros = torch.ones(batch), torch.zeros(batch)
    bce = F.binary_cross_entropy_with_logits  # the discriminators return logits
    for _ in range(setup["iterations"]):
        order = torch.randperm(len(images))
        for step in range(steps):
            real = images[order[step * batch : (step + 1) * batch]]
            with torch.no_grad():
                fake = generator(torch.randn(batch, spec.latent_dim))
            d_loss = bce(discriminator(real), ones) + bce(discriminator(fake), zeros)
            opt_d.zero_grad(set_to_none=True)
            d_loss.backward()
            opt_d.step()
            # As ours: the discriminator only passes gradients through to the generator.
            discriminator.requires_grad_(False)
            g_loss = bce(discriminator(generator(torch.randn(batch, spec.latent_dim))), ones)
            opt_g.zero_grad(set_to_none=True)
            g_loss.backward()
            discriminator.requires_grad_(True)
            opt_g.step()


def main() -> None:
    args = parser(__doc__).parse_args()
    size = QUICK if args.quick else FULL
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        prepare_dataset("digits", None, 0.2, 2026, tmp)
        data = load_split(folder / "train.npz")
        # The grid scores its cells: a classifier of one epoch is enough to time the training pass.
        score_inputs(folder, epochs=1)
        torch.set_num_threads(1)  # after the classifier's training, which sets its own
        settings = setup({"iterations": size["iterations"]})
        typed = TrainingSettings.of(job_settings(settings))
        grid_typed = TrainingSettings.of(
            job_settings(
                setup(
                    {
                        "iterations": size["iterations"],
                        "mode": "grid",
                        "grid": {"shape": "1x1", "fitness_sample_size": 100, "score_sample_size": 100},
                    }
                )
            )
        )
        spec = network_spec(typed, data)
        images = torch.from_numpy(data.images)
        samples = size["iterations"] * (len(images) // settings["batch_size"]) * settings["batch_size"]
        cpu = torch.device("cpu")
        context = TrainingContext(typed, data, 2026, 0, mpi_world(), cpu)
        grid_context = TrainingContext(
            grid_typed,
            data,
            2026,
            0,
            mpi_world(),
            cpu,
            classifier_path=folder / "classifier.pt",
            reference_path=folder / "reference.npz",
        )
        timed = {"ours": lambda: get_mode("single")(context), "bare": lambda: bare_loop(images, settings, spec)}

        def seconds(name: str, _repeat: int) -> float:
            if name == "grid":
                profile = get_mode("grid")(grid_context).profile
                return sum(row["seconds"] for row in profile if row["routine"] == "train")
            started = time.perf_counter()
            timed[name]()
            return time.perf_counter() - started

        median = interleaved_medians(seconds, [*timed, "grid"], size["repeats"])
    results = {
        "ours_samples_per_s": round(samples / median["ours"], 1),
        "bare_samples_per_s": round(samples / median["bare"], 1),
        "ratio": round(median["bare"] / median["ours"], 3),
        "grid_train_samples_per_s": round(samples / median["grid"], 1),
        "grid_train_ratio": round(median["bare"] / median["grid"], 3),
        **size,
        "threads": 1,
    }
    emit("training_loop", results, args)


if __name__ == "__main__":
    main()
